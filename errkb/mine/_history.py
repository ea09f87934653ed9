"""API history: the errors Python raises when code written for one release meets another.

Given several releases of one distribution, each an unpacked source folder, griffe loads each
release's public API statically (no import, no execution) and :func:`griffe.find_breaking_changes`
lists what broke between consecutive releases. This module adds what griffe leaves out:

- where a removed name went: the same name, of the same kind, defined elsewhere in the newer
  release is *moved*; a removed function whose whole body forwarded to another public name that
  survives (a deprecation shim) is *renamed* to it; so is a removed member when exactly one
  member of the same kind appeared beside it with the same parameters and the same non-empty
  docstring;
- names, members and keywords a newer release *added* (griffe reports breakages only), for
  code written for the newer release that meets an older one: the names the top-level package
  offers (:func:`errkb.mine._presence.exports`, lazy tables included), the members of the
  classes it offers, the keywords of their functions;
- names the top-level package no longer offers (griffe does not report a removed import);
- one change per member whatever the number of classes that show it (the class that defines
  it, its subclasses, overrides and copies), naming them in ``skew.classes``;
- names reached through a module ``__getattr__`` (lazy modules such as transformers') are not
  called removed while the newer release still defines them somewhere.

A change is stated between the last mined release before it (``lastBefore``) and the first
mined release with it (``changedIn``); the releases of the distribution in between were not
read, and the record says so (``skew.exact``). Its pins name a release known to work: the
last that has a removed name (``pkg<=lastBefore``), the first that has an added one
(``pkg>=changedIn``), and :func:`check_pins` checks, at mine time, that each pin resolves to
such a release (:func:`errkb.mine._presence.has_change` reads one release's files).

Each change becomes a schema-v2 record (tags ``mined`` and ``skew``) whose pattern matches the
message Python itself prints: ``cannot import name``, ``No module named``, ``has no
attribute``, ``got an unexpected keyword argument``, ``missing 1 required ... argument``.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import itertools
import re
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb._attrs import attrs
from errkb.mine._presence import exports, has_change, has_name

if TYPE_CHECKING:
    from collections.abc import Mapping

    import griffe

__all__ = ["check_pins", "has_change", "history_records", "load_api", "resolve_pin"]

#: Folders at a release's root that are never the distribution's API.
_NOT_API = frozenset({"tests", "test", "testing", "docs", "examples", "benchmarks", "scripts"})
#: Module names that hold placeholders rather than API: transformers' and diffusers'
#: ``utils/dummy_*_objects.py`` define a stand-in for each class whose backend is missing.
_PLACEHOLDER = re.compile(r"dummy_\w*objects")
#: The most classes a member's pattern names one by one; above, it captures any class name.
_MAX_NAMED = 12
#: How many unchecked releases the documentation names one by one.
_MAX_LISTED = 4
#: Kinds a removed name must share with a name elsewhere to count as moved.
_MOVABLE = ("class", "function", "module")


def load_api(root: Path) -> dict[str, griffe.Module]:
    """Load the public top-level packages found in one release's folder, statically.

    Args:
        root: an unpacked wheel or sdist (the folder holding the packages).

    Returns:
        Package name -> griffe module, each in a modules collection of its own release.
    """
    import griffe

    collection = griffe.ModulesCollection()
    out: dict[str, griffe.Module] = {}
    for folder in sorted(root.iterdir()):
        name = folder.name
        if not (folder / "__init__.py").is_file() or not name.isidentifier():
            continue
        if name.startswith("_") or name in _NOT_API:
            continue
        module = griffe.load(
            name,
            search_paths=[root],
            allow_inspection=False,
            modules_collection=collection,
            resolve_aliases=False,
        )
        if isinstance(module, griffe.Module):
            out[name] = module
    return out


@attrs.frozen(kw_only=True)
class _Change:
    """One API change between two consecutive releases, before it becomes a record."""

    change: str  # removed, renamed, moved, added, required
    what: str  # module, name, member, keyword, required
    name: str  # dotted name of what changed (a keyword as ``pkg.func(k)``)
    module: str = ""  # the module the name was imported from (module-level names)
    #: qualified names of the classes an instance or class of shows the member on
    owners: tuple[str, ...] = ()
    member: str = ""  # the member, keyword or parameter name
    function: str = ""  # the function's qualified name, for TypeError messages
    keyword_only: bool = False
    replacement: str | None = None
    #: The base class that still defines a member its former subclasses no longer inherit.
    inherited_from: str = ""
    #: The class that defines the member (the base its subclasses inherit it from).
    base: str = ""


@attrs.frozen(kw_only=True)
class _Span:
    """Where a change lies in the releases: between two mined ones, and what was not read."""

    before: str  # the last mined release before the change
    after: str  # the first mined release with it
    between: tuple[str, ...] = ()  # releases of the list strictly between, not read
    family: tuple[str, ...] = ()  # every release of the list, to say "4.39.x"
    until: str | None = None  # an added name's last mined release, when a later one lacks it

    @property
    def exact(self) -> bool:
        return not self.between


def history_records(
    dist: str,
    versions: Sequence[tuple[str, Path]],
    releases: Sequence[str] = (),
    read: Callable[[str], Path | None] | None = None,
) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Records for the errors of version skew between consecutive releases of ``dist``.

    Args:
        dist: the distribution's name on PyPI.
        versions: ``(version, source folder)`` pairs, oldest first: the releases mined.
        releases: every release of the distribution, oldest first (the mined ones may be a
            few of them); empty: the mined ones. A change between two mined releases with
            others between them is not exact (``skew.exact``), and pins name only mined
            releases.
        read: gives the unpacked folder of a release of ``releases`` that was not mined
            (``None`` when it cannot). With it, each change with releases between is placed
            exactly: :func:`has_change` asks the releases between, halving the range each
            time, and the record names the release it found (``exact`` true). A change some
            release cannot answer for keeps its range.

    Returns:
        The records (schema-v2 dicts) and counts: records kept per change kind
        (``removed-name``, ``added-member``, ...), what was left out and why
        (``skipped-private``, ``skipped-dynamic``, ``skipped-kwargs``, ``skipped-other``), and
        the pins checked (:func:`check_pins`: ``pins-verified``, ``pins-wrong``,
        ``pins-unchecked``).
    """
    counts: Counter[str] = Counter()
    family = _release_list([v for v, _ in versions], releases)
    apis = [(version, load_api(root)) for version, root in versions]
    offered = [
        {p: exports(root, p) for p in api}
        for (_, root), (_, api) in zip(versions, apis, strict=True)
    ]
    surfaces = [
        _surface(root).union(*names.values())
        for (_, root), names in zip(versions, offered, strict=True)
    ]
    newest = apis[-1][0] if apis else None
    oldest = apis[0][0] if apis else None
    made: dict[str, tuple[_Change, _Span]] = {}
    for i, ((before, old), (after, new)) in enumerate(itertools.pairwise(apis)):
        surface = surfaces[i] | surfaces[i + 1]
        between = tuple(family[family.index(before) + 1 : family.index(after)])
        span = _Span(before=before, after=after, between=between, family=tuple(family))
        for package, old_module in old.items():
            new_module = new.get(package)
            if new_module is None:
                continue
            found = list(_changes(old_module, new_module, counts))
            changes = itertools.chain(
                found,
                _offered_changes(
                    old=offered[i][package],
                    new=offered[i + 1][package],
                    new_module=new_module,
                    known={c.name for c in found},
                ),
                _added_members(old_module, new_module, surface, counts),
            )
            for change in changes:
                if not _on_surface(change, surface):
                    counts["skipped-internal"] += 1
                    continue
                key = _key(dist, change, after)
                if key not in made:
                    made[key] = (change, span)
                    counts[f"{change.change}-{change.what}"] += 1
    folders: dict[str, Path | None] = dict(versions)
    if read is not None:
        made = _placed(dist, made, functools.partial(_folder, folders, read), counts)
    records = [
        _record(dist, change, span, oldest, newest) for change, span in _bounded(made).values()
    ]
    given = {v: f for v, f in folders.items() if f is not None}
    counts.update(check_pins(records, family, given))
    return records, dict(sorted(counts.items()))


