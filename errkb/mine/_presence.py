"""Whether one release has what a skew record is about, read from the few files involved.

griffe loads a whole release to compare two; placing a change exactly among the releases
between two mined ones needs one question answered per release, dozens of times. This module
answers it with the standard library's :mod:`ast`, parsing only the module files that the
record's dotted name leads to (and, for a member, the files of the class's bases), so it costs
milliseconds per release.

It also lists the names a package offers (:func:`exports`): what ``from pkg import X`` finds,
lazy modules included (transformers 4's ``_import_structure`` tables, 5's ``TYPE_CHECKING``
star imports down to each model module's ``__all__``).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["exports", "has_change", "has_name", "module_file", "record_kind"]

#: Module names that hold placeholders rather than API (transformers' ``dummy_*_objects``).
_PLACEHOLDER = re.compile(r"dummy_\w*objects")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
#: The message a skew record is written for -> what it is about.
_KINDS = (
    ("No module named", "module"),
    ("cannot import name", "name"),
    ("has no attribute", "member"),
    ("got an unexpected keyword argument", "keyword"),
    ("missing 1 required", "parameter"),
)
#: How many bases deep a member is looked for.
_MAX_DEPTH = 12


def record_kind(record: dict[str, Any]) -> str | None:
    """What a skew record is about: module, name, member, keyword or parameter (from its message)."""
    message = str(record.get("errorMessage", ""))
    return next((kind for marker, kind in _KINDS if marker in message), None)


def module_file(root: Path, module: str) -> Path | None:
    """The file of a dotted module under a release's folder (``pkg/x.py`` or ``pkg/x/__init__.py``)."""
    parts = module.split(".")
    if not all(p.isidentifier() for p in parts):
        return None
    package = root.joinpath(*parts) / "__init__.py"
    if package.is_file():
        return package
    leaf = root.joinpath(*parts[:-1], f"{parts[-1]}.py")
    return leaf if leaf.is_file() else None


def has_change(root: Path, record: dict[str, Any]) -> bool | None:
    """Whether the release in ``root`` is on the changed side of a skew record.

    ``True``: it is like ``skew.changedIn`` (a removed, renamed or moved name is absent; an
    added name, member or keyword is present; a parameter is required). ``False``: it is like
    ``skew.lastBefore``. ``None``: this reader cannot tell (a class that answers unknown
    attributes itself, a function that takes ``**kwargs``, a base class outside the package).

    Placing a change exactly: the releases between ``lastBefore`` and ``changedIn``, unpacked,
    each asked in order; ``lastBefore`` becomes the last that answers ``False``, ``changedIn``
    the first that answers ``True``.

    >>> has_change(Path("site/4.39.0"), record)  # doctest: +SKIP
    False
    """
    present = has_name(root, record)
    if present is None:
        return None
    change = record.get("skew", {}).get("change")
    if change in ("removed", "renamed", "moved"):
        return not present
    if change in ("added", "required"):
        return present
    return None


def has_name(root: Path, record: dict[str, Any]) -> bool | None:
    """Whether the release in ``root`` has what a skew record is about.

    The module, the module-level name, the member (own or inherited from a base of the
    package), or the keyword; for a ``required`` record, whether the parameter is there
    without a default. ``None`` when this reader cannot tell.
    """
    skew = record.get("skew") or {}
    name = str(skew.get("name", ""))
    kind = record_kind(record)
    if kind == "module":
        return module_file(root, name) is not None
    if kind == "name":
        module, _, attr = name.rpartition(".")
        return _module_has(root, module, attr)
    if kind == "member":
        owner, _, member = name.rpartition(".")
        return _class_has(root, owner, member)
    if kind in ("keyword", "parameter"):
        path, _, param = name.partition("(")
        return _function_takes(root, path, param.rstrip(")"), required=kind == "parameter")
    return None


# ---- modules -------------------------------------------------------------------------------


# Small caches: a transformers release has thousands of modules of up to 200 KB, and a parsed
# tree weighs ten times its text; a lookup rereads the same few files (a class and its bases).
@functools.lru_cache(maxsize=256)
def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


