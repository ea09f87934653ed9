"""Compiling and running record patterns: one place for the regex flags, cache and timeout.

Patterns come from records, which are untrusted data: every search runs with a timeout, and
nothing here does more with a pattern than compile and search it.
"""

from __future__ import annotations

import functools
import re

import regex

__all__ = [
    "DEFAULT_TIMEOUT",
    "PatternTimeoutError",
    "best_set",
    "compile_pattern",
    "required_literals",
    "search",
    "specificity",
]

#: Seconds one pattern may spend on one message before it is given up. A real pattern takes
#: microseconds; a catastrophic one takes seconds or forever. The margin is wide because the
#: timeout is wall-clock time, which other busy threads stretch.
DEFAULT_TIMEOUT = 0.25


class PatternTimeoutError(TimeoutError):
    """A pattern ran past its timeout on a message."""


@functools.cache
def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """Compile a record's ``messagePattern`` once; raises ``regex.error`` when it is invalid."""
    return regex.compile(pattern)


def search(
    compiled: regex.Pattern[str], text: str, timeout: float = DEFAULT_TIMEOUT
) -> regex.Match[str] | None:
    """Search ``text`` for ``compiled``, giving up after ``timeout`` seconds.

    The timeout is wall-clock time, which a busy machine or other threads can stretch for a
    healthy pattern; so a search that times out is tried once more before the pattern is
    given up (a catastrophic pattern costs at most twice the timeout).
    """
    try:
        # concurrent=True lets other threads run while a long search goes on.
        return compiled.search(text, timeout=timeout, concurrent=True)
    except TimeoutError:
        pass
    try:
        return compiled.search(text, timeout=timeout, concurrent=True)
    except TimeoutError as exc:
        raise PatternTimeoutError(compiled.pattern) from exc


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


@functools.lru_cache(maxsize=1 << 18)
def literal_sets(pattern: str) -> tuple[tuple[str, ...], ...] | None:
    r"""What every match of ``pattern`` must contain, as a tuple of any-of sets.

    Each set holds literals of which at least one is in every match: a plain literal run is a
    set of one; an alternation whose every branch requires a literal is a set of those. A fast,
    conservative reading of the pattern text: groups made optional by a quantifier, classes,
    lookarounds and escapes such as ``\d`` require nothing. ``None`` when the pattern cannot be
    read this way (case-insensitive or verbose flags).
    """
    try:
        return tuple(_requirements(_parse(pattern)))
    except _UnreadableError:
        return None


class _UnreadableError(Exception):
    """The pattern uses a construct the literal analysis does not follow."""


# One token per construct; a run of plain characters is one token, so patterns read fast.
# (The standard library's engine tokenizes this twice as fast as the regex module.)
_TOKEN = re.compile(
    r"""
    (?P<esc>\\(?:x\{[^}]*\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[NpP]\{[^}]*\}
              |[pP].|g<[^>]*>|[0-9]+|.))
    |(?P<cls>\[\^?\]?(?:\\.|\[:[a-z]+:\]|[^\]\\])*\])
    |(?P<open>\((?:\?(?:P?<(?![=!])[^>]*>|[:>|]|[a-zA-Z]*-?[a-zA-Z]*:|<?[=!]|\#|\(|P=|&|R|[a-zA-Z]+(?=\)))?)?)
    |(?P<close>\))
    |(?P<quant>(?:[?*+]|\{[0-9]*(?:,[0-9]*)?\})[?+]?)
    |(?P<alt>\|)
    |(?P<any>[.^$])
    |(?P<lit>[^\\\[()|?*+{.^$]+|[{])
    """,
    re.VERBOSE | re.DOTALL,
)
_FLAG_GROUP = re.compile(r"\(\?[a-zA-Z]+")
_LITERAL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "a": "\a", "e": "\x1b"}
_CLASS_ESCAPES = frozenset("dDwWsSbBAZzGpPNuxUvVXhHKLlRmgX")
_NON_CONSUMING = ("(?=", "(?!", "(?<=", "(?<!", "(?#", "(?(", "(?P=", "(?&", "(?R")

