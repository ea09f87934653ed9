"""Compiling and running record patterns: one place for the regex flags, cache and timeout.

Patterns come from records, which are untrusted data: every search runs with a timeout, and
nothing here does more with a pattern than compile and search it.
"""

from __future__ import annotations

import functools

import regex

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


@functools.cache
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


_BREAKING_ESCAPES = frozenset("dDwWsSbBAZzGpPNuxUvVXhHKLlRmg0123456789")
_FLAGS = regex.compile(r"\(\?([a-zA-Z]+)\)")


def required_literals(pattern: str) -> tuple[str, ...] | None:
    """The literal runs that every match of ``pattern`` must contain, longest first.

    A fast, conservative scan of the top level of the pattern: runs of literal characters
    outside groups and classes, minus those made optional by a quantifier. Returns ``None`` when
    the pattern may match without any literal (top-level alternation) or cannot be read this way
    (case-insensitive or verbose flags); callers must then treat it as able to match anything.
    """
    runs: list[str] = []
    current: list[str] = []
    i, n = 0, len(pattern)

    def flush() -> None:
        if current:
            runs.append("".join(current))
            current.clear()

    while i < n:
        ch = pattern[i]
        if ch == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            i += 2
            if nxt in _BREAKING_ESCAPES:
                flush()
                i = _skip_escape_argument(pattern, i, nxt)
                i = _skip_quantifier(pattern, i)[0]
                continue
            current.append(
                {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "a": "\a", "e": "\x1b"}.get(nxt, nxt)
            )
        elif ch == "(":
            flags = _FLAGS.match(pattern, i)
            if flags and set(flags.group(1)) & set("ixX"):
                return None
            flush()
            i = _skip_group(pattern, i)
            # A quantifier after the group applies to the group, which we ignore anyway.
            i = _skip_quantifier(pattern, i)[0]
            continue
        elif ch == "[":
            flush()
            i = _skip_class(pattern, i)
            i = _skip_quantifier(pattern, i)[0]
            continue
        elif ch == "|":
            return None
        elif ch in ".^$":
            flush()
            i += 1
            i = _skip_quantifier(pattern, i)[0]
            continue
        else:
            current.append(ch)
            i += 1
        i, minimum = _skip_quantifier(pattern, i)
        if minimum is not None:
            if minimum == 0 and current:
                current.pop()
            flush()
    flush()
    return tuple(sorted((r for r in runs if r), key=len, reverse=True))


def _skip_escape_argument(pattern: str, i: int, kind: str) -> int:
    r"""Past what follows an escape letter: ``\x41``, ``\u0041``, ``\N{...}``, ``\12``, ``\g<x>``."""
    fixed = {"x": 2, "u": 4, "U": 8}
    if kind in fixed:
        if kind == "x" and pattern[i : i + 1] == "{":
            return _past(pattern, i, "}")
        return i + fixed[kind]
    if kind in "NpP" and pattern[i : i + 1] == "{":
        return _past(pattern, i, "}")
    if kind in "pP":
        return i + 1
    if kind == "g" and pattern[i : i + 1] == "<":
        return _past(pattern, i, ">")
    if kind.isdigit():
        while i < len(pattern) and pattern[i].isdigit():
            i += 1
    return i


def _past(pattern: str, i: int, closing: str) -> int:
    end = pattern.find(closing, i)
    return len(pattern) if end == -1 else end + 1


def _skip_quantifier(pattern: str, i: int) -> tuple[int, int | None]:
    """Past a quantifier at ``i`` (with its lazy/possessive suffix); its minimum, or None."""
    if i >= len(pattern):
        return i, None
    ch = pattern[i]
    minimum: int | None = None
    if ch in "?*":
        minimum, i = 0, i + 1
    elif ch == "+":
        minimum, i = 1, i + 1
    elif ch == "{":
        m = _BRACES.match(pattern, i)
        if m is None:
            return i, None
        minimum, i = int(m.group(1) or 0), m.end()
    else:
        return i, None
    if i < len(pattern) and pattern[i] in "?+":
        i += 1
    return i, minimum


_BRACES = regex.compile(r"\{(\d*)(?:,\d*)?\}")


def _skip_class(pattern: str, i: int) -> int:
    """The index just past the character class starting at ``i``."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        j += 1
    depth = 1
    while j < len(pattern) and depth:
        c = pattern[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            depth += 1  # the regex module's nested sets
        elif c == "]":
            depth -= 1
        j += 1
    return j


def _skip_group(pattern: str, i: int) -> int:
    """The index just past the group starting at ``i`` (escapes and classes respected)."""
    depth = 0
    j = i
    while j < len(pattern):
        c = pattern[j]
        if c == "\\":
            j += 2
            continue
        if c == "[":
            j = _skip_class(pattern, j)
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return j


@functools.lru_cache(maxsize=4096)
def specificity(pattern: str) -> int:
    """How many literal characters a match of ``pattern`` must contain (0 when unknown)."""
    runs = required_literals(pattern)
    return sum(len(r) for r in runs) if runs else 0