def _folder(
    folders: dict[str, Path | None], read: Callable[[str], Path | None], version: str
) -> Path | None:
    """A release's folder, read once."""
    if version not in folders:
        folders[version] = read(version)
    return folders[version]


def _placed(
    dist: str,
    made: dict[str, tuple[_Change, _Span]],
    folder: Callable[[str], Path | None],
    counts: Counter[str],
) -> dict[str, tuple[_Change, _Span]]:
    """Each change with releases between placed exactly, by halving the range (see ``read``).

    A change is assumed to stay once made (a name removed is not added back in between).
    """
    out: dict[str, tuple[_Change, _Span]] = {}
    for change, found in made.values():
        span = (
            found
            if found.exact
            else _place(_record(dist, change, found, None, None), found, folder)
        )
        if not found.exact:
            counts["placed" if span.exact else "not-placed"] += 1
        out[_key(dist, change, span.after)] = (change, span)
    return out


def _place(record: dict[str, Any], span: _Span, folder: Callable[[str], Path | None]) -> _Span:
    """The span narrowed to two neighbouring releases, or as it was if one cannot answer."""
    low, high = 0, len(span.between)  # the first release with the change is between[low:high+1]
    while low < high:
        middle = (low + high) // 2
        where = folder(span.between[middle])
        answer = has_change(where, record) if where is not None else None
        if answer is None:
            return span
        low, high = (low, middle) if answer else (middle + 1, high)
    names = (span.before, *span.between, span.after)
    return attrs.evolve(span, before=names[low], after=names[low + 1], between=())


