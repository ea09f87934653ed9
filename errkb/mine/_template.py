"""A message template as a record's ``errorMessage`` and ``messagePattern``; the specificity rule.

The rule keeps only templates specific enough to name one place in one library; it is
documented in ``docs/mining.md``.
"""

from __future__ import annotations

import keyword
import re

import regex

from errkb.mine._site import Hole, Template

__all__ = [
    "BUILTIN_IMITATIONS",
    "MIN_LITERAL_CHARS",
    "MIN_LITERAL_WORDS",
    "error_message",
    "literal_text",
    "message_pattern",
    "why_too_generic",
]

#: A template needs this many characters of literal text...
MIN_LITERAL_CHARS = 20
#: ...and this many literal words (two letters or more), or it names no one place.
MIN_LITERAL_WORDS = 3

#: Messages Python itself raises: a library that words its own message the same way would match
#: every user's typo. Searched in the message with each hole written ``{}``.
BUILTIN_IMITATIONS = tuple(
    re.compile(p)
    for p in (
        r"object has no attribute",
        r"^module .* has no attribute",
        r"got an unexpected keyword argument",
        r"missing \S+ required (?:positional|keyword-only) argument",
        r"takes \S+ positional arguments? but \S+ (?:was|were) given",
        r"got multiple values for (?:keyword )?argument",
        r"^name .* is not defined",
        r"index out of range",
        r"^No module named",
        r"^cannot import name",
        r"object is not (?:subscriptable|callable|iterable)",
        r"unsupported operand type",
        r"division by zero",
        r"is not JSON serializable",
        r"invalid literal for int\(\) with base",
        r"(?:not enough|too many) values to unpack",
        r"^maximum recursion depth exceeded",
        r"^\[Errno \S+\]",
        r"^Expected \{\} to be True, but got False",
        # Seen matching other libraries' real reports (tests/data/reports): a library's own
        # "{} has no attribute {}" took every AttributeError, its "No such file or directory:
        # {}" every FileNotFoundError.
        r"has no attribute",
        r"No such file or directory",
        r"is an empty sequence",
        r"Permission denied",
        r"unhashable type",
        r"does not support item assignment",
    )
)

_WORD = re.compile(r"[A-Za-z]{2,}")
_SIMPLE = re.compile(r"[A-Za-z_]\w*(?:\s*\.\s*[A-Za-z_]\w*)*")
_NUMBER = r"-?\d[\d.,_]*(?:[eE][-+]?\d+)?"


def literal_text(template: Template) -> str:
    """The template's literal text, its holes left out."""
    return "".join(p for p in template if isinstance(p, str))


def error_message(template: Template) -> str:
    """The ``errorMessage``: literal text, and each hole as ``{expr}`` (``{}`` when unnamed)."""
    return "".join(p if isinstance(p, str) else f"{{{p.expr}}}" for p in template)


def message_pattern(template: Template) -> str:
    """The ``messagePattern``: literal text escaped, each hole a group.

    A hole whose expression is a name or an attribute gets a named group (its last identifier,
    numbered when it repeats); a number hole asks for digits; a text hole is lazy except the
    last part of the template, which is greedy so the match runs to the message's end.
    """
    out: list[str] = []
    used: set[str] = set()
    last = len(template) - 1
    for i, part in enumerate(template):
        if isinstance(part, str):
            out.append(regex.escape(part, special_only=True, literal_spaces=True))
            continue
        body = _NUMBER if part.number else (".+" if i == last else ".+?")
        name = _group_name(part, used)
        out.append(f"(?P<{name}>{body})" if name else f"({body})")
    return "".join(out)


def _group_name(hole: Hole, used: set[str]) -> str | None:
    expr = hole.expr.strip()
    if not _SIMPLE.fullmatch(expr):
        return None
    name = expr.rpartition(".")[2].strip().lstrip("_") or "value"
    if keyword.iskeyword(name) or name[0].isdigit():
        name = f"{name}_"
    base, n = name, 1
    while name in used:
        n += 1
        name = f"{base}_{n}"
    used.add(name)
    return name


def why_too_generic(template: Template) -> str | None:
    """Why a template is dropped (``None``: kept). The rule is in ``docs/mining.md``."""
    shown = "".join(p if isinstance(p, str) else "{}" for p in template).strip()
    if any(p.search(shown) for p in BUILTIN_IMITATIONS):
        return "builtin-imitation"
    literal = " ".join(literal_text(template).split())
    if len(literal) < MIN_LITERAL_CHARS:
        return "too-short"
    if len(_WORD.findall(literal)) < MIN_LITERAL_WORDS:
        return "too-few-words"
    return None
