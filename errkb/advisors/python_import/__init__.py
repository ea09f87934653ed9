"""The python-import advisor: which of the four situations an import error of a library is.

The family's records (:mod:`errkb.advisors.python_import._family`) recognise Python's own
import errors that name a library; this advisor works out, for the machine and the traceback
at hand, which situation it is and what to do:

- **not installed**: ``No module named 'vllm'`` while this Python has no vllm distribution; the
  command installs it through this interpreter (``/path/to/python -m pip install vllm``), since
  a ``pip`` on the PATH may be another Python's;
- **shadowed**: something named like the library comes first: a folder without ``__init__.py``
  (``unknown location``: a namespace package, from a cloned source tree or a half-removed
  install), a plain file where a package is expected (``'ray' is not a package``), the
  program's own ``peft.py`` importing itself (``partially initialized module``); the path is
  read from the message's location, the traceback's frames, or (live) the import system;
- **version skew**: the installed package is the one imported, and it lacks the module or
  name; where errkb's release data (the ``skew`` records) says in which releases it existed,
  the release to install, else only that the installed release lacks it;
- **broken install**: the distribution's metadata is there but its module is not.

This machine's facts (the interpreter, the installed release, where a module leads) are read
only for a live exception with probes on (the ``installed`` and ``imports`` probes); for a
pasted text, only what the message and its frames say. Every command is shown, never run.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb.advisors import Advice, Captures, Contract, Variant, advisor
from errkb.advisors.python_import._family import by_folder
from errkb.findings import Fact, Solution

if TYPE_CHECKING:
    from errkb.advisors.python_import._family import Library
    from errkb.evidence import Evidence
    from errkb.findings import Source
    from errkb.match import Match
    from errkb.probes.imports import Origin
    from errkb.records import Skew

__all__ = ["CONTRACT", "advise"]

CONTRACT = Contract(
    name="python-import",
    variants=(
        Variant(name="missing", requires={"missing"}, reads={"not_package"}),
        Variant(name="name", requires={"name", "module"}, reads={"circular", "location"}),
        Variant(name="attribute", requires={"owner", "attribute"}, reads={"partial"}),
    ),
)

#: A path inside an installed environment's package folder.
_SITE = re.compile(r"[/\\](?:site|dist)-packages[/\\]")


@advisor(CONTRACT)
def advise(match: Match, evidence: Evidence) -> Advice | None:
    """The situation of this import error, with its command and the path that matters."""
    library = by_folder(match.record.library)
    variant = CONTRACT.variant_for(match.captures)
    if library is None or variant is None:
        return None
    caps = Captures(match.captures)
    error = _Error.read(variant.name, caps)
    seen = _Seen.gather(library, error, evidence)
    advice = _judge(library, error, seen)
    # The record's example renames the program's own file named like the library: shown only
    # for the situations where such a file is the cause.
    if error.circular or error.not_package:
        return advice
    return attrs.evolve(advice, withhold_example=True)


@attrs.frozen
class _Error:
    """What the message says: the module, the name it lacks, the location, a circular import."""

    kind: str
    module: str
    name: str | None = None
    location: str | None = None
    circular: bool = False
    not_package: str | None = None

    @property
    def top(self) -> str:
        """The top-level module of :attr:`module`: ``vllm`` of ``vllm.engine``."""
        return self.module.split(".", 1)[0]

    @classmethod
    def read(cls, variant: str, caps: Captures) -> _Error:
        if variant == "missing":
            return cls("missing", caps.text("missing") or "", not_package=caps.text("not_package"))
        if variant == "name":
            return cls(
                "name",
                caps.text("module") or "",
                name=caps.text("name"),
                location=caps.text("location"),
                circular=caps.text("circular") is not None,
            )
        return cls(
            "attribute",
            caps.text("owner") or "",
            name=caps.text("attribute"),
            circular=caps.text("partial") is not None,
        )

    @property
    def what(self) -> str:
        """The module, or the module's name, the program asked for: ``vllm.LLM``."""
        return f"{self.module}.{self.name}" if self.name else self.module