def _release_list(mined: Sequence[str], releases: Sequence[str]) -> list[str]:
    """Every release, oldest first: the list given, with any mined release it lacks put in place."""
    from errkb.records import release_key

    out = list(dict.fromkeys(releases))
    for version in mined:
        if version in out:
            continue
        key = release_key(version)
        place = len(out)
        if key is not None:
            later = [i for i, v in enumerate(out) if (k := release_key(v)) is not None and k > key]
            place = later[0] if later else len(out)
        out.insert(place, version)
    return out


def _bounded(made: dict[str, tuple[_Change, _Span]]) -> dict[str, tuple[_Change, _Span]]:
    """Added names that a later mined release removed again: their span says until when."""
    gone: dict[str, list[_Span]] = {}
    for change, span in made.values():
        if change.change in ("removed", "renamed", "moved"):
            gone.setdefault(change.name, []).append(span)
    out = {}
    for key, (change, span) in made.items():
        later = [s for s in gone.get(change.name, ()) if _after(s.before, span.after, span)]
        if change.change == "added" and later:
            first = min(later, key=lambda s: span.family.index(s.before))
            out[key] = (change, attrs.evolve(span, until=first.before))
        else:
            out[key] = (change, span)
    return out


def _after(version: str, than: str, span: _Span) -> bool:
    """Whether ``version`` is ``than`` or a later release of the list."""
    return span.family.index(version) >= span.family.index(than)


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _surface(root: Path) -> frozenset[str]:
    """The names a release's top-level packages offer users.

    Every identifier their ``__init__.py`` mentions: imports, ``__all__``, and the strings of
    a lazy import table, as transformers keeps them.
    """
    text = "\n".join(
        init.read_text(encoding="utf-8", errors="replace") for init in root.glob("*/__init__.py")
    )
    return frozenset(_IDENTIFIER.findall(text))


def _on_surface(c: _Change, surface: frozenset[str]) -> bool:
    """Whether a change is one users' code meets.

    Every module and module-level name (an import names any module, as vendored code does),
    but members, keywords and parameters only of the classes and functions the top-level
    packages offer. Internal classes churn release after release; their members would be tens
    of thousands of records no user hits.
    """
    if c.what in ("module", "name"):
        return True
    if c.what == "member":
        return any(owner.rpartition(".")[2] in surface for owner in c.owners) or (
            c.module.rpartition(".")[2] in surface
        )
    owner = c.function.split(".")[0] if c.function else c.name.split("(")[0].rpartition(".")[2]
    return owner in surface


def _changes(old: griffe.Module, new: griffe.Module, counts: Counter[str]) -> Iterator[_Change]:
    import griffe

    defined = _definitions(new)
    members: dict[str, _Change] = {}
    for breakage in griffe.find_breaking_changes(old, new):
        for change in _from_breakage(breakage, new, defined, counts):
            if change.what != "member":
                yield change
                continue
            # One record per removed member, naming every class that showed it, however many.
            key = f"{change.name}|{change.inherited_from}"
            known = members.get(key)
            owners = (known.owners if known else ()) + change.owners
            members[key] = attrs.evolve(known or change, owners=tuple(dict.fromkeys(owners)))
    yield from _merged(list(members.values()), old, new)
    yield from _added_keywords(old, new, counts)


def _from_breakage(
    breakage: griffe.Breakage,
    new: griffe.Module,
    defined: dict[str, list[tuple[str, str]]],
    counts: Counter[str],
) -> list[_Change]:
    """The changes one griffe breakage stands for (none for those no message shows)."""
    import griffe

    try:
        if isinstance(breakage, griffe.ObjectRemovedBreakage):
            change = _removed(breakage.obj, new, defined, counts)
            return [change] if change is not None else []
        if isinstance(breakage, griffe.ParameterRemovedBreakage):
            return list(_keyword(breakage.obj, breakage.old_value, "removed", counts))
        required = (griffe.ParameterChangedRequiredBreakage, griffe.ParameterAddedRequiredBreakage)
        if isinstance(breakage, required):
            return list(_required(breakage.obj, breakage.new_value, counts))
    except (griffe.AliasResolutionError, griffe.CyclicAliasError, KeyError):
        counts["skipped-unresolved"] += 1
        return []
    counts["skipped-other"] += 1
    return []


def _private(obj: Any) -> bool:
    """Whether any part of the object's dotted path is private, a test module, or a dunder."""
    parts = str(obj.path).split(".")
    return any(
        (p.startswith("_") and p != "__init__") or p in _NOT_API or _PLACEHOLDER.fullmatch(p)
        for p in parts
    )


def _kind(obj: Any) -> str:
    try:
        return str(obj.kind.value)
    except Exception:  # an alias that does not resolve
        return "alias"


