"""A diagnosis as Markdown, for a GitHub issue comment or a chat message.

The same layout and order as the other renderers (:func:`errkb.render._document.layout`): the
fix first, then the facts with their sources, then the rest. Everything shown comes from a
pasted message or a record, so all of it is untrusted: prose is escaped so that no character
of it can open Markdown or HTML (a pasted ``<script>``, ``<img onerror=...>`` or
``[x](javascript:...)`` shows as the text it is), and code sits in fenced blocks whose fence is
longer than any run of backticks inside, so nothing in the code can close its block.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from errkb.render._document import layout, record_block, unglued

if TYPE_CHECKING:
    from errkb.findings import Diagnosis
    from errkb.records import Record
    from errkb.render._document import Block, Detail, Section

__all__ = ["code_block", "escape_markdown", "render_markdown", "render_record_markdown"]

#: Characters that open Markdown or HTML within a line, or a mention or issue link on GitHub:
#: each gets a backslash in front. An underscore between two letters or digits opens nothing.
_INLINE = re.compile(r"([\\`*{}\[\]#|~<>&@]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")
#: What opens a block at the start of a line: a list or a setext underline; an ordered list.
_START = re.compile(r"^(\s*)([-+=])")
_ORDERED = re.compile(r"^(\s*\d+)([.)])")


def escape_markdown(text: str) -> str:
    r"""``text`` as Markdown that shows exactly ``text``: no link, image, tag or emphasis.

    Every ASCII punctuation character that Markdown or HTML gives a meaning is escaped with a
    backslash (CommonMark's escape for any ASCII punctuation), so ``<`` never starts a tag or
    an autolink and ``[`` never a link; a number that would start an ordered list is escaped
    too. Line ends become spaces: an item stays one paragraph.

    >>> print(escape_markdown("<img src=x onerror=alert(1)> [a](javascript:b) max_model_len"))
    \<img src=x onerror=alert(1)\> \[a\](javascript:b) max_model_len
    """
    flat = " ".join(unglued(text).split("\n"))
    escaped = _START.sub(r"\1\\\2", _INLINE.sub(r"\\\1", flat))
    return _ORDERED.sub(r"\1\\\2", escaped)


def code_block(code: str) -> str:
    """``code`` in a fenced block that nothing inside can close.

    The fence is a run of backticks longer than the longest run in ``code`` (three at least).
    """
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{code}\n{fence}"


def _text(section: Section, index: int) -> str:
    # Whole, never cut with an ellipsis: a comment or a chat message is read in full, and a
    # solution cut short loses what to do (the terminal's first screen cuts; see ``fit``).
    item, tail = section.items[index], section.tail(index)
    return escape_markdown(unglued(f"{item}  {tail}" if tail else item))


def _section(section: Section) -> list[str]:
    heading = f"**{escape_markdown(section.heading)}**"
    if section.inline:
        return [f"{heading}: {_text(section, 0)}"]
    out = [heading, ""]
    indices = range(len(section.items))
    if section.kind == "code":
        out.extend(code_block(item) for item in section.items)
    elif section.kind == "text":
        out.extend(_text(section, i) for i in indices)
    elif section.kind == "numbered":
        out.extend(f"{n}. {_text(section, i)}" for n, i in enumerate(indices, 1))
    else:
        out.extend(f"- {_text(section, i)}" for i in indices)
    return out


def _blocks(blocks: list[Block], notes: list[str]) -> str:
    out: list[str] = []
    for block in blocks:
        title = escape_markdown(f"errkb: {block.title}")
        out += [f"### {title} \\[{escape_markdown(block.severity)}\\]", ""]
        if block.subtitle:
            out += [code_block(block.subtitle), ""]
        for section in block.sections:
            out += [*_section(section), ""]
        if block.footer:
            out += [f"*{escape_markdown(' | '.join(block.footer))}*", ""]
    out.extend(f"> errkb: note: {escape_markdown(note)}\n" for note in notes)
    return "\n".join(out).rstrip("\n") + "\n"


def render_markdown(diagnosis: Diagnosis, *, detail: Detail = "short") -> str:
    """The diagnosis as Markdown (``errkb explain --format markdown``, ``errkb serve``).

    ``detail`` chooses the short form (the fix first) or the long one, as for the terminal.
    """
    blocks, notes = layout(diagnosis, detail)
    return _blocks(blocks, notes)


def render_record_markdown(record: Record) -> str:
    """The long form of ``record`` alone (what ``errkb show`` prints) as Markdown."""
    return _blocks([record_block(record)], [])