# A parsed pattern: branches of items. An item is ("lit", text), ("any",), ("group", opener,
# branches) or ("rep", item, minimum).
_Item = tuple[object, ...]


def _parse(pattern: str) -> list[list[_Item]]:
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(pattern)]
    branches, _ = _parse_branches(tokens, 0)
    return branches


def _parse_branches(tokens: list[tuple[str | None, str]], i: int) -> tuple[list[list[_Item]], int]:
    branches: list[list[_Item]] = [[]]
    while i < len(tokens):
        kind, text = tokens[i]
        branch = branches[-1]
        i += 1
        if kind == "close":
            return branches, i
        if kind == "alt":
            branches.append([])
        elif kind == "open":
            inner, i = _parse_branches(tokens, i)
            if _FLAG_GROUP.fullmatch(text) and not inner[0]:
                if set(text[2:]) & set("ixX"):  # (?i), (?x): literals are no longer exact
                    raise _UnreadableError
                continue
            branch.append(("group", text, inner))
        elif kind == "lit":
            branch.append(("lit", text))
        elif kind == "esc":
            letter = text[1]
            if (
                letter in _CLASS_ESCAPES
                or letter.isdigit()
                or (len(text) > 2 and letter in "xuUNpPg")
            ):
                branch.append(("any",))
            else:
                branch.append(("lit", _LITERAL_ESCAPES.get(letter, letter)))
        elif kind == "quant":
            if not branch:
                continue
            minimum = (
                1
                if text[0] == "+"
                else 0
                if text[0] in "?*"
                else int(text[1:].split(",")[0].rstrip("}") or 0)
            )
            last = branch.pop()
            if last[0] == "lit" and len(str(last[1])) > 1:
                branch.append(("lit", str(last[1])[:-1]))
                last = ("lit", str(last[1])[-1])
            branch.append(("rep", last, minimum))
        else:  # cls, any
            branch.append(("any",))
    return branches, i


def _requirements(branches: list[list[_Item]]) -> list[tuple[str, ...]]:
    if len(branches) == 1:
        return _branch_requirements(branches[0])
    best = [best_set(_branch_requirements(b)) for b in branches]
    if any(b is None for b in best):
        return []
    return [tuple(sorted({lit for b in best if b is not None for lit in b}))]


def best_set(sets: list[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The any-of set of literals that narrows a search most, or None when there is none.

    The set whose shortest member is longest (a long literal is rarer in text), and of those
    the one with fewest members. Used for a branch's requirement here and for the needles
    of :mod:`errkb.scan`.
    """
    return max(sets, key=lambda s: (min(len(x) for x in s), -len(s))) if sets else None


def _branch_requirements(items: list[_Item]) -> list[tuple[str, ...]]:
    sets: list[tuple[str, ...]] = []
    run: list[str] = []

    def flush() -> None:
        if run:
            sets.append(("".join(run),))
            run.clear()

    for item in items:
        if item[0] == "lit":
            run.append(str(item[1]))
            continue
        flush()
        if item[0] == "rep":
            inner, minimum = item[1], item[2]
            if minimum and isinstance(inner, tuple):
                sets.extend(_branch_requirements([inner]))
        elif item[0] == "group":
            opener, inner_branches = str(item[1]), item[2]
            if opener.startswith(_NON_CONSUMING):
                continue
            if opener.endswith(":") and set(opener[2:-1]) & set("ixX"):
                continue  # a scoped (?i:...) group: its literals are not exact
            if isinstance(inner_branches, list):
                sets.extend(_requirements(inner_branches))
    flush()
    return [s for s in sets if all(s)]


@functools.lru_cache(maxsize=4096)
def specificity(pattern: str) -> int:
    """How many literal characters a match of ``pattern`` must contain (0 when unknown)."""
    runs = required_literals(pattern)
    return sum(len(r) for r in runs) if runs else 0