def _definitions(module: griffe.Module) -> dict[str, list[tuple[str, str]]]:
    """Public names defined (not imported) anywhere in a package: name -> [(path, kind)]."""
    out: dict[str, list[tuple[str, str]]] = {}

    def walk(obj: Any) -> None:
        for name, member in obj.members.items():
            if member.is_alias or name.startswith("_"):
                continue
            out.setdefault(name, []).append((member.path, _kind(member)))
            if member.is_module or member.is_class:
                walk(member)

    walk(module)
    return out


def _dynamic(obj: Any) -> bool:
    """Whether a module or class answers unknown attributes itself (``__getattr__``)."""
    return "__getattr__" in obj.members or (
        obj.is_module and "sys.modules[__name__]" in "".join(obj.lines or ())
    )


def _removed(
    obj: Any, new: griffe.Module, defined: dict[str, list[tuple[str, str]]], counts: Counter[str]
) -> _Change | None:
    name = obj.name
    parent = obj.parent
    if _private(obj) or name.startswith("_"):
        counts["skipped-private"] += 1
        return None
    kind = _kind(obj)
    new_parent = _counterpart(new, parent.path)
    elsewhere = [p for p, k in defined.get(name, ()) if k == kind and k in _MOVABLE]
    if parent.is_module:
        if new_parent is not None and _dynamic(new_parent) and name in defined:
            counts["skipped-dynamic"] += 1
            return None
        replacement = _forwarded_to(obj, new) or _renamed(obj, parent, new_parent)
        change = "renamed" if replacement else "removed"
        if replacement is None and elsewhere:
            replacement, change = min(elsewhere, key=lambda p: (p.count("."), p)), "moved"
        what = "module" if kind == "module" and not obj.is_alias else "name"
        return _Change(
            change=change,
            what=what,
            name=obj.path,
            module=parent.path,
            member=name,
            replacement=replacement,
        )
    if new_parent is not None and _dynamic(new_parent):
        counts["skipped-dynamic"] += 1
        return None
    canonical = obj.target_path if obj.is_alias else obj.path
    if obj.is_alias and _counterpart(new, canonical) is not None:
        # The base still defines it: the class stopped inheriting it (its bases changed).
        return _Change(
            change="removed",
            what="member",
            name=canonical,
            module=parent.path,
            owners=(parent.path,),
            member=name,
            inherited_from=canonical.rsplit(".", 2)[-2],
            base=canonical.rsplit(".", 1)[0],
        )
    replacement = _forwarded_to(obj, new) or _renamed(obj, parent, new_parent)
    owner = canonical.rsplit(".", 1)[0]
    return _Change(
        change="renamed" if replacement else "removed",
        what="member",
        name=canonical,
        owners=tuple(dict.fromkeys((owner, parent.path))),
        member=name,
        replacement=replacement,
        base=owner,
    )


def _counterpart(new: griffe.Module, path: str) -> Any:
    parts = path.split(".")
    if parts[0] != new.name:
        return None
    obj: Any = new
    try:
        for part in parts[1:]:
            obj = obj.members[part]
            if obj.is_alias:
                obj = obj.final_target
    except Exception:  # not there, or an alias that does not resolve
        return None
    return obj


def _forwarded_to(obj: Any, new: griffe.Module) -> str | None:
    """The public name a removed function forwarded to, when that was all it did.

    A deprecation shim warns or logs, then returns ``self.other(...)`` or ``other(...)``; when
    ``other`` still exists in the newer release, the function was renamed to it.
    """
    try:
        target = obj.final_target if obj.is_alias else obj
        if not target.is_function:
            return None
        tree = ast.parse(textwrap.dedent(target.source))
    except Exception:
        return None
    func = tree.body[0] if tree.body else None
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    body = [s for s in func.body if not (isinstance(s, ast.Expr) and _is_text_or_call(s.value))]
    if len(body) != 1 or not isinstance(body[0], ast.Return):
        return None
    call = body[0].value
    if not isinstance(call, ast.Call):
        return None
    callee = call.func
    if isinstance(callee, ast.Attribute) and isinstance(callee.value, ast.Name):
        if callee.value.id not in ("self", "cls"):
            return None
        home = target.parent.path
        name = callee.attr
    elif isinstance(callee, ast.Name):
        home = target.parent.path
        name = callee.id
    else:
        return None
    if name.startswith("_") or name == target.name:
        return None
    survivor = _counterpart(new, f"{home}.{name}")
    if survivor is None or not survivor.is_function:
        return None
    return f"{home}.{name}"


def _is_text_or_call(node: ast.expr) -> bool:
    """A docstring, or a bare call (``warnings.warn(...)``, ``logger.warning_once(...)``)."""
    return (isinstance(node, ast.Constant) and isinstance(node.value, str)) or isinstance(
        node, ast.Call
    )


