"""Masking secrets in what errkb shows: tokens, keys, bearer headers, passwords in URLs.

Messages and frame values can carry credentials (a Hub token in a URL, an API key in the
engine call errkb rewrites). Everything errkb renders or prints as JSON passes through
:func:`redact` first; matching still sees the original text.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    import regex

__all__ = ["MASK", "redact", "redact_all"]

MASK = "***"

# Each rule: the words every match holds (a rule runs only on text that holds one of them;
# casefolded when the rule ignores case), what must follow one of them in every match (None:
# nothing asked), the pattern, and what replaces a match. A pattern is compiled when some text
# first holds its words: most texts hold none, and compiling them all costs a first diagnosis
# milliseconds. What must follow is asked of the common words ("tokens" is in most KV-cache
# messages), in the standard library's engine (compiled in a fraction of the time), on the
# same casefolded text: a secret's name, then only quotes and spaces, then ":" or "=".
_RULES: tuple[tuple[tuple[str, ...], bool, str | None, str, str], ...] = (
    # Hugging Face user and org tokens.
    (("hf_",), False, None, r"\bhf_[A-Za-z0-9]{16,}", "hf_" + MASK),
    # OpenAI-style and other "sk-" secret keys (sk-..., sk-proj-..., sk-ant-...).
    (("sk-",), False, None, r"\bsk-[A-Za-z0-9_-]{16,}", "sk-" + MASK),
    # Authorization headers and bearer tokens.
    (
        ("authorization",),
        True,
        None,
        r"(?i)\b(authorization\s*[:=]\s*)(?:bearer|basic|token)?\s*[^\s'\",;]{6,}",
        r"\1" + MASK,
    ),
    (("bearer",), True, None, r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}", r"\1" + MASK),
    # user:password@ in URLs (the user name stays, it helps to know whose it was).
    (("://",), False, None, r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]+:)[^\s@/]+@", r"\1" + MASK + "@"),
    # "name = value" and "name: value" where the name says secret, as a word or at the end of a
    # longer name such as the variables OPENAI_API_KEY, HUGGING_FACE_HUB_TOKEN or
    # aws_secret_access_key. A value that is code reading a secret by name (a subscript of
    # os.environ, an attribute, a call, a snake_case variable) is not a secret and stays.
    (
        ("key", "token", "passw", "secret"),
        True,
        r"(?:key|token|passw(?:or)?d|secret)[^:=a-z0-9]*[:=]",
        (
            r"(?i)(?<![A-Za-z0-9])((?:[A-Za-z0-9]+[_-])*"
            r"(?:api[_-]?key|access[_-]?key|access[_-]?token|auth[_-]?token|token|password|passwd"
            r"|secret(?:[_-]?key)?)"
            r"""["']?\s*[:=]\s*(?P<quote>["'])?)"""
            r"""(?!\*\*\*)(?(quote)|(?!(?&code)))[^\s"',;)}\]]{6,}"""
            # Unquoted code: a call, a subscript, an attribute, or a variable name (letters and
            # underscores, a digit or two at the end: secrets are not spelt like that).
            r"(?(DEFINE)(?P<code>(?-i:[a-z_]+[0-9]{0,2})(?:$|[\s,;)}\]])"
            r"|[A-Za-z_][\w]*(?:\s*[\[(]|\.[A-Za-z_])))"
        ),
        r"\1" + MASK,
    ),
    # AWS access key ids.
    (("AKIA", "ASIA"), False, None, r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", "AKIA" + MASK),
)
_compiled: dict[str, regex.Pattern[str]] = {}


def redact(text: str) -> str:
    """``text`` with every secret it recognises replaced by ``***``."""
    for words, fold, after, pattern, replacement in _RULES:
        seen = text.casefold() if fold else text  # as (?i) matches: "TOKEN", "Key"
        if any(word in seen for word in words) and (after is None or re.search(after, seen)):
            compiled = _compiled.get(pattern)
            if compiled is None:
                import regex  # only for a text that holds a secret's marks

                compiled = _compiled.setdefault(pattern, regex.compile(pattern))
            text = compiled.sub(replacement, text)
    return text


@overload
def redact_all(value: dict[str, object]) -> dict[str, object]: ...
@overload
def redact_all(value: object) -> object: ...
def redact_all(value: Any) -> Any:
    """Redact every string inside a JSON-like value (dicts, lists, strings)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_all(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact_all(v) for v in value]
    return value
