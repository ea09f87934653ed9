"""Patterns of errkb's own code, compiled when first used; ``regex``'s engine, loaded alone.

``regex`` compiles in Python: a module that compiles thirty patterns at import costs a command
that needs two of them twenty milliseconds. A leaf, so that every layer can use it.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import ModuleType

    import regex

__all__ = ["engine", "lazy_compile", "lazy_re", "own_patterns", "regex_errors"]

#: Every :func:`lazy_compile` pattern made so far, with its flags: what a file of errkb's own
#: patterns compiled holds (:func:`errkb._patterns.write_own_compiled`).
_OWN: list[tuple[str, int]] = []

#: Where a pattern of errkb's own code is found compiled, before it is compiled here: set by
#: :mod:`errkb._patterns` when it is imported (its shipped file); None: nowhere.
find_compiled: Callable[[str, int], Any] | None = None


def lazy_compile(pattern: str, flags: int = 0) -> regex.Pattern[str]:
    """A pattern of errkb's code, compiled when first used (a module's import compiles none).

    ``regex`` compiles in Python: a module that compiles thirty patterns at import costs a
    command that needs two of them twenty milliseconds. The object stands for the compiled
    pattern (its methods and attributes are the pattern's, bound on first use); ``regex``
    itself is imported then too.
    """
    _OWN.append((pattern, flags))
    return cast("regex.Pattern[str]", _Lazy(_regex_compile, pattern, flags))


def own_patterns() -> list[tuple[str, int]]:
    """The :func:`lazy_compile` patterns the modules imported so far made, with their flags."""
    return list(_OWN)


def lazy_re(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """As :func:`lazy_compile`, in the standard library's engine.

    For errkb's own patterns that need nothing of ``regex``'s (no timeout: they run in linear
    time on any text): it compiles them in a third of the time.
    """
    return cast("re.Pattern[str]", _Lazy(re.compile, pattern, flags))


def _regex_compile(pattern: str, flags: int) -> regex.Pattern[str]:
    if find_compiled is not None:
        found = find_compiled(pattern, flags)
        if found is not None:
            return cast("regex.Pattern[str]", found)
    import regex

    return regex.compile(pattern, flags)


class _Lazy:
    """See :func:`lazy_compile`."""

    def __init__(self, engine: Callable[[str, int], Any], pattern: str, flags: int) -> None:
        self._engine = engine
        self._args = (pattern, flags)

    def __getattr__(self, name: str) -> Any:
        # Only what the instance does not hold comes here: after the first use, the pattern's
        # methods are the instance's own, and a call costs what it costs on the pattern.
        if name.startswith("__"):  # copy, pickle and the like ask for what is not there
            raise AttributeError(name)
        compiled = self.__dict__.get("_compiled")
        if compiled is None:
            compiled = self._compiled = self._engine(*self._args)
            for method in _PATTERN_METHODS:
                setattr(self, method, getattr(compiled, method))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._args[0]!r})"


_PATTERN_METHODS = (
    "search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split", "scanner",
)  # fmt: skip


# regex is two halves: its engine, the C extension ``regex._regex``, which runs compiled
# patterns, and a Python half (``regex._regex_core``, ``regex._main``) that parses patterns
# into the engine's code. Importing the Python half costs ten milliseconds, 5% of a first
# diagnosis, whose record patterns all come compiled (errkb._patterns.use_compiled) and are
# only loaded and run. So when regex is not imported yet, the engine is loaded on its own.
_engine: ModuleType | None = None


def engine() -> ModuleType:
    """The C engine of ``regex`` (``regex._regex``): what loads and runs compiled patterns.

    Without ``regex``'s Python half when that is not imported yet (see above). The extension
    is then loaded as the import system would load it, and taken out of ``sys.modules`` again:
    a later ``import regex`` (errkb's, when it has a pattern to compile, or the program's)
    loads it the usual way, and CPython hands it the same functions and types, kept from the
    first load, so its patterns and ours are of one type. An engine that could not be given
    twice (one initialised per module, not once per process) is not loaded alone: ``regex``
    is imported whole, as it is where anything goes wrong here.
    """
    global _engine  # noqa: PLW0603 - loaded once a process
    loaded = _engine
    if loaded is None:
        loaded = sys.modules.get("regex._regex") or _engine_alone()
        if loaded is None:
            from regex import _regex as whole

            loaded = whole
        _engine = loaded
    return loaded


def _engine_alone() -> ModuleType | None:
    import _imp

    # What _load_engine imports, imported before the lock is taken: an import made under it
    # could wait for a module another thread is importing, itself waiting for the lock. The
    # engine's own loading imports nothing.
    import importlib.machinery
    import importlib.util  # noqa: F401

    _imp.acquire_lock()  # no other thread imports regex while the engine is in sys.modules
    try:
        if "regex" in sys.modules or "regex._regex" in sys.modules:
            return None  # being imported: the usual way costs nothing more now
        return _load_engine()
    finally:
        _imp.release_lock()


def _load_engine() -> ModuleType | None:
    import importlib.machinery
    import importlib.util

    loader = (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES)
    try:
        found = importlib.util.find_spec("regex")  # a top-level package: found, not imported
        folders = (found and found.submodule_search_locations) or ()
        specs = (
            importlib.machinery.FileFinder(f, loader).find_spec("regex._regex") for f in folders
        )
        spec = next(filter(None, specs), None)
        if spec is None:
            return None
        module = importlib.util.module_from_spec(spec)
    except (ImportError, OSError, ValueError):
        return None
    # A single-phase extension is put in sys.modules by its loading, and kept by the
    # interpreter for the next: take it out, so that regex's own import is unchanged.
    if sys.modules.pop("regex._regex", None) is not module:
        return None  # initialised per module: its types would not be regex's
    return module


def regex_errors(*others: type[BaseException]) -> tuple[type[BaseException], ...]:
    """``others`` and ``regex.error`` once ``regex`` is imported: for an ``except`` clause.

    Only ``regex``'s Python half compiles a pattern, and so raises ``regex.error``: code that
    catches it need not import ``regex`` to name it.
    """
    error = getattr(sys.modules.get("regex"), "error", None)
    return (*others, error) if isinstance(error, type) else others