def _renamed(obj: Any, parent: Any, new_parent: Any) -> str | None:
    """The one newly appeared neighbour with the same parameters and docstring, if any."""
    if new_parent is None or obj.is_alias or not obj.is_function or not obj.docstring:
        return None
    params = [p.name for p in obj.parameters]
    candidates = []
    for name, member in new_parent.members.items():
        if name in parent.members or name.startswith("_") or member.is_alias:
            continue
        if not member.is_function or [p.name for p in member.parameters] != params:
            continue
        doc = member.docstring.value if member.docstring else ""
        if doc and doc == obj.docstring.value:
            candidates.append(member.path)
    return candidates[0] if len(candidates) == 1 else None


def _function_name(func: Any) -> str:
    return f"{func.parent.name}.{func.name}" if func.parent.is_class else func.name


def _keyword(func: Any, param: Any, change: str, counts: Counter[str]) -> Iterator[_Change]:
    import griffe

    if _private(func) or (func.name.startswith("_") and func.name != "__init__"):
        counts["skipped-private"] += 1
        return
    if param.kind in (griffe.ParameterKind.positional_only, griffe.ParameterKind.var_positional):
        counts["skipped-other"] += 1
        return
    if param.name.startswith("_"):
        counts["skipped-private"] += 1
        return
    if param.kind is griffe.ParameterKind.var_keyword or param.name in ("self", "cls"):
        counts["skipped-other"] += 1
        return
    if any(p.kind is griffe.ParameterKind.var_keyword for p in func.parameters):
        counts["skipped-kwargs"] += 1
        return
    yield _Change(
        change=change,
        what="keyword",
        name=f"{func.path}({param.name})",
        member=param.name,
        function=_function_name(func),
    )


def _required(func: Any, param: Any, counts: Counter[str]) -> Iterator[_Change]:
    import griffe

    if _private(func) or (func.name.startswith("_") and func.name != "__init__"):
        counts["skipped-private"] += 1
        return
    if param.kind in (griffe.ParameterKind.var_positional, griffe.ParameterKind.var_keyword):
        return
    yield _Change(
        change="required",
        what="parameter",
        name=f"{func.path}({param.name})",
        member=param.name,
        function=_function_name(func),
        keyword_only=param.kind is griffe.ParameterKind.keyword_only,
    )


def _added_keywords(old: Any, new: Any, counts: Counter[str]) -> Iterator[_Change]:
    """Keywords of functions found in both releases that only the newer release accepts."""
    import griffe

    for name, member in old.members.items():
        if member.is_alias or (name.startswith("_") and name != "__init__") or name in _NOT_API:
            continue
        counterpart = new.members.get(name)
        if counterpart is None or counterpart.is_alias:
            continue
        if member.is_module or member.is_class:
            if member.is_class == counterpart.is_class:
                yield from _added_keywords(member, counterpart, counts)
            continue
        if not (member.is_function and counterpart.is_function):
            continue
        kinds = {p.kind for p in member.parameters}
        if griffe.ParameterKind.var_keyword in kinds:
            continue
        known = {p.name for p in member.parameters}
        for param in counterpart.parameters:
            if param.name not in known:
                yield from _keyword(member, param, "added", counts)


def _offered_changes(
    *, old: frozenset[str], new: frozenset[str], new_module: griffe.Module, known: set[str]
) -> Iterator[_Change]:
    """What ``from package import X`` finds in one release and not the other: one change each.

    A name the newer release offers no more is *moved* when the package still defines it
    elsewhere, else removed; names griffe already reported (``known``) are left to it.
    """
    package = new_module.name
    for name in sorted(new - old):
        yield _Change(
            change="added", what="name", name=f"{package}.{name}", module=package, member=name
        )
    gone = [n for n in sorted(old - new) if f"{package}.{n}" not in known]
    defined = _definitions(new_module) if gone else {}
    for name in gone:
        elsewhere = [p for p, kind in defined.get(name, ()) if kind in _MOVABLE]
        replacement = min(elsewhere, key=lambda p: (p.count("."), p)) if elsewhere else None
        yield _Change(
            change="moved" if replacement else "removed",
            what="name",
            name=f"{package}.{name}",
            module=package,
            member=name,
            replacement=replacement,
        )


def _added_members(
    old: griffe.Module, new: griffe.Module, surface: frozenset[str], counts: Counter[str]
) -> Iterator[_Change]:
    """Members the classes the package offers gained, own or inherited: one change per member.

    Grouped by the class that defines the member, so that a method added to a base class is
    one change naming every class that shows it.
    """
    found: dict[str, _Change] = {}
    for cls in _classes(old):
        if cls.name not in surface:
            continue
        counterpart = _counterpart(new, cls.path)
        if counterpart is None or not getattr(counterpart, "is_class", False):
            continue
        try:
            before = set(cls.all_members)
            after = counterpart.all_members
        except Exception:  # a base that does not resolve
            counts["skipped-unresolved"] += 1
            continue
        for name, member in after.items():
            if name in before or name.startswith("_"):
                continue
            path = member.target_path if member.is_alias else member.path
            if _private_path(path):
                continue
            known = found.get(path)
            owners = (known.owners if known else ()) + (cls.path,)
            found[path] = _Change(
                change="added",
                what="member",
                name=path,
                owners=owners,
                member=name,
                base=path.rsplit(".", 1)[0],
            )
    yield from _merged(list(found.values()), old, new)