class _Seen:
    """What this machine (live, probes on) and the traceback say about the module."""

    def __init__(self) -> None:
        self.executable: str | None = None
        self.installed: str | None = None  # the release installed, when read
        self.read_installed = False  # whether the installed release was read at all
        self.origin: Origin | None = None
        self.site: str | None = None  # the folder holding the distribution's metadata
        self.files: list[str] = []  # the traceback's files, innermost last
        self.submodule: str | None = None  # the attribute's file, a submodule not imported
        self.editable = False  # the distribution is an editable install (pip install -e)

    @classmethod
    def gather(cls, library: Library, error: _Error, evidence: Evidence) -> _Seen:
        seen = cls()
        seen.files = [f.file for info in evidence.infos for f in info.frames]
        live = evidence.text is None and bool(seen.files)
        if not live:
            return seen
        origins = evidence.probe("imports")
        versions = evidence.probe("installed")
        if isinstance(versions, Mapping):
            seen.read_installed = True
            value = versions.get(library.distribution)
            seen.installed = str(value) if value else None
        if isinstance(origins, Mapping):
            seen.origin = origins.get(error.top)
            submodule = getattr(origins, "submodule", None)
            if error.kind == "attribute" and error.name and callable(submodule):
                seen.submodule = submodule(error.module, error.name)
            folder = getattr(origins, "distribution_folder", None)
            seen.site = folder(library.distribution) if callable(folder) else None
            editable = getattr(origins, "editable", None)
            seen.editable = bool(editable(library.distribution)) if callable(editable) else False
            if seen.origin is not None:
                seen.executable = seen.origin.executable or None
        return seen

    @property
    def python(self) -> str:
        """The interpreter to run pip with: this one, quoted for a shell, else ``python``."""
        return shlex.quote(self.executable) if self.executable else "python"

    def outside(self, path: str) -> bool:
        """Whether ``path`` is not the installed distribution's (another copy of the module)."""
        if self.site is not None:
            return not _under(path, self.site)
        return _SITE.search(path) is None


def _under(path: str, folder: str) -> bool:
    norm = path.replace("\\", "/").rstrip("/")
    root = folder.replace("\\", "/").rstrip("/")
    return norm == root or norm.startswith(root + "/")


def _judge(library: Library, error: _Error, seen: _Seen) -> Advice:
    """The situation, most telling evidence first."""
    dist = library.distribution
    facts: list[Fact] = []
    if seen.executable:
        facts.append(Fact(name="python", value=seen.executable, source="probe"))
    if seen.read_installed:
        facts.append(
            Fact(
                name=dist,
                value=seen.installed or "not installed",
                source="installed",
                note="the distribution's metadata on this Python's sys.path",
            )
        )
    origin = seen.origin
    if origin is not None:
        where = ", ".join(origin.places) or "nowhere (no finder finds it)"
        facts.append(
            Fact(
                name=f"`{error.top}` is found at",
                value=where,
                source="probe",
                note=f"what this Python's import system reaches for `{error.top}` ({origin.kind})",
            )
        )
    if error.circular:
        return _circular(library, error, seen, facts)
    namespace = error.location == "unknown location" or (
        origin is not None and origin.kind == "namespace"
    )
    if namespace:
        return _namespace(library, error, seen, facts)
    if error.not_package:
        return _not_a_package(library, error, seen, facts)
    shadow = _copy_elsewhere(error, seen)
    if shadow is not None:
        return _elsewhere(library, error, seen, facts, shadow)
    if error.kind == "missing" and error.module == error.top:
        return _not_installed(library, error, seen, facts)
    if seen.submodule is not None:
        return _not_imported(error, seen, facts)
    return _skew(library, error, seen, facts)


def _not_imported(error: _Error, seen: _Seen, facts: list[Fact]) -> Advice:
    """The attribute is a submodule the program did not import: an import, not a release."""
    path = seen.submodule or ""
    facts.append(Fact(name=f"`{error.what}`", value=path, source="probe",
                      note="a submodule of the package imported, not imported itself"))  # fmt: skip
    return Advice(
        solutions=(
            Solution(
                text=f"`{error.what}` is a module ({path}) that `import {error.module}` does not "
                f"import: write `import {error.what}` before using it.",
                settings={"path": path},
            ),
        ),
        facts=tuple(facts),
    )


def _circular(library: Library, error: _Error, seen: _Seen, facts: list[Fact]) -> Advice:
    """A module named like the library that imports itself: the program's own file, found."""
    own = _own_file(error, seen)
    if own is None:
        facts.append(
            Fact(
                name="circular import",
                value=f"no file named {error.top}.py outside "
                "site-packages is in the message or the traceback",
                source="computed",
            )
        )
        return Advice(
            solutions=(
                Solution(
                    text=f"`{error.top}` was imported again while its own import was still "
                    f"running. No file of your own named {error.top}.py shows in the message "
                    f"or the traceback: look for one in the folder the program runs from and "
                    f"the script's folder; if there is none, the circle is inside "
                    f"{library.distribution}'s own modules (a source tree that was not built "
                    "or installed, or a release with that bug).",
                ),
            ),
            facts=tuple(facts),
        )
    path, source = own
    facts.append(Fact(name="shadowed by", value=path, source=source))
    return Advice(
        solutions=(
            Solution(
                text=f"Rename {path}: a file of your own named like {library.distribution}'s "
                f"module `{error.top}` is imported in its place, and imports itself (the "
                f"circular import). Delete the __pycache__/{error.top}.*.pyc beside it too.",
                settings={"path": path},
            ),
        ),
        facts=tuple(facts),
    )