@functools.lru_cache(maxsize=64)
def _tree(path: Path) -> ast.Module | None:
    try:
        return ast.parse(_text(path))
    except (SyntaxError, ValueError):
        return None


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _target(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` reads."""
    if not node.level:
        return node.module or ""
    parts = module.split(".")
    keep = len(parts) - node.level + (1 if is_package else 0)
    base = parts[: max(keep, 0)]
    return ".".join([*base, node.module] if node.module else base)


def _strings(node: ast.AST) -> set[str]:
    """Identifier strings held in list, tuple and set displays and ``append``/``extend`` calls.

    A lazy module's table of what it offers (transformers 4's ``_import_structure``).
    """
    out: set[str] = set()
    for sub in ast.walk(node):
        elements: list[ast.expr] = []
        if isinstance(sub, (ast.List, ast.Tuple, ast.Set)):
            elements = list(sub.elts)
        elif (
            isinstance(sub, ast.Call)
            and isinstance(sub.func, ast.Attribute)
            and sub.func.attr in ("append", "extend")
        ):
            elements = list(sub.args)
        out.update(
            e.value
            for e in elements
            if isinstance(e, ast.Constant) and isinstance(e.value, str) and e.value.isidentifier()
        )
    return out


def _statements(body: list[ast.stmt], checking: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """A module's statements through ``if``, ``try`` and ``with``, each with its branch.

    The flag says whether the statement is inside an ``if TYPE_CHECKING:`` branch.
    """
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _statements(stmt.body, checking or _is_type_checking(stmt.test))
            yield from _statements(stmt.orelse, checking)
        elif isinstance(stmt, ast.Try):
            for part in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):
                yield from _statements(part, checking)
        elif isinstance(stmt, ast.With):
            yield from _statements(stmt.body, checking)
        else:
            yield stmt, checking


@functools.lru_cache(maxsize=4096)
def _bindings(
    root: Path, module: str, *, own: bool
) -> tuple[frozenset[str], frozenset[str] | None]:
    """(the names ``from module import X`` finds, its ``__all__`` or None).

    ``own``: only names the package itself provides (definitions, imports from the package,
    a lazy table), not what it imports from elsewhere (``TYPE_CHECKING``, ``Path``).
    A lazy module (one that replaces itself in ``sys.modules``) offers what its
    ``TYPE_CHECKING`` branch imports and the identifiers of its tables, not its other globals.
    """
    path = module_file(root, module)
    tree = _tree(path) if path is not None else None
    if path is None or tree is None:
        return frozenset(), None
    lazy = _is_lazy(path)
    top = module.split(".", maxsplit=1)[0]
    names: set[str] = set()
    declared: list[str] | None = None
    for stmt, checking in _statements(tree.body):
        kept = checking or not lazy  # what a lazy module's other branch binds is lost
        if isinstance(stmt, ast.ImportFrom):
            source = _target(module, path.name == "__init__.py", stmt)
            if not kept or (own and source.split(".", maxsplit=1)[0] != top):
                continue
            if stmt.names[0].name != "*":
                names.update(a.asname or a.name for a in stmt.names)
            elif not _PLACEHOLDER.search(source):
                names.update(_star(root, source))
        elif isinstance(stmt, ast.Import):
            if kept and not own:
                names.update((a.asname or a.name).split(".", maxsplit=1)[0] for a in stmt.names)
        elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            if kept:
                names.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id == "__all__" and stmt.value is not None:
                    declared = [*(declared or ()), *sorted(_strings(stmt.value))]
                elif isinstance(t, ast.Name) and kept:
                    names.add(t.id)
        if lazy and isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr)):
            names.update(_strings(stmt))
    if declared is not None:
        names.update(declared)
    return frozenset(names), (frozenset(declared) if declared is not None else None)


_ALL = re.compile(r"^__all__\s*=\s*[\[(]", re.MULTILINE)


def _star(root: Path, module: str) -> frozenset[str]:
    """What ``from module import *`` binds: its ``__all__``, else its public names.

    A plain module that declares ``__all__`` at the start of a line is read from that
    statement alone (transformers 5 has hundreds of model modules reached this way).
    """
    path = module_file(root, module)
    if path is None:
        return frozenset()
    text = _text(path)
    if "import *" not in text and path.name != "__init__.py":
        found = _ALL.search(text)
        if found is not None:
            closing = "]" if text[found.end() - 1] == "[" else ")"
            end = text.find(closing, found.end())
            try:
                statement = ast.parse(text[found.start() : end + 1])
            except SyntaxError:
                statement = None
            if statement is not None and end > 0:
                return frozenset(_strings(statement))
    names, declared = _bindings(root, module, own=False)
    if declared is not None:
        return declared
    return frozenset(n for n in names if not n.startswith("_"))


def exports(root: Path, package: str) -> frozenset[str]:
    """The public names a package itself offers: what ``from package import X`` finds.

    Definitions, imports from the package's own modules (star imports followed), a lazy
    module's ``TYPE_CHECKING`` imports and the identifiers of its tables; not what it imports
    from other distributions, and not the placeholders of ``dummy_*_objects`` modules.
    """
    names, _ = _bindings(root, package, own=True)
    return frozenset(n for n in names if not n.startswith("_"))


def _module_has(root: Path, module: str, attr: str) -> bool | None:
    path = module_file(root, module)
    if path is None:
        return False
    if _tree(path) is None:
        return None
    names, _ = _bindings(root, module, own=False)
    if attr in names:
        return True
    if "def __getattr__" in _text(path) and not _is_lazy(path):
        return None  # a module that answers unknown names itself (PEP 562)
    return False


def _is_lazy(path: Path) -> bool:
    return "sys.modules[__name__]" in _text(path)


# ---- classes and functions -----------------------------------------------------------------


def _split(root: Path, dotted: str) -> tuple[str, list[str]] | None:
    """(the longest module prefix of ``dotted`` that is a file, the names inside it)."""
    parts = dotted.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:cut])
        if module_file(root, module) is not None:
            return module, parts[cut:]
    return None


def _body_names(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a class or module body binds (through ``if`` and ``try``), last one wins."""
    out: dict[str, ast.stmt] = {}
    for stmt in body:
        if isinstance(stmt, ast.If):
            out |= _body_names(stmt.body) | _body_names(stmt.orelse)
        elif isinstance(stmt, ast.Try):
            out |= _body_names(stmt.body)
            for handler in stmt.handlers:
                out |= _body_names(handler.body)
        elif isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            out[stmt.name] = stmt
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    out[t.id] = stmt
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for a in stmt.names:
                out[(a.asname or a.name).split(".")[0]] = stmt
    return out


def _find_class(
    root: Path, module: str, name: str, hops: int = 4
) -> tuple[str, ast.ClassDef] | None:
    """The class ``name`` as ``module`` binds it, following ``from x import name`` a few hops."""
    path = module_file(root, module)
    tree = _tree(path) if path is not None else None
    if path is None or tree is None:
        return None
    found = _body_names(tree.body).get(name)
    if isinstance(found, ast.ClassDef):
        return module, found
    if isinstance(found, ast.ImportFrom) and hops > 0:
        source = _target(module, path.name == "__init__.py", found)
        original = next(a.name for a in found.names if (a.asname or a.name) == name)
        return _find_class(root, source, original, hops - 1)
    return None


def _lookup(
    root: Path, module: str, cls: ast.ClassDef, member: str, depth: int = 0
) -> tuple[ast.stmt | None, bool]:
    """(the statement that defines ``member`` on the class or a base, whether all was read)."""
    own = _body_names(cls.body) | _instance_attributes(cls)
    if member in own:
        return own[member], True
    complete = "__getattr__" not in own
    if depth >= _MAX_DEPTH:
        return None, False
    for base in cls.bases:
        if isinstance(base, ast.Name):
            found = _find_class(root, module, base.id)
        elif isinstance(base, ast.Attribute):
            found = None  # another module's class (``nn.Module``): outside what is read
        else:
            continue
        if found is None:
            continue  # a class from another distribution, or one this reader cannot place
        stmt, read = _lookup(root, found[0], found[1], member, depth + 1)
        if stmt is not None:
            return stmt, True
        complete = complete and read
    return None, complete


def _instance_attributes(cls: ast.ClassDef) -> dict[str, ast.stmt]:
    """``self.x = ...`` in the class's ``__init__``: members too, as griffe counts them."""
    init = _body_names(cls.body).get("__init__")
    out: dict[str, ast.stmt] = {}
    if isinstance(init, ast.FunctionDef):
        for node in ast.walk(init):
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.value, ast.Name)
                        and t.value.id == "self"
                    ):
                        out.setdefault(t.attr, node)
    return out


def _dataclass_fields(
    root: Path, module: str, cls: ast.ClassDef, depth: int = 0
) -> dict[str, bool] | None:
    """A dataclass's fields, base classes' first: name -> whether it has a default.

    ``None`` when the class is no dataclass (its ``__init__`` is written out or inherited).
    """
    if not any("dataclass" in ast.unparse(d) for d in cls.decorator_list):
        return None
    fields: dict[str, bool] = {}
    for base in cls.bases:
        found = _find_class(root, module, base.id) if isinstance(base, ast.Name) else None
        if found is not None and depth < _MAX_DEPTH:
            fields |= _dataclass_fields(root, found[0], found[1], depth + 1) or {}
    for stmt, _ in _statements(cls.body):
        if (
            isinstance(stmt, ast.AnnAssign)
            and isinstance(stmt.target, ast.Name)
            and "ClassVar" not in ast.unparse(stmt.annotation)
        ):
            fields[stmt.target.id] = stmt.value is not None
    return fields


def _class_has(root: Path, owner: str, member: str) -> bool | None:
    split = _split(root, owner)
    if split is None or len(split[1]) != 1:
        return None
    found = _find_class(root, split[0], split[1][0])
    if found is None:
        return None
    stmt, complete = _lookup(root, found[0], found[1], member)
    if stmt is not None:
        return True
    return False if complete else None


def _function_takes(root: Path, path: str, param: str, *, required: bool) -> bool | None:
    split = _split(root, path)
    if split is None or len(split[1]) not in (1, 2):
        return None
    module, names = split
    if len(names) == 1:
        file = module_file(root, module)
        tree = _tree(file) if file is not None else None
        func = _body_names(tree.body).get(names[0]) if tree is not None else None
    else:
        found = _find_class(root, module, names[0])
        func = _lookup(root, found[0], found[1], names[1])[0] if found is not None else None
        if func is None and found is not None and names[1] == "__init__":
            fields = _dataclass_fields(root, found[0], found[1])
            if fields is not None:
                if param not in fields:
                    return False
                return not fields[param] if required else True
    if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    args = func.args
    positional = [*args.posonlyargs, *args.args]
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    table = {a.arg: d for a, d in zip(positional, defaults, strict=True)}
    table |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)}
    if param not in table or any(a.arg == param for a in args.posonlyargs):
        return None if (args.kwarg is not None and not required) else False
    return table[param] is None if required else True