def _merged(changes: list[_Change], old: Any, new: Any) -> list[_Change]:
    """Member changes that are one change, made one: naming every class that shows it.

    A subclass that overrides a member its base gained or lost in the same release, and the
    same class defined in two modules (transformers' ``modular_*`` templates beside the
    generated files), share one record under the class highest in the hierarchy.
    """
    groups: dict[tuple[str, str, str, str], list[_Change]] = {}
    for c in changes:
        key = (c.change, c.member, c.inherited_from, _short(c.replacement or ""))
        groups.setdefault(key, []).append(c)
    out: list[_Change] = []
    for group in groups.values():
        api = new if group[0].change == "added" else old
        roots: list[_Change] = []
        for c in sorted(group, key=lambda c: (-len(c.owners), c.name)):
            above = _ancestors(api, c.base)
            for i, r in enumerate(roots):
                if r.base in above or _short(r.base) == _short(c.base):  # c overrides r's
                    roots[i] = attrs.evolve(r, owners=tuple(dict.fromkeys(r.owners + c.owners)))
                    break
                if c.base in _ancestors(api, r.base):  # r overrides c's
                    roots[i] = attrs.evolve(c, owners=tuple(dict.fromkeys(c.owners + r.owners)))
                    break
            else:
                roots.append(c)
        out += roots
    return out


def _ancestors(api: Any, path: str) -> frozenset[str]:
    """The qualified names of a class's bases, all the way up (empty when they do not resolve)."""
    cls = _counterpart(api, path)
    try:
        return frozenset(base.path for base in cls.mro())
    except Exception:  # not a class, or a base that does not resolve
        return frozenset()


def _classes(module: Any) -> Iterator[Any]:
    """The public classes a package defines (not imports), nested modules and classes included."""
    for name, member in module.members.items():
        if member.is_alias or name.startswith("_") or name in _NOT_API:
            continue
        if _PLACEHOLDER.fullmatch(name):
            continue
        if member.is_class:
            yield member
            yield from _classes(member)
        elif member.is_module:
            yield from _classes(member)


def _private_path(path: str) -> bool:
    return any(p.startswith("_") for p in path.split("."))


# ---- records -------------------------------------------------------------------------------


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _pattern_and_message(change: _Change) -> tuple[str, str, str, list[str]]:
    """(pattern, a message as Python prints it, error class, other acceptable classes)."""
    e = re.escape
    if change.what == "module":
        package, _, leaf = change.name.rpartition(".")
        message = f"No module named '{change.name}'"
        pattern = f"No module named '{e(change.name)}'"
        if package:
            pattern += f"|cannot import name '{e(leaf)}' from '{e(package)}'"
        return pattern, message, "ImportError", []
    if change.what == "name":
        mod, name = e(change.module), e(change.member)
        message = f"cannot import name '{change.member}' from '{change.module}'"
        # A lazy module (transformers') words its AttributeError without quotes.
        pattern = (
            f"cannot import name '{name}' from '{mod}'"
            f"|module (?:'{mod}'|{mod}) has no attribute (?:'{name}'|{name}\\b)"
        )
        return pattern, message, "ImportError", ["AttributeError"]
    if change.what == "member":
        shown = sorted({_short(o) for o in change.owners})
        if len(shown) > _MAX_NAMED:
            group = r"(?P<cls>\w+)"
        else:
            group = "|".join(e(o) for o in shown)
            group = f"(?:{group})" if len(shown) > 1 else group
        example = _short(change.base) if _short(change.base) in shown else shown[0]
        message = f"'{example}' object has no attribute '{change.member}'"
        # "'Cls' object has no attribute" for an instance, "type object 'Cls' ..." for the class.
        pattern = f"(?:type object )?'{group}'(?: object)? has no attribute '{e(change.member)}'"
        return pattern, message, "AttributeError", []
    qualified = change.function
    bare = _short(qualified)
    prefix = f"(?<![\\w.])(?:{e(qualified.rsplit('.', 1)[0])}\\.)?" if "." in qualified else ""
    prefix = prefix or "(?<![\\w.])"
    if change.what == "keyword":
        message = f"{qualified}() got an unexpected keyword argument '{change.member}'"
        pattern = f"{prefix}{e(bare)}\\(\\) got an unexpected keyword argument '{e(change.member)}'"
        return pattern, message, "TypeError", []
    kind = "keyword-only" if change.keyword_only else "positional"
    message = f"{qualified}() missing 1 required {kind} argument: '{change.member}'"
    pattern = (
        f"{prefix}{e(bare)}\\(\\) missing \\d+ required {kind} arguments?: "
        f"(?:'[^']*'(?:, | and |,? and ))*'{e(change.member)}'"
    )
    return pattern, message, "TypeError", []