def _own_file(error: _Error, seen: _Seen) -> tuple[str, Source] | None:
    """The program's own file named like the module: (path, where it was read)."""
    names = (f"{error.top}.py", f"{error.top}/__init__.py")

    def named(path: str) -> bool:
        norm = path.replace("\\", "/")
        return norm in names or norm.endswith(tuple("/" + n for n in names))

    if error.location and named(error.location) and seen.outside(error.location):
        return error.location, "message"
    for file in reversed(seen.files):
        if named(file) and seen.outside(file):
            return file, "frame"
    origin = seen.origin
    if origin is not None and origin.path and named(origin.path) and seen.outside(origin.path):
        return origin.path, "probe"
    return None


def _namespace(library: Library, error: _Error, seen: _Seen, facts: list[Fact]) -> Advice:
    """A folder named like the module without ``__init__.py`` comes first on sys.path."""
    dist = library.distribution
    origin = seen.origin
    folders = origin.folders if origin is not None and origin.kind == "namespace" else ()
    solutions: list[Solution] = []
    if folders:
        listed = ", ".join(folders)
        facts.append(Fact(name="shadowed by", value=listed, source="probe"))
        solutions.append(
            Solution(
                text=f"Move or rename {listed}: a folder named `{error.top}` without "
                f"__init__.py (a cloned source tree, or what a removed install left) is "
                f"imported as an empty namespace package in place of {dist}.",
                settings={"path": folders[0]},
            )
        )
    else:
        solutions.append(
            Solution(
                text=f"`{error.top}` was imported as a namespace package (unknown location): a "
                f"folder named {error.top} without __init__.py comes first on sys.path (the "
                f"folder the program runs from, a cloned {dist} source tree, or what a "
                'half-removed install left in site-packages). Find it: `python -c "import '
                f'{error.top}; print(list({error.top}.__path__))"`, then move or rename it.',
            )
        )
    if seen.read_installed and seen.installed is None:
        solutions.append(_install(dist, seen, why="no distribution of it is installed"))
    elif seen.installed and seen.site and any(_under(f, seen.site) for f in folders):
        solutions.append(
            _reinstall(dist, seen.installed, seen, why=f"its `{error.top}` has no __init__.py")
        )
    return Advice(solutions=tuple(solutions), facts=tuple(facts))


def _not_a_package(library: Library, error: _Error, seen: _Seen, facts: list[Fact]) -> Advice:
    """``'ray' is not a package``: a plain module named like the package comes first."""
    own = _own_file(error, seen)
    if own is not None:
        path, source = own
        facts.append(Fact(name="shadowed by", value=path, source=source))
        text = (
            f"Rename {path}: this file named like {library.distribution}'s package "
            f"`{error.top}` is imported in its place, and a file cannot hold `{error.module}`."
        )
        return Advice(solutions=(Solution(text=text, settings={"path": path}),), facts=tuple(facts))
    text = (
        f"`{error.top}` was found as a plain module, not {library.distribution}'s package: a file "
        f"named {error.top}.py (your own, in the folder the program runs from or the script's) "
        f"comes first on sys.path. Rename it, and its __pycache__/{error.top}.*.pyc."
    )
    return Advice(solutions=(Solution(text=text),), facts=tuple(facts))


def _copy_elsewhere(error: _Error, seen: _Seen) -> tuple[str, Source] | None:
    """Another copy of the module imported: the message's location or (live) the origin.

    An editable install (``pip install -e``) keeps its package outside site-packages: that is
    the installed distribution, not another copy.
    """
    if seen.editable:
        return None
    location = error.location
    if location and location != "unknown location" and seen.outside(location):
        return location, "message"
    origin = seen.origin
    if origin is None or origin.kind in ("missing", "namespace", "other") or not origin.path:
        return None
    if seen.site is not None and seen.outside(origin.path):
        return (origin.folders[0] if origin.folders else origin.path), "probe"
    return None


def _elsewhere(
    library: Library, error: _Error, seen: _Seen, facts: list[Fact], shadow: tuple[str, Source]
) -> Advice:
    """The module imported is another copy than the installed distribution's."""
    path, source = shadow
    facts.append(Fact(name="shadowed by", value=path, source=source))
    dist = library.distribution
    if seen.site is not None:  # live: the installed distribution's folder is known
        text = (
            f"`{error.top}` is imported from {path}, not from the installed {dist} in "
            f"{seen.site}: rename or move it (and its __pycache__), or run the program from "
            "another folder."
        )
    else:
        text = (
            f"`{error.top}` is imported from {path}, outside site-packages: a source tree, an "
            f"editable install (pip install -e), or a file or folder of your own named "
            f"{error.top}. If it is not the install you meant, rename or move it (and its "
            f"__pycache__) or run from another folder; if it is, its source lacks `{error.what}`."
        )
    return Advice(solutions=(Solution(text=text, settings={"path": path}),), facts=tuple(facts))


