r"""Making untrusted text safe for a terminal.

Exception messages, record fields and frame values may carry escape sequences (colours, OSC 8
links, OSC 52 clipboard writes, cursor moves), BEL, carriage returns, backspaces or
bidirectional overrides. Each such character is shown escaped (``\\x1b``, ``\\u202e``) instead of
reaching the terminal; newlines stay, tabs become spaces.
"""

from __future__ import annotations

import re

from errkb._redact import redact

__all__ = ["clean", "escaped"]

# C0 controls but newline, DEL, C1 controls, bidirectional and zero-width direction marks,
# line/paragraph separators, and lone surrogates (which cannot be written to a stream).
# The standard library's engine: a character class needs nothing of regex's, and compiles in a
# third of the time.
_UNSAFE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
    r"\ud800-\udfff]"
)


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(text: object) -> str:
    """``text`` as a string, secrets masked, every unsafe character shown escaped."""
    s = text if isinstance(text, str) else str(text)
    return escaped(redact(s))


def escaped(text: str) -> str:
    """``text`` with every unsafe character shown escaped, and no secrets masked.

    For record data (ids, titles), never for what a program printed.
    """
    return _UNSAFE.sub(_escape, text.replace("\t", "    "))