def _unchecked(span: _Span) -> str:
    """The releases between, as few words as say them: ``4.39.x``, ``0.5.1, 0.5.2``."""
    series: dict[str, list[str]] = {}
    for version in span.between:
        series.setdefault(".".join(version.split(".")[:2]), []).append(version)
    words = []
    for prefix, members in series.items():
        whole = [v for v in span.family if ".".join(v.split(".")[:2]) == prefix]
        words += [f"{prefix}.x"] if len(members) > 1 and members == whole else members
    if len(words) > _MAX_LISTED:
        return f"{len(span.between)} releases, {span.between[0]} to {span.between[-1]},"
    return ", ".join(words)


def _when(dist: str, span: _Span) -> str:
    """``in pkg 2.0``, or ``between pkg 1.0 and 3.0 (2.0 not checked)``."""
    if span.exact:
        return f"in {dist} {span.after}"
    return f"between {dist} {span.before} and {span.after} ({_unchecked(span)} not checked)"


def _pins(dist: str, span: _Span) -> tuple[str, str]:
    """(the pin to the last release with the old form, the pin to the first with the new)."""
    upgrade = f"{dist}>={span.after}" + (f",<={span.until}" if span.until else "")
    return f"pip install '{dist}<={span.before}'", f"pip install '{upgrade}'"


def _classes_words(c: _Change) -> str:
    """``GenerationMixin`` (and the N classes that inherit it)."""
    base = _short(c.base)
    others = len({o for o in c.owners if o != c.base})
    if not others:
        return f"`{base}`"
    classes = "class that inherits" if others == 1 else "classes that inherit"
    return f"`{base}` (and the {others:,} {classes} it)"


def _facts(dist: str, c: _Change, span: _Span) -> tuple[str, list[str]]:
    """The documentation and the solutions, in plain generated words."""
    name = f"`{c.member}`"
    before, after = span.before, span.after
    pin_old, pin_new = _pins(dist, span)
    last = "the last release that has it" if span.exact else "the last release known to have it"
    if c.change == "added":
        upto = f" and removed again after {span.until}" if span.until else ""
        if c.what == "keyword":
            subject = f"`{c.function}()` accepts the keyword {name}: it was added"
        elif c.what == "member":
            subject = f"{name} was added to {_classes_words(c)}"
        else:
            subject = f"{name} was added"
        older = "older releases lack it" if span.exact else f"{before} and older lack it"
        doc = f"{subject} {_when(dist, span)}{upto}; {older}: upgrade to >= {after}."
        solutions = [f"Upgrade {dist}: {pin_new}."]
        if c.what == "keyword":
            solutions.append(f"Or leave out {name}, which {dist} {before} does not accept.")
        return doc, solutions
    if c.what == "keyword":
        doc = (
            f"`{c.function}()` no longer accepts the keyword {name}: it was "
            f"removed {_when(dist, span)}; {last} is {before}."
        )
        return doc, [
            f"Remove {name} from the call, for {dist} {after} and newer.",
            f"Or install {last}: {pin_old}.",
        ]
    if c.what == "parameter":
        doc = (
            f"`{c.function}()` requires {name}: it became required "
            f"{_when(dist, span)}; up to {before} it was optional or absent."
        )
        optional = "before the change" if span.exact else "known not to require it"
        return doc, [
            f"Pass {name} to `{c.function}()`, as {dist} {after} and newer require.",
            f"Or install the last release {optional}: {pin_old}.",
        ]
    if c.inherited_from:
        many = len(c.owners) > 1
        who = (
            f"{len(c.owners):,} classes (listed in the record)"
            if many
            else f"`{_short(c.owners[0])}`"
        )
        doc = (
            f"{who} stopped inheriting {name} from `{c.inherited_from}` (which still defines "
            f"it) {_when(dist, span)}; {last} is {before}."
        )
        lack = "these classes lack" if many else "it lacks"
        return doc, [
            f"Update the code for {dist} {after} and newer, where {lack} {name}.",
            f"Or install {last}: {pin_old}.",
        ]
    if c.what == "member":
        where = f" from {_classes_words(c)}"
    else:
        where = f" from `{c.module}`" if c.what != "module" else ""
    thing = f"`{c.name}`" if c.what == "module" else name
    verb = {"removed": "removed", "renamed": "removed", "moved": "moved"}[c.change]
    doc = f"{thing} was {verb}{where} {_when(dist, span)}; {last} is {before}."
    solutions = []
    if c.change == "renamed":
        doc += f" It was renamed to `{c.replacement}`."
        solutions.append(f"Use `{c.replacement}` instead, for {dist} {after} and newer.")
    elif c.change == "moved":
        doc += f" {dist} {after} defines it as `{c.replacement}`."
        solutions.append(f"Import it from its new place, `{c.replacement}`.")
    else:
        solutions.append(f"Update the code for {dist} {after} and newer, which lack {thing}.")
    solutions.append(f"Or install {last}: {pin_old}.")
    return doc, solutions


