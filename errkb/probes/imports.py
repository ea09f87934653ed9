"""The imports probe: where this Python finds a top-level module, and where a distribution lives.

An import error names a module; what the user needs is which file or folder the import system
reaches for that name in this Python (the installed package, or something named like it that
comes first on ``sys.path``: a cloned source tree, a folder left by a half-removed install, the
user's own ``peft.py``). The answer comes from the import system's own finders
(:func:`importlib.util.find_spec` of a top-level name imports nothing) and from the module
already in ``sys.modules`` under that name, if any; a distribution's folder from its metadata
(:mod:`errkb._dists`), never by importing it.

Read for a live exception only: with probes off (a traceback pasted from another machine) the
reading is ``None``.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb.probes._on_demand import OnDemand

if TYPE_CHECKING:
    from errkb.evidence import Evidence

__all__ = ["ImportOrigins", "Origin", "find", "probe"]


@attrs.frozen(kw_only=True)
class Origin:
    """Where a top-level module name leads in this Python.

    Attributes:
        name: the module name.
        kind: ``missing`` (no finder finds it), ``module`` (a plain file, ``name.py``),
            ``package`` (a folder with ``__init__.py``), ``namespace`` (folders without one:
            Python prints its location as ``unknown location``), ``extension`` (a compiled
            module) or ``other`` (a built-in, frozen or custom-found module).
        path: the file the module is loaded from (``None`` for a namespace or a missing name).
        folders: a package's or a namespace's folders.
        executable: the interpreter that looked (``sys.executable``).
    """

    name: str
    kind: str
    path: str | None = None
    folders: tuple[str, ...] = ()
    executable: str = ""

    @property
    def places(self) -> tuple[str, ...]:
        """The folders a package or namespace spans, else the file: what a user would move."""
        return self.folders or ((self.path,) if self.path else ())


def find(name: str) -> Origin:
    """Where ``name`` (a top-level module) leads: the module loaded under it, else the finders'.

    A failed import removes its module from ``sys.modules``, so after a circular import of the
    user's own ``peft.py`` the finders find that file again, first on ``sys.path``.
    """
    import importlib.machinery
    import importlib.util

    exe = sys.executable
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError, AttributeError):  # a module in sys.modules without a spec
        loaded = sys.modules.get(name)
        file = getattr(loaded, "__file__", None)
        return Origin(name=name, kind="other", path=file if isinstance(file, str) else None,
                      executable=exe)  # fmt: skip
    if spec is None:
        return Origin(name=name, kind="missing", executable=exe)
    folders = tuple(str(f) for f in spec.submodule_search_locations or ())
    origin = spec.origin if spec.has_location else None
    if spec.submodule_search_locations is not None and origin is None:
        return Origin(name=name, kind="namespace", folders=folders, executable=exe)
    if origin is None:
        return Origin(name=name, kind="other", executable=exe)
    if folders:
        kind = "package"
    elif origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)):
        kind = "extension"
    else:
        kind = "module"
    return Origin(name=name, kind=kind, path=origin, folders=folders, executable=exe)


class ImportOrigins(OnDemand[Origin]):
    """Top-level module name -> :class:`Origin`, found when first asked for.

    Tests inject a plain mapping instead: ``readings={"imports": {"vllm": Origin(...)}}``.
    """

    def read(self, name: str) -> Origin:
        """Where ``name`` leads in this Python (:func:`find`)."""
        return find(name)

    @staticmethod
    def submodule(parent: str, name: str) -> str | None:
        """Where ``parent.name`` is, when it is a submodule not imported yet; else ``None``.

        Asked only of a parent already imported (its ``__path__`` is searched): nothing is
        imported. ``import safetensors`` does not import ``safetensors.torch``, so reading the
        attribute fails until the submodule is imported.
        """
        import importlib.machinery

        full = f"{parent}.{name}"
        path = getattr(sys.modules.get(parent), "__path__", None)
        if path is None or full in sys.modules:
            return None
        try:
            spec = importlib.machinery.PathFinder.find_spec(full, list(path))
        except (ImportError, ValueError, TypeError):
            return None
        if spec is None:
            return None
        if spec.has_location and spec.origin:
            return spec.origin
        return next(iter(spec.submodule_search_locations or ()), None)

    @staticmethod
    def editable(distribution: str) -> bool:
        """Whether ``distribution`` is an editable install (its ``direct_url.json`` says so).

        Its package then lives in a source tree outside site-packages, as installed.
        """
        import json

        from errkb._dists import metadata_folder

        folder = metadata_folder(distribution)
        if folder is None:
            return False
        try:
            data = json.loads(Path(folder, "direct_url.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return False
        info = data.get("dir_info") if isinstance(data, dict) else None
        return isinstance(info, dict) and info.get("editable") is True

    @staticmethod
    def distribution_folder(distribution: str) -> str | None:
        """The folder holding ``distribution``'s metadata (its site-packages), or ``None``."""
        from errkb._dists import metadata_folder

        folder = metadata_folder(distribution)
        return str(Path(folder).parent) if folder else None


def probe(evidence: Evidence, timeout: float) -> ImportOrigins | None:  # noqa: ARG001 - the probe protocol
    """The reading: origins found on demand; ``None`` with probes off (another machine's text)."""
    if not evidence.options.probes:
        return None
    return ImportOrigins()
