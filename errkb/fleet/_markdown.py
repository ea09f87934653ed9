"""The fleet scan as Markdown for a ticket (``errkb scan --format markdown``).

Short enough to paste into an issue or a chat: the totals, the table of known errors (count,
first and last seen, hosts, an example cut short, the Fix), the sources that could not be read
and the most frequent unknown shapes, each list cut at a stated length with what was left out
counted. Every piece of text came from logs or records and is untrusted: it is cleaned (secrets
masked, control characters shown escaped) and escaped for Markdown, so a pipe cannot split a
table cell, a backtick cannot open code, and ``<script>`` or ``[x](javascript:...)`` shows as
the text it is (:func:`errkb.render._markdown.escape_markdown`).
"""

from __future__ import annotations

from typing import Any

from errkb.fleet._summary import (
    cut,
    headline,
    host_name,
    hosts_line,
    running_counts,
    running_line,
    shown,
    when,
)
from errkb.render._markdown import escape_markdown

__all__ = ["markdown"]

#: Characters of an example shown in the table.
EXAMPLE = 100


def _md(value: object) -> str:
    """Untrusted text, cleaned and escaped: it shows as itself, in a table cell too.

    Its ends are stripped: four spaces (a tab is four) after a list item's marker would open
    a code block.
    """
    return escape_markdown(shown(value).strip())


def markdown(result: dict[str, Any], *, top: int = 10, kinds: int = 30) -> str:
    """The fleet result (the ``errkb.scan/1`` JSON of a fleet scan) as Markdown for a ticket.

    At most ``kinds`` known errors (most frequent first), and ``top`` failed sources and unknown
    shapes; a line after each cut list says how many were left out (the JSON has them all).
    """
    groups: list[dict[str, Any]] = list(result.get("groups") or [])
    out = ["### errkb: known errors across the fleet", "", _md(headline(result)), ""]
    if said := running_line(result):
        out += [_md(said), ""]
    if groups:
        totals = running_counts(result)
        total = ("| All runs ", "| ---: ") if totals is not None else ("", "")
        out += [
            f"| Count {total[0]}| Error | First seen (UTC) | Last seen (UTC) | Hosts | Example | Fix |",
            f"| ---: {total[1]}| --- | --- | --- | --- | --- | --- |",
        ]
        out += (_row(g, totals) for g in groups[:kinds])
        out.append("")
        out += _left_out(groups, kinds, "known error kinds", "errors")
    else:
        out += ["No known error was found.", ""]
    failed = [s for s in result.get("sources") or [] if s.get("failed")]
    if failed:
        out += ["**Sources that could not be read**", ""]
        out += (
            f"- {_md(s.get('source'))}{_on(s.get('host'))}: {_md(s.get('failed'))}"
            for s in failed[:top]
        )
        out.append("")
        out += _left_out(failed, top, "failed sources")
    unknown: list[dict[str, Any]] = list(result.get("unknown") or [])
    if unknown:
        out += ["**Error lines no record knows, by shape**", "", "| Count | Shape | Hosts |"]
        out.append("| ---: | --- | --- |")
        out += (
            f"| {int(u.get('count', 0)):,} | {_md(cut(shown(u.get('shape')), 2 * EXAMPLE))} "
            f"| {_md(hosts_line(u.get('hosts') or {}))} |"
            for u in unknown[:top]
        )
        out.append("")
        out += _left_out(unknown, top, "shapes", "lines")
    return "\n".join(out)


def _row(g: dict[str, Any], running: dict[str, int] | None) -> str:
    title = _md(g.get("title") or g.get("id"))
    total = [] if running is None else [f"{running.get(str(g.get('id')), 0):,}"]
    cells = (
        f"{int(g.get('count', 0)):,}",
        *total,
        f"{title} ({_md(g.get('id'))})",
        _md(when(g.get("first_seen"))),
        _md(when(g.get("last_seen"))),
        _md(hosts_line(g.get("hosts") or {})),
        _md(cut(shown(g.get("example")), EXAMPLE)),
        _md(g.get("fix") or "-"),
    )
    return "| " + " | ".join(cells) + " |"


def _on(host: object) -> str:
    return f" (on {_md(host_name(host))})" if host else ""


def _left_out(items: list[dict[str, Any]], shown_: int, what: str, counted: str = "") -> list[str]:
    """A line that counts what a list cut at ``shown_`` left out; nothing when it left none."""
    rest = items[shown_:]
    if not rest:
        return []
    lines = f" ({sum(int(r.get('count', 0)) for r in rest):,} {counted})" if counted else ""
    said = f"*Not shown: {len(rest):,} of {len(items):,} {what}{lines}; the JSON and the HTML "
    return [said + "report list them all.*", ""]
