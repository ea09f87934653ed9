"""Patterns of errkb's own code, compiled when first used.

``regex`` compiles in Python: a module that compiles thirty patterns at import costs a command
that needs two of them twenty milliseconds. A leaf, so that every layer can use it.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, cast

import regex

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["lazy_compile", "lazy_re"]


def lazy_compile(pattern: str, flags: int = 0) -> regex.Pattern[str]:
    """A pattern of errkb's code, compiled when first used (a module's import compiles none).

    ``regex`` compiles in Python: a module that compiles thirty patterns at import costs a
    command that needs two of them twenty milliseconds. The object stands for the compiled
    pattern (its methods and attributes are the pattern's, bound on first use).
    """
    return cast("regex.Pattern[str]", _Lazy(regex.compile, pattern, flags))


def lazy_re(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """As :func:`lazy_compile`, in the standard library's engine.

    For errkb's own patterns that need nothing of ``regex``'s (no timeout: they run in linear
    time on any text): it compiles them in a third of the time.
    """
    return cast("re.Pattern[str]", _Lazy(re.compile, pattern, flags))


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