def _install(dist: str, seen: _Seen, *, why: str) -> Solution:
    command = f"{seen.python} -m pip install {dist}"
    where = f"this Python ({seen.executable})" if seen.executable else "the Python that ran it"
    return Solution(
        text=f"Install {dist} into {where}, through that interpreter ({why}): `{command}`.",
        settings={"command": command},
    )


def _reinstall(dist: str, release: str, seen: _Seen, *, why: str) -> Solution:
    """The same release installed again over what an install or removal left half done."""
    command = f"{seen.python} -m pip install --force-reinstall --no-deps '{dist}=={release}'"
    return Solution(
        text=f"{dist} {release} is installed for this Python, but {why}: an install or removal "
        f"stopped half way. Reinstall the same release: `{command}`.",
        settings={"command": command},
    )


def _not_installed(library: Library, error: _Error, seen: _Seen, facts: list[Fact]) -> Advice:
    """``No module named 'vllm'``: installed or not, for this interpreter."""
    dist = library.distribution
    if seen.read_installed and seen.installed is not None:  # metadata without its module
        why = f"its module `{error.top}` is not there"
        return Advice(
            solutions=(_reinstall(dist, seen.installed, seen, why=why),), facts=tuple(facts)
        )
    why = (
        f"it has no {dist}"
        if seen.read_installed
        else "a pip or environment other than the one running the program may have installed it"
    )
    return Advice(solutions=(_install(dist, seen, why=why),), facts=tuple(facts))


def _skew(library: Library, error: _Error, seen: _Seen, facts: list[Fact]) -> Advice:
    """The installed package lacks the module or name: the release that has it, where known."""
    dist = library.distribution
    change = _known_change(dist, error)
    installed = seen.installed
    lacks = f"{dist} {installed}" if installed else f"the {dist} imported"
    if error.location and _SITE.search(error.location):
        facts.append(Fact(name="imported from", value=error.location, source="message"))
    if change is None:
        facts.append(Fact(name=f"`{error.what}`", value=_unknown(dist), source="computed"))
        return Advice(
            solutions=(
                Solution(
                    text=f"{lacks} has no `{error.what}`: install the release the code was "
                    "written for (its requirements pin it), or update the code for this one.",
                ),
            ),
            facts=tuple(facts),
        )
    pin = (
        f"{dist}>={change.changed_in}"
        if change.change == "added"
        else f"{dist}<={change.last_before}"
    )
    command = f"{seen.python} -m pip install '{pin}'"
    said = f"`{error.what}` was {change.change} in {dist} {change.changed_in}" + (
        f" (last in {change.last_before})" if change.change != "added" else ""
    )
    facts.append(
        Fact(
            name=f"`{error.what}`",
            value=said,
            source="computed",
            note="errkb's release data (a skew record)",
        )
    )
    text = f"{said}; {lacks} lacks it. Install a release that has it: `{command}`"
    if change.replacement:
        text += f", or use `{change.replacement}` instead"
    return Advice(
        solutions=(Solution(text=text + ".", settings={"command": command}),),
        facts=tuple(facts),
    )


def _unknown(dist: str) -> str:
    """What errkb's release data says of a change it has no record of: the releases it read."""
    from errkb.registry import shipped_releases

    listed = shipped_releases(dist) or {}
    releases = [str(r) for r in listed.get("releases", ()) or ()]  # type: ignore[attr-defined]
    if not releases:
        return f"errkb has no release data of {dist}: which releases have it is not known here"
    return (
        f"no change of it is recorded in errkb's release data of {dist} ({releases[0]} to "
        f"{releases[-1]}): which releases have it is not known here"
    )


def _known_change(dist: str, error: _Error) -> Skew | None:
    """The change errkb's release data records for the module or name, if any.

    The skew records of the shipped registry are asked in every wording Python has for it:
    a module's attribute that is a submodule (``module 'bitsandbytes' has no attribute 'nn'``)
    is recorded as ``No module named 'bitsandbytes.nn'``.
    """
    from errkb._dists import normalize
    from errkb.registry import default_registry

    wanted = error.what
    leaf = wanted.rpartition(".")
    messages = [f"No module named '{wanted}'"]
    if leaf[0]:
        messages.append(f"cannot import name '{leaf[2]}' from '{leaf[0]}'")
    matcher = default_registry().matcher
    for message in messages:
        for found in matcher.match(message, None):
            skew = found.record.skew
            if (
                skew is not None
                and normalize(skew.distribution) == normalize(dist)
                and skew.name == wanted
                and skew.changed_in
            ):
                return skew
    return None
