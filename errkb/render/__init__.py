"""Rendering a diagnosis: rich panels on a colour terminal, plain text elsewhere, or JSON.

The choice follows the stream and the environment: ``NO_COLOR`` or ``TERM=dumb`` give plain
text, ``FORCE_COLOR`` gives colour even into a pipe, and :class:`~errkb.options.Options` can
force either. Every piece of untrusted text is cleaned first (:mod:`errkb._sanitize`) and handed to rich
as :class:`rich.text.Text`, never as markup.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import attrs

from errkb.render._document import Block, layout

if TYPE_CHECKING:
    from typing import TextIO

    from errkb.findings import Diagnosis
    from errkb.options import Options

__all__ = ["Style", "render", "render_html", "render_json", "render_plain", "style_for"]


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
        width = shutil.get_terminal_size((100, 24)).columns
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


def render(diagnosis: Diagnosis, options: Options) -> None:
    """Write ``diagnosis`` to ``options.file`` (stderr when None) in the form the stream suits."""
    file = options.file if options.file is not None else sys.stderr
    style = style_for(file, options)
    if style.color:
        _render_rich(diagnosis, file, style)
    else:
        _write(file, render_plain(diagnosis, style.width, ascii_only=style.ascii))


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


def render_plain(diagnosis: Diagnosis, width: int = 100, *, ascii_only: bool = False) -> str:
    """The diagnosis as plain text, wrapped at ``width`` columns."""
    blocks, notes = layout(diagnosis)
    rule = ("-" if ascii_only else "\u2500") * min(width, 100)
    out: list[str] = []
    for block in blocks:
        out.extend([rule, f"errkb: {block.title} [{block.severity}]", f"  {block.subtitle}"])
        out.extend(_plain_sections(block, width))
    out.append(rule)
    out.extend(f"errkb: note: {n}" for n in notes)
    return "\n".join(out) + "\n"


def _plain_sections(block: Block, width: int) -> list[str]:
    out: list[str] = []
    for section in block.sections:
        out.extend(["", section.heading])
        for n, item in enumerate(section.items, 1):
            if section.kind == "code":
                out.extend("    " + line for line in item.split("\n"))
                continue
            lead = {"numbered": f"  {n}. ", "list": "  - "}.get(section.kind, "  ")
            for paragraph in item.split("\n"):
                out.extend(
                    textwrap.wrap(
                        paragraph,
                        width=width,
                        initial_indent=lead,
                        subsequent_indent=" " * len(lead),
                        break_on_hyphens=False,
                        break_long_words=False,
                    )
                    or [lead.rstrip()]
                )
                lead = " " * len(lead)
    return out


_HTML_COLORS = {"critical": "#b00020", "error": "#d32f2f", "warning": "#b26a00"}


def render_html(diagnosis: Diagnosis) -> str:
    """The diagnosis as a self-contained HTML fragment (a notebook's rich output).

    The same layout as the plain text; every piece of text is cleaned, then HTML-escaped, so
    nothing in a message or a record can add markup or script to the page.
    """
    from html import escape

    blocks, notes = layout(diagnosis)
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
        out.append(f'<div style="opacity: 0.7"><code>{escape(block.subtitle)}</code></div>')
        for section in block.sections:
            out.append(f'<div style="margin-top: 6px"><strong>{escape(section.heading)}</strong>')
            if section.kind == "code":
                out.extend(f"<pre>{escape(item)}</pre>" for item in section.items)
            elif section.kind == "text":
                out.extend(
                    "<p>" + escape(item).replace("\n", "<br>") + "</p>" for item in section.items
                )
            else:
                tag = "ol" if section.kind == "numbered" else "ul"
                items = "".join(
                    "<li>" + escape(item).replace("\n", "<br>") + "</li>" for item in section.items
                )
                out.append(f"<{tag}>{items}</{tag}>")
            out.append("</div>")
        out.append("</div>")
    out.extend(f'<div style="opacity: 0.7">errkb: note: {escape(n)}</div>' for n in notes)
    out.append("</div>")
    return "\n".join(out) + "\n"


def _render_rich(diagnosis: Diagnosis, file: TextIO, style: Style) -> None:
    from rich import box
    from rich.console import Console, Group
    from rich.padding import Padding
    from rich.panel import Panel
    from rich.table import Table
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
    colors = {"critical": "bold red", "error": "red", "warning": "yellow"}
    blocks, notes = layout(diagnosis)
    for block in blocks:
        parts: list[Any] = [Text(block.subtitle, style="dim")]
        for section in block.sections:
            parts.append(Text(""))
            parts.append(Text(section.heading, style="bold"))
            for n, item in enumerate(section.items, 1):
                if section.kind == "code":
                    parts.append(Padding(Text(item, style="cyan"), (0, 0, 0, 2)))
                    continue
                lead = {"numbered": f"{n}.", "list": "-"}.get(section.kind)
                if lead is None:
                    parts.append(Padding(Text(item), (0, 0, 0, 2)))
                    continue
                # A two-column grid gives wrapped lines a hanging indent under the text.
                row = Table.grid(padding=(0, 1, 0, 0))
                row.add_column(no_wrap=True)
                row.add_column()
                row.add_row(Text(lead, style="dim"), Text(item))
                parts.append(Padding(row, (0, 0, 0, 2)))
        title = Text.assemble(
            ("errkb: ", "bold"),
            (block.title, "bold"),
            " ",
            (f"[{block.severity}]", colors.get(block.severity, "red")),
        )
        console.print(
            Panel(
                Group(*parts),
                title=title,
                title_align="left",
                box=box.ASCII if style.ascii else box.ROUNDED,
                border_style=colors.get(block.severity, "red"),
            )
        )
    for note in notes:
        console.print(Text(f"errkb: note: {note}", style="dim"))
