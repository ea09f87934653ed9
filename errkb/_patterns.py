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
_INLINE_FLAGS = regex.compile(r"\?[a-zA-Z]+")


@functools.lru_cache(maxsize=4096)
def required_literals(pattern: str) -> tuple[str, ...] | None:
    """The literal runs that every match of ``pattern`` must contain, longest first.

    Returns ``None`` when no literal is certain (see :func:`literal_sets`); callers must then
    treat the pattern as able to match anything.
    """
    sets = literal_sets(pattern)
    if sets is None:
        return None
    return tuple(sorted({s[0] for s in sets if len(s) == 1}, key=len, reverse=True))


@functools.lru_cache(maxsize=4096)
def literal_sets(pattern: str) -> tuple[tuple[str, ...], ...] | None:
    r"""What every match of ``pattern`` must contain, as a tuple of any-of sets.

    Each set holds literals of which at least one is in every match: a plain literal run is a
    set of one; an alternation whose every branch requires a literal is a set of those. A fast,
    conservative reading of the pattern text: groups made optional by a quantifier, classes,
    lookarounds and escapes such as ``\\d`` require nothing. ``None`` when the pattern cannot be
    read this way (case-insensitive or verbose flags).
    """
    try:
        return tuple(_analyse(pattern))
    except _UnreadableError:
        return None


class _UnreadableError(Exception):
    """The pattern uses a construct the literal analysis does not follow."""


def _analyse(pattern: str) -> list[tuple[str, ...]]:
    branches = _split_branches(pattern)
    if len(branches) == 1:
        return _sequence(pattern)
    best = [_best_set(_sequence(b)) for b in branches]
    if any(b is None for b in best):
        return []
    return [tuple(sorted({lit for b in best if b is not None for lit in b}))]


def _best_set(sets: list[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The requirement of a branch that narrows most: the set whose shortest member is longest."""
    return max(sets, key=lambda s: (min(len(x) for x in s), -len(s))) if sets else None


def _split_branches(pattern: str) -> list[str]:
    """``pattern`` split at its top-level ``|``."""
    out, start, i = [], 0, 0
    while i < len(pattern):
        c = pattern[i]
        if c == "\\":
            i += 2
        elif c == "[":
            i = _skip_class(pattern, i)
        elif c == "(":
            i = _skip_group(pattern, i)
        elif c == "|":
            out.append(pattern[start:i])
            start = i = i + 1
        else:
            i += 1
    out.append(pattern[start:])
    return out


_GROUP_PREFIX = regex.compile(r"\?(?:P?<(?![=!])[^>]*>|[:>|]|[a-zA-Z]*-?[a-zA-Z]*:)?")
_NON_CONSUMING = ("?=", "?!", "?<=", "?<!", "?#", "?(", "?P=", "?&", "?R")


def _sequence(pattern: str) -> list[tuple[str, ...]]:  # noqa: PLR0915 - one scan, in order
    """The requirements of a pattern with no top-level alternation."""
    sets: list[tuple[str, ...]] = []
    current: list[str] = []
    i, n = 0, len(pattern)

    def flush() -> None:
        if current:
            sets.append(("".join(current),))
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
            current.append(_CONTROL_ESCAPES.get(nxt, nxt))
        elif ch == "(":
            flush()
            end = _skip_group(pattern, i)
            inner = pattern[i + 1 : end - 1]
            after, minimum = _skip_quantifier(pattern, end)
            i = after
            if _INLINE_FLAGS.fullmatch(inner):
                if set(inner[1:]) & set("ixX"):
                    raise _UnreadableError
                continue
            if inner.startswith(_NON_CONSUMING) or minimum == 0:
                continue
            prefix = _GROUP_PREFIX.match(inner) if inner.startswith("?") else None
            if prefix is not None:
                flags = prefix.group()
                if flags.endswith(":") and set(flags) & set("ixX"):
                    continue
                inner = inner[prefix.end() :]
            sets.extend(_analyse(inner))
            continue
        elif ch == "[":
            flush()
            i = _skip_class(pattern, i)
            i = _skip_quantifier(pattern, i)[0]
            continue
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
    return [s for s in sets if all(s)]


_CONTROL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "a": "\a", "e": "\x1b"}


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
