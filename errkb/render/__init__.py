"""Rendering a diagnosis: rich panels on a colour terminal, plain text elsewhere, JSON, Markdown.

The choice follows the stream and the environment: ``NO_COLOR`` or ``TERM=dumb`` give plain
text, ``FORCE_COLOR`` gives colour even into a pipe, and :class:`~errkb.options.Options` can
force either. Every piece of untrusted text is cleaned first (:mod:`errkb._sanitize`) and handed to rich
as :class:`rich.text.Text`, never as markup.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from errkb._attrs import attrs
from errkb.render._document import (
    Block,
    Section,
    fit,
    fold_code,
    layout,
    record_block,
    unglued,
    wrap,
)
from errkb.render._markdown import render_markdown, render_record_markdown

if TYPE_CHECKING:
    from typing import TextIO

    from errkb.doctor import Checkup
    from errkb.findings import Diagnosis
    from errkb.options import Options
    from errkb.records import Record
    from errkb.render._document import Detail

__all__ = [
    "Style",
    "render",
    "render_checkup",
    "render_html",
    "render_json",
    "render_markdown",
    "render_plain",
    "render_record",
    "render_record_markdown",
    "style_for",
]


@attrs.frozen
class Style:
    """How to write to one stream: colour or not, width, box characters or ASCII."""

    color: bool
    width: int
    ascii: bool


def _isatty(file: Any) -> bool:
    try:
        return bool(file.isatty())
    except Exception:
        return False


def style_for(file: TextIO, options: Options) -> Style:
    """Decide colour, width and box characters for ``file`` from options and environment."""
    env = os.environ
    tty = _isatty(file)
    if options.color is not None:
        color = options.color
    elif env.get("NO_COLOR"):
        color = False
    elif env.get("FORCE_COLOR"):
        color = True
    else:
        color = tty and env.get("TERM", "") not in ("dumb", "unknown")
    if options.width:
        width = options.width
    elif tty:
        width = _terminal_width(file)
    else:
        try:
            width = int(env.get("COLUMNS", "100"))
        except ValueError:
            width = 100
    width = max(40, min(width, 200))
    # In-memory streams (StringIO) have no encoding and hold any text.
    encoding = (getattr(file, "encoding", None) or "utf-8").lower().replace("-", "")
    ascii_only = options.ascii if options.ascii is not None else not encoding.startswith("utf")
    return Style(color=color, width=width, ascii=ascii_only or env.get("TERM") == "dumb")


def _terminal_width(file: Any) -> int:
    """``COLUMNS`` when set, else the width of the terminal ``file`` writes to, else 100.

    What :func:`shutil.get_terminal_size` gives, for the stream written to rather than stdout,
    without importing :mod:`shutil` (and its compression modules) on a first diagnosis.
    """
    try:
        columns = int(os.environ.get("COLUMNS", "0"))
    except ValueError:
        columns = 0
    if columns > 0:
        return columns
    try:
        return os.get_terminal_size(file.fileno()).columns or 100
    except (AttributeError, ValueError, OSError):
        return 100


def render(diagnosis: Diagnosis, options: Options) -> None:
    """Write ``diagnosis`` to ``options.file`` (stderr when None) in the form the stream suits.

    ``options.detail`` chooses the short form (the fix first) or the long one.
    """
    file = options.file if options.file is not None else sys.stderr
    style = style_for(file, options)
    if style.color:
        _render_rich(diagnosis, file, style, options.detail)
    else:
        _write(
            file,
            render_plain(diagnosis, style.width, ascii_only=style.ascii, detail=options.detail),
        )


def render_checkup(checkup: Checkup, options: Options, *, hide_user: bool = False) -> None:
    """Write ``checkup`` (``errkb doctor``) to ``options.file``: verdicts first, then the facts.

    The same panels as a diagnosis on a colour terminal, the same plain text elsewhere.
    """
    from errkb.render._doctor import checkup_layout  # errkb doctor's only: not a diagnosis's

    file = options.file if options.file is not None else sys.stdout
    style = style_for(file, options)
    blocks, notes = checkup_layout(checkup, hide_user=hide_user)
    if style.color:
        _rich(blocks, notes, file, style, spaced=False)
    else:
        _write(file, _plain(blocks, notes, style.width, ascii_only=style.ascii, spaced=False))


def render_json(diagnosis: Diagnosis) -> str:
    """The versioned JSON form, ASCII-only so no control character can reach a terminal."""
    return json.dumps(diagnosis.to_dict(), indent=2, ensure_ascii=True, default=str)


def _write(file: TextIO, text: str) -> None:
    encoding = getattr(file, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        text = text.encode(encoding, "backslashreplace").decode(encoding, "replace")
    file.write(text)
    file.flush()


def render_plain(
    diagnosis: Diagnosis, width: int = 100, *, ascii_only: bool = False, detail: Detail = "short"
) -> str:
    r"""The diagnosis as plain text, no line wider than ``width`` columns.

    Long code lines of an example fix are continued with Python's `` \`` (see
    :func:`errkb.render._document.wrap_code`), so that what is copied still runs.
    """
    blocks, notes = layout(diagnosis, detail)
    return _plain(blocks, notes, width, ascii_only=ascii_only, spaced=detail == "long")


def render_record(record: Record, options: Options) -> None:
    """Write the long form of ``record`` alone (``errkb show``) to ``options.file``.

    The same layout as a diagnosis in the long form, without numbers: what the record
    matches, its solutions (captures as ``<name>``), example, documentation, history, likely
    situations and upstream raise site.
    """
    file = options.file if options.file is not None else sys.stdout
    style = style_for(file, options)
    blocks = [record_block(record)]
    if style.color:
        _rich(blocks, [], file, style, spaced=True)
    else:
        _write(file, _plain(blocks, [], style.width, ascii_only=style.ascii, spaced=True))


def _plain(
    blocks: list[Block], notes: list[str], width: int, *, ascii_only: bool, spaced: bool
) -> str:
    mark = "-" if ascii_only else "\u2500"
    rule = mark * min(width, 100)
    out: list[str] = [rule]
    for block in blocks:
        out.extend(wrap(f"errkb: {block.title} [{block.severity}]", width, indent="  "))
        if block.subtitle:
            out.extend(wrap(block.subtitle, width, "  "))
        out.extend(_plain_sections(block, width, ascii_only=ascii_only, spaced=spaced))
        footer = block.closing(len(rule) - 4)
        closing = f"{mark * 2} {footer} " if footer else ""
        if len(closing) > len(rule):
            out.extend(wrap(footer, width, "  "))
            closing = ""
        out.append(closing + mark * (len(rule) - len(closing)))
    for note in notes:
        out.extend(wrap(note, width, "errkb: note: ", "  "))
    return "\n".join(out) + "\n"


_LEADS = {"numbered": "{n}. ", "list": "- "}


def _plain_sections(block: Block, width: int, *, ascii_only: bool, spaced: bool) -> list[str]:
    out: list[str] = []
    for section in block.sections:
        if spaced:
            out.append("")
        if not section.inline:
            out.extend(wrap(section.heading, width, indent="  "))
        for n, item in enumerate(section.items, 1):
            if section.kind == "code":
                out.extend("    " + part for part in fold_code(item, width - 4))
                continue
            indent = None
            if section.inline and n == 1:
                lead = f"{section.heading}: "
            else:
                lead = "  " + _LEADS.get(section.kind, "").format(n=n)
                indent = "    " if section.kind == "hanging" else None
            tail = section.tail(n - 1)
            if section.lines is None:
                out.extend(wrap(f"{item}  {tail}" if tail else item, width, lead, indent))
            else:
                out.extend(
                    fit(item, width, section.lines, lead, indent, tail=tail, ascii_only=ascii_only)
                )
    return out


_HTML_COLORS = {"critical": "#b00020", "error": "#d32f2f", "warning": "#b26a00"}


def render_html(diagnosis: Diagnosis, *, detail: Detail = "short") -> str:
    """The diagnosis as a self-contained HTML fragment (a notebook's rich output).

    The same layout and order as the plain text (cut as it is at 100 columns); every piece of
    text is cleaned, then HTML-escaped, so nothing in a message or a record can add markup or
    script to the page.
    """
    from html import escape

    def text(section: Section, index: int) -> str:
        item, tail = section.items[index], section.tail(index)
        if section.lines is None:
            shown = unglued(f"{item}  {tail}" if tail else item)
        else:
            shown = " ".join(fit(item, 100, section.lines, tail=tail))
        return escape(shown).replace("\n", "<br>")

    blocks, notes = layout(diagnosis, detail)
    out = ['<div class="errkb-diagnosis" style="font-family: sans-serif; line-height: 1.4">']
    for block in blocks:
        color = _HTML_COLORS.get(block.severity, _HTML_COLORS["error"])
        out.append(
            f'<div style="border-left: 4px solid {color}; padding: 4px 12px; margin: 8px 0">'
        )
        out.append(
            f"<div><strong>errkb: {escape(block.title)}</strong> "
            f'<span style="color: {color}">[{escape(block.severity)}]</span></div>'
        )
        if block.subtitle:
            out.append(f'<div style="opacity: 0.7"><code>{escape(block.subtitle)}</code></div>')
        for section in block.sections:
            heading = f"<strong>{escape(section.heading)}</strong>"
            indices = range(len(section.items))
            if section.inline:
                out.append(f'<div style="margin-top: 6px">{heading}: {text(section, 0)}</div>')
                continue
            out.append(f'<div style="margin-top: 6px">{heading}')
            if section.kind == "code":
                out.extend(f"<pre>{escape(item)}</pre>" for item in section.items)
            elif section.kind == "text":
                out.extend(f"<p>{text(section, i)}</p>" for i in indices)
            else:
                tag = "ol" if section.kind == "numbered" else "ul"
                items = "".join(f"<li>{text(section, i)}</li>" for i in indices)
                out.append(f"<{tag}>{items}</{tag}>")
            out.append("</div>")
        if block.footer:
            footer = escape(" | ".join(block.footer))
            out.append(f'<div style="opacity: 0.7"><code>{footer}</code></div>')
        out.append("</div>")
    out.extend(f'<div style="opacity: 0.7">errkb: note: {escape(n)}</div>' for n in notes)
    out.append("</div>")
    return "\n".join(out) + "\n"


def _render_rich(diagnosis: Diagnosis, file: TextIO, style: Style, detail: Detail) -> None:
    blocks, notes = layout(diagnosis, detail)
    _rich(blocks, notes, file, style, spaced=detail == "long")


def _rich(
    blocks: list[Block], notes: list[str], file: TextIO, style: Style, *, spaced: bool
) -> None:
    from rich import box
    from rich.console import Console, Group
    from rich.panel import Panel
    from rich.text import Text

    console = Console(
        file=file,
        width=style.width,
        force_terminal=True,
        color_system="standard",
        markup=False,
        emoji=False,
        highlight=False,
        safe_box=True,
        legacy_windows=False,
    )
    colors = {
        "critical": "bold red",
        "error": "red",
        "broken": "red",
        "warning": "yellow",
        "note": "cyan",
        "facts": "blue",
    }
    # The panel's border and padding take two columns a side.
    inner = style.width - 4
    for block in blocks:
        color = colors.get(block.severity, "red")
        heading = Text.assemble(
            ("errkb: ", "bold"), (block.title, "bold"), " ", (f"[{block.severity}]", color)
        )
        parts: list[Any] = []
        if heading.cell_len > inner - 2:
            # Too long for the border: the border says errkb, the first line the title.
            parts.append(Text(block.title, style="bold"))
            heading = Text.assemble(("errkb ", "bold"), (f"[{block.severity}]", color))
        if block.subtitle:
            parts.append(Text(block.subtitle, style="dim"))
        for section in block.sections:
            if spaced:
                parts.append(Text(""))
            parts.extend(_rich_section(section, inner, ascii_only=style.ascii))
        footer = block.closing(inner - 4)
        if len(footer) > inner - 4:
            parts.append(Text(footer, style="dim"))
            footer = ""
        console.print(
            Panel(
                Group(*parts),
                title=heading,
                title_align="left",
                subtitle=Text(footer, style="dim") if footer else None,
                subtitle_align="left",
                box=box.ASCII if style.ascii else box.ROUNDED,
                border_style=color,
            )
        )
    for note in notes:
        console.print(Text(f"errkb: note: {note}", style="dim"))


def _rich_section(section: Section, inner: int, *, ascii_only: bool) -> list[Any]:
    """The renderables of one section, ``inner`` columns wide, wrapped as the plain text is."""
    from rich.padding import Padding
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = [] if section.inline else [Text(section.heading, style="bold")]
    for n, item in enumerate(section.items, 1):
        if section.kind == "code":
            code = "\n".join(fold_code(item, inner - 2))
            parts.append(Padding(Text(code, style="cyan", no_wrap=True), (0, 0, 0, 2)))
            continue
        lead: Text | None = None
        indent = 2
        if section.inline and n == 1:
            lead, indent = Text(f"{section.heading}:", style="bold"), 0
        elif section.kind in _LEADS:
            lead = Text(_LEADS[section.kind].format(n=n).strip(), style="dim")
        room = inner - indent - (lead.cell_len + 1 if lead is not None else 0)
        tail = section.tail(n - 1)
        # Wrapped here, not by rich, so both renderers break alike (and a fact stays whole).
        more = "  " if section.kind == "hanging" else None
        if section.lines is not None:
            lines = fit(item, room, section.lines, "", more, tail=tail, ascii_only=ascii_only)
        else:
            lines = wrap(f"{item}  {tail}" if tail else item, room, "", more)
        if lead is None:
            parts.append(Padding(Text("\n".join(lines)), (0, 0, 0, indent)))
            continue
        # A two-column grid gives wrapped lines a hanging indent under the text.
        row = Table.grid(padding=(0, 1, 0, 0))
        row.add_column(no_wrap=True)
        row.add_column()
        row.add_row(lead, Text("\n".join(lines)))
        parts.append(Padding(row, (0, 0, 0, indent)))
    return parts
