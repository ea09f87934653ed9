"""Compiling and running record patterns: one place for the regex flags, cache and timeout.

Patterns come from records, which are untrusted data: every search runs with a timeout, and
nothing here does more with a pattern than compile and search it.
"""

from __future__ import annotations

import functools
import re
import warnings
from typing import TYPE_CHECKING, Any

import regex

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "DEFAULT_TIMEOUT",
    "PatternTimeoutError",
    "compile_pattern",
    "required_literals",
    "search",
    "specificity",
]

#: Seconds one pattern may spend on one message before it is given up.
DEFAULT_TIMEOUT = 0.05


class PatternTimeoutError(TimeoutError):
    """A pattern ran past its timeout on a message."""


@functools.lru_cache(maxsize=None)
def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """Compile a record's ``messagePattern`` once; raises ``regex.error`` when it is invalid."""
    return regex.compile(pattern)


def search(
    compiled: regex.Pattern[str], text: str, timeout: float = DEFAULT_TIMEOUT
) -> regex.Match[str] | None:
    """Search ``text`` for ``compiled``, giving up after ``timeout`` seconds."""
    try:
        return compiled.search(text, timeout=timeout)
    except TimeoutError as exc:
        raise PatternTimeoutError(compiled.pattern) from exc


def _parse(pattern: str) -> Any | None:
    """Parse with the standard library's parser when the pattern is in its dialect."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import re._parser as sre_parse  # type: ignore[import-not-found,unused-ignore]

            return sre_parse.parse(pattern)
    except (ImportError, re.error, RecursionError, OverflowError):
        return None


def required_literals(pattern: str) -> tuple[str, ...] | None:
    """The literal runs that every match of ``pattern`` must contain, longest first.

    Returns ``None`` when the pattern cannot be analysed (a ``regex``-only construct, a case
    insensitive flag): callers must then treat the pattern as able to match anything.
    """
    tree = _parse(pattern)
    if tree is None:
        return None
    if tree.state.flags & 2:  # re.IGNORECASE: literals are not exact
        return None
    runs: list[str] = []
    _collect(tree, runs)
    return tuple(sorted({r for r in runs if r}, key=len, reverse=True))


def _collect(items: Iterable[tuple[Any, Any]], runs: list[str]) -> None:
    """Append to ``runs`` the literal runs that a match of ``items`` must contain."""
    import re._constants as c  # type: ignore[import-not-found,unused-ignore]

    current: list[str] = []

    def flush() -> None:
        if current:
            runs.append("".join(current))
            current.clear()

    for op, av in items:
        if op is c.LITERAL:
            current.append(chr(av))
            continue
        flush()
        if op is c.SUBPATTERN:
            _collect(av[-1], runs)
        elif op in (c.MAX_REPEAT, c.MIN_REPEAT, c.POSSESSIVE_REPEAT) and av[0] >= 1:
            _collect(av[2], runs)
        elif op is c.ATOMIC_GROUP:
            _collect(av, runs)
        # Branches, optional repeats, classes and lookarounds need no particular literal.
    flush()


def specificity(pattern: str) -> int:
    """How many literal characters a match of ``pattern`` must contain (a rough fallback else)."""
    runs = required_literals(pattern)
    if runs is not None:
        return sum(len(r) for r in runs)
    # Not analysable: count the word characters, a fair proxy for literal text.
    return sum(ch.isalnum() or ch == " " for ch in pattern) // 2