def _key(dist: str, c: _Change, after: str) -> str:
    """The change's identity: the same change found again is the same record."""
    key = f"{dist}\x00{c.change}\x00{c.what}\x00{c.name}\x00{after}"
    if c.inherited_from:
        key += f"\x00{c.inherited_from}\x000"
    return key


def _record(
    dist: str, c: _Change, span: _Span, oldest: str | None, newest: str | None
) -> dict[str, Any]:
    pattern, message, error_class, others = _pattern_and_message(c)
    digest = hashlib.sha1(_key(dist, c, span.after).encode(), usedforsecurity=False).hexdigest()
    digest = digest[:12]
    doc, solutions = _facts(dist, c, span)
    if c.change == "added":
        versions = {"distribution": dist, "first": oldest, "last": span.before, "checked": newest}
    else:
        versions = {"distribution": dist, "first": span.after, "checked": newest}
    name = f"{c.module}.{c.member}" if c.inherited_from else c.name
    skew: dict[str, Any] = {"distribution": dist, "name": name, "change": c.change}
    skew |= {"changedIn": span.after, "lastBefore": span.before, "exact": span.exact}
    if c.replacement:
        skew["replacement"] = c.replacement
    if c.what == "member":
        skew["classes"] = sorted(set(c.owners))
    dotted = c.name.rpartition("(")[0] or c.name
    parts = dotted.rsplit(".", 2 if c.what in ("member", "keyword", "parameter") else 1)
    readable = re.sub(r"[^A-Za-z0-9_-]+", "-", "-".join(parts[1:] or parts)).strip("-")
    record: dict[str, Any] = {
        "schemaVersion": 2,
        "id": f"skew-{dist}-{digest}",
        "slug": f"{readable[:60]}-{c.change}-{digest[:6]}",
        "errorMessage": message,
        "messagePattern": pattern,
        "errorClass": error_class,
        "severity": "error",
        "documentation": doc,
        "solutions": solutions,
        "tags": ["mined", "skew"],
        "versions": {k: v for k, v in versions.items() if v is not None},
        "skew": skew,
    }
    if others:
        record["errorClasses"] = others
    return record


# ---- pins ----------------------------------------------------------------------------------

_PIN = re.compile(r"pip install '([A-Za-z0-9._-]+)((?:[<>]=[^,']+,?)+)'")


def resolve_pin(specifier: str, releases: Sequence[str]) -> str | None:
    """The release pip would install for ``>=X``, ``<=Y`` or both: the newest that satisfies them.

    Pre-releases only when the specifier names one, as pip does. ``None``: no release does.
    """
    from errkb.records import release_key

    clauses = [(c[:2], release_key(c[2:])) for c in specifier.split(",") if c]
    pre = any(k is not None and k[1] < 1 for _, k in clauses)
    best: tuple[Any, str] | None = None
    for version in releases:
        key = release_key(version)
        if key is None or (key[1] < 1 and not pre):
            continue
        fits = all(
            bound is not None and (key >= bound if op == ">=" else key <= bound)
            for op, bound in clauses
        )
        if fits and (best is None or key > best[0]):
            best = (key, version)
    return best[1] if best else None


def check_pins(
    records: Sequence[dict[str, Any]], releases: Sequence[str], folders: Mapping[str, Path]
) -> Counter[str]:
    """Check that each pin a record suggests installs a release where the user's code works.

    A pin resolves to the newest release of ``releases`` that satisfies it; when that release
    is one of ``folders`` (an unpacked release), :func:`has_name` reads whether it has what the
    user's code needs: the removed name, member or keyword, the added one, a parameter still
    optional. Counts ``pins-verified``, ``pins-wrong`` (including a pin no release satisfies)
    and ``pins-unchecked`` (resolved to a release not given, or one the reader cannot tell).
    """
    counts: Counter[str] = Counter()
    for record in records:
        needs = record["skew"]["change"] != "required"
        for solution in record.get("solutions", ()):
            for _, specifier in _PIN.findall(solution):
                chosen = resolve_pin(specifier, releases)
                folder = folders.get(chosen) if chosen is not None else None
                found = has_name(folder, record) if folder is not None else None
                if chosen is None or (found is not None and found != needs):
                    counts["pins-wrong"] += 1
                elif found is None:
                    counts["pins-unchecked"] += 1
                else:
                    counts["pins-verified"] += 1
    return counts
