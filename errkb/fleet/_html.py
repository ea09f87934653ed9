"""The fleet scan as one self-contained HTML page (``errkb scan --html FILE``).

One file that opens offline, from a disk or an attachment: no CDN, no font, no image, nothing
fetched. The charts are SVG written here, in the page (why no plotting library: see
docs/fleet.md): one timeline per known error, a bar per time bin stacked by host, each piece
titled with its bin, host and count. Above them the table of errors, below them the table of
unknown shapes and the sources that could not be read; a click on a header sorts a table (a
few lines of inline script).

Every piece of text from the result came from logs or records, so none of it is trusted: it is
cleaned (secrets masked, control characters shown escaped) and HTML-escaped, and it never
reaches the script or a style: the script and the style sheet are constants, allowed by their
hashes in the page's Content-Security-Policy, which allows nothing else (no other script, no
inline event handler, no style attribute, no request of any kind).
"""

from __future__ import annotations

import base64
import hashlib
from datetime import datetime, timedelta, timezone
from html import escape
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["write_html"]

#: A timeline has at most this many bars: hours are binned by the first step that fits.
MAX_BARS = 192
#: The bin widths a timeline may take, in hours: an hour, then up to a week.
STEPS = (1, 2, 3, 6, 12, 24, 48, 168)
#: Hosts ranked by their lines over the whole fleet get these colours (Tableau 10, which reads
#: apart on light and dark backgrounds); the rest share one grey, "other hosts".
COLOURS = ("#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7")
OTHER = "#9c9c9c"
#: Characters of an example shown in the table; the timeline's card shows more.
TABLE_EXAMPLE = 120
CARD_EXAMPLE = 2000
#: Unknown shapes listed (most frequent first); the JSON has them all.
MAX_SHAPES = 500

# The chart's box, in SVG units (it scales to the page's width).
_WIDTH, _HEIGHT, _LEFT, _RIGHT, _TOP, _BOTTOM = 960, 150, 48, 8, 8, 26
_HOUR = timedelta(hours=1)
#: Hours between the labels under a timeline: the first that gives at most 8.
_TICKS = (1, 2, 3, 6, 12, 24, 48, 168, 336, 672, 1344)

_STYLE = """
:root { color-scheme: light dark; --fg: #1d1d1f; --bg: #fff; --muted: #666; --line: #ddd;
  --card: #f7f7f9; --accent: #2f5d8a; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e6e6; --bg: #16181c; --muted: #9aa;
  --line: #333840; --card: #1e2127; --accent: #8ab4e8; } }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg);
  background: var(--bg); margin: 0 auto; padding: 16px 24px 48px; max-width: 1280px; }
h1 { font-size: 22px; margin: 8px 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; }
h3 { font-size: 15px; margin: 0 0 4px; }
p.muted, .muted { color: var(--muted); }
code, pre { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
pre { white-space: pre-wrap; overflow-wrap: anywhere; margin: 6px 0 0; }
section.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 14px; margin: 12px 0; }
.sev { font-size: 12px; padding: 1px 6px; border-radius: 4px; border: 1px solid var(--line); }
.sev-critical { color: #fff; background: #b00020; border-color: #b00020; }
.sev-error { color: #fff; background: #c0392b; border-color: #c0392b; }
.sev-warning { color: #1d1d1f; background: #f0b429; border-color: #f0b429; }
.fix { margin: 4px 0; } .fix b { color: var(--accent); }
svg.timeline { display: block; width: 100%; height: auto; margin-top: 6px; }
svg .axis { stroke: var(--muted); stroke-width: 1; } svg .grid { stroke: var(--line); }
svg text { fill: var(--muted); font: 11px system-ui, sans-serif; }
svg text.end { text-anchor: end; } svg text.mid { text-anchor: middle; }
ul.legend { list-style: none; padding: 0; margin: 4px 0 0; display: flex; flex-wrap: wrap;
  gap: 4px 14px; font-size: 12px; }
ul.legend svg { vertical-align: -1px; margin-right: 4px; }
table { border-collapse: collapse; width: 100%; margin: 6px 0; font-size: 13px; }
th, td { text-align: left; vertical-align: top; padding: 5px 8px;
  border-bottom: 1px solid var(--line); }
td.num, th.num { text-align: right; white-space: nowrap; } td.time { white-space: nowrap; }
td.error { min-width: 220px; }
td.example { overflow-wrap: anywhere; min-width: 260px; max-width: 380px; }
th button { font: inherit; font-weight: 600; color: inherit; background: none; border: 0;
  padding: 0; cursor: pointer; }
th[aria-sort="ascending"] button::after { content: " \\25B2"; }
th[aria-sort="descending"] button::after { content: " \\25BC"; }
a { color: var(--accent); }
""" + "".join(f".h{i} {{ fill: {c}; }}\n" for i, c in enumerate((*COLOURS, OTHER)))

# Sorts every table of class "sortable" by the header clicked: by a cell's data-sort when it
# has one, else its text; numbers as numbers. A first click sorts numbers from the largest.
_SCRIPT = """
"use strict";
document.querySelectorAll("table.sortable").forEach(function (table) {
  var heads = Array.prototype.slice.call(table.tHead.rows[0].cells);
  heads.forEach(function (th, column) {
    var button = th.querySelector("button");
    if (!button) { return; }
    button.addEventListener("click", function () {
      var numeric = th.dataset.type === "number";
      var now = th.getAttribute("aria-sort");
      var up = now ? now === "descending" : !numeric;
      heads.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", up ? "ascending" : "descending");
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      var key = function (row) {
        var cell = row.cells[column];
        var text = cell.dataset.sort !== undefined ? cell.dataset.sort : cell.textContent;
        return numeric ? parseFloat(text) || 0 : text.toLowerCase();
      };
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        return (x < y ? -1 : x > y ? 1 : 0) * (up ? 1 : -1);
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
document.documentElement.dataset.ready = "true";
"""


def _hash(source: str) -> str:
    digest = hashlib.sha256(source.encode()).digest()
    return "'sha256-" + base64.b64encode(digest).decode() + "'"


#: Nothing but the page's own style sheet and script, by hash: no request, no other code.
CSP = (
    f"default-src 'none'; script-src {_hash(_SCRIPT)}; style-src {_hash(_STYLE)}; "
    "base-uri 'none'; form-action 'none'"
)


def write_html(result: dict[str, Any], path: Path) -> None:
    """Write the fleet result (the ``errkb.scan/1`` JSON of a fleet scan) as one HTML page.

    The page needs nothing but itself: open it from disk, attach it to a ticket, read it
    offline. ``result`` is untrusted: its text shows as text, whatever it holds.
    """
    path.write_text(_page(result), encoding="utf-8")


def _e(value: object) -> str:
    """Untrusted text, cleaned and escaped for HTML text or a quoted attribute."""
    return escape(shown(value), quote=True)


def _page(result: dict[str, Any]) -> str:
    groups: list[dict[str, Any]] = list(result.get("groups") or [])
    colours = _host_colours(groups)
    bins = _Bins.over(groups)
    out = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        "<title>errkb: known errors across the fleet</title>",
        f"<style>{_STYLE}</style></head><body>",
        "<h1>Known errors across the fleet</h1>",
        f'<p id="headline">{_e(headline(result))}</p>',
    ]
    if running := running_line(result):
        out.append(f'<p id="running">{_e(running)}</p>')
    out += _errors_table(result, groups)
    if groups:
        out.append('<h2 id="timelines">Timelines</h2>')
    if bins:
        out.append(f'<p class="muted">{_e(bins.legend())}</p>')
    out += (_card(i, g, bins, colours) for i, g in enumerate(groups, 1))
    out += _shapes_table(list(result.get("unknown") or []))
    out += _failed_table([s for s in result.get("sources") or [] if s.get("failed")])
    out += [f"<script>{_SCRIPT}</script>", "</body></html>", ""]
    return "\n".join(out)


def _head(label: str, kind: str = "text", sort: str | None = None) -> str:
    numeric = kind == "number"
    attrs = ' class="num" data-type="number"' if numeric else ' data-type="text"'
    if sort:
        attrs += f' aria-sort="{sort}"'
    return f'<th scope="col"{attrs}><button type="button">{escape(label)}</button></th>'


def _number(n: int) -> str:
    return f'<td class="num" data-sort="{n}">{n:,}</td>'


def _errors_table(result: dict[str, Any], groups: list[dict[str, Any]]) -> list[str]:
    out = ['<h2 id="errors">Known errors</h2>']
    if not groups:
        return [*out, '<p class="muted">No known error was found.</p>']
    running = running_counts(result)
    heads = (
        _head("Count", "number", "descending"),
        *([_head("All runs", "number")] if running is not None else []),
        _head("Error"),
        _head("Severity"),
        _head("First seen (UTC)"),
        _head("Last seen (UTC)"),
        _head("Hosts", "number"),
        _head("Example"),
        _head("Fix"),
    )
    out += ['<table id="errors-table" class="sortable"><thead><tr>', *heads, "</tr></thead><tbody>"]
    for i, g in enumerate(groups, 1):
        hosts = g.get("hosts") or {}
        severity = shown(g.get("severity"))
        title = _e(g.get("title") or g.get("id"))
        total = "" if running is None else _number(running.get(str(g.get("id")), 0))
        out.append(
            "<tr>"
            f"{_number(int(g.get('count', 0)))}{total}"
            f'<td class="error" data-sort="{title}"><a href="#g{i}">{title}</a><br>'
            f'<code class="muted">{_e(g.get("id"))}</code></td>'
            f'<td><span class="sev sev-{escape(severity, quote=True)}">{escape(severity)}</span></td>'
            f'<td class="time">{_e(when(g.get("first_seen")))}</td>'
            f'<td class="time">{_e(when(g.get("last_seen")))}</td>'
            f'<td class="num" data-sort="{len(hosts)}" title="{_e(hosts_line(hosts, 20))}">'
            f"{len(hosts):,}</td>"
            f'<td class="example"><code>{_e(cut(shown(g.get("example")), TABLE_EXAMPLE))}</code></td>'
            f"<td>{_e(g.get('fix') or '-')}</td>"
            "</tr>"
        )
    return [*out, "</tbody></table>"]


def _shapes_table(unknown: list[dict[str, Any]]) -> list[str]:
    out = ['<h2 id="unknown">Error lines no record knows, by shape</h2>']
    if not unknown:
        return [*out, '<p class="muted">None: every line that looked like an error was known.</p>']
    listed = unknown[:MAX_SHAPES]
    if len(unknown) > len(listed):
        out.append(
            f'<p class="muted">The {len(listed):,} most frequent of {len(unknown):,} shapes; '
            "the JSON output has them all.</p>"
        )
    heads = (
        _head("Count", "number", "descending"),
        _head("Shape"),
        _head("Example"),
        _head("Hosts"),
    )
    out += [
        '<table id="unknown-table" class="sortable"><thead><tr>',
        *heads,
        "</tr></thead><tbody>",
    ]
    for u in listed:
        count = int(u.get("count", 0))
        out.append(
            f"<tr>{_number(count)}"
            f'<td class="example"><code>{_e(cut(shown(u.get("shape")), CARD_EXAMPLE))}</code></td>'
            f'<td class="example"><code>{_e(cut(shown(u.get("example")), TABLE_EXAMPLE))}</code></td>'
            f"<td>{_e(hosts_line(u.get('hosts') or {}))}</td></tr>"
        )
    return [*out, "</tbody></table>"]


def _failed_table(failed: list[dict[str, Any]]) -> list[str]:
    if not failed:
        return []
    out = [
        '<h2 id="failed">Sources that could not be read</h2>',
        (
            '<table id="failed-table"><thead><tr><th scope="col">Source</th>'
            '<th scope="col">Host</th><th scope="col">Why</th></tr></thead><tbody>'
        ),
    ]
    out += (
        f"<tr><td><code>{_e(s.get('source'))}</code></td><td>{_e(host_name(s.get('host')))}</td>"
        f"<td>{_e(s.get('failed'))}</td></tr>"
        for s in failed
    )
    return [*out, "</tbody></table>"]


def _host_colours(groups: list[dict[str, Any]]) -> dict[str, int]:
    """The colour index of the hosts with the most lines across all errors; others are grey."""
    lines: dict[str, int] = {}
    for g in groups:
        for host, n in (g.get("hosts") or {}).items():
            name = host_name(host)
            lines[name] = lines.get(name, 0) + int(n)
    ranked = sorted(lines, key=lambda h: (-lines[h], h))
    return {h: i for i, h in enumerate(ranked[: len(COLOURS)])}


class _Bins:
    """The time bins shared by every timeline: from the first hour seen to the last."""

    def __init__(self, start: datetime, bars: int, step: int) -> None:
        self.start, self.bars, self.step = start, bars, step

    @classmethod
    def over(cls, groups: list[dict[str, Any]]) -> _Bins | None:
        hours = [h for g in groups for b, _, _ in g.get("timeline") or () if (h := _hour(b))]
        if not hours:
            return None
        first, last = min(hours), max(hours)
        span = int((last - first) / _HOUR)
        step = next((s for s in STEPS if span // s < MAX_BARS), STEPS[-1])
        # Bins start on a multiple of the step since the epoch: days at midnight UTC.
        epoch_hours = int(first.timestamp() // 3600)
        start = first - (epoch_hours % step) * _HOUR
        bars = int((last - start) / _HOUR) // step + 1
        return cls(start, bars, step)

    def index(self, hour: datetime) -> int:
        return int((hour - self.start) / _HOUR) // self.step

    def ticks(self) -> list[int]:
        """The bins that start on a round time: at most about 8 of them, midnight if a day."""
        span = self.bars * self.step
        every = next((t for t in _TICKS if t % self.step == 0 and span / t <= 8), _TICKS[-1])
        first = int(self.start.timestamp() // 3600)
        return [i for i in range(self.bars) if (first + i * self.step) % every == 0]

    def label(self, i: int) -> str:
        t = self.start + i * self.step * _HOUR
        return t.strftime("%m-%d") if self.step >= 24 else t.strftime("%m-%d %H:00")

    def span(self, i: int) -> str:
        t = self.start + i * self.step * _HOUR
        end = t + self.step * _HOUR
        return f"{t:%Y-%m-%d %H:00} to {end:%Y-%m-%d %H:00} UTC"

    def legend(self) -> str:
        size = f"{self.step} hours" if self.step > 1 else "an hour"
        first, last = self.span(0).split(" to ")[0], self.span(self.bars - 1).split(" to ")[1]
        return (
            f"Each bar is {size} ({first} to {last}), stacked by host; each chart has its own "
            "scale, its largest bar's count on the left. Hover a bar for its hour, host and count. "
            "Lines without a time are counted in the table but have no bar."
        )


def _hour(bucket: object) -> datetime | None:
    """A timeline bucket (``2026-12-01T14:00Z``) as a time, or None when it is not one."""
    try:
        stamp = datetime.strptime(str(bucket).replace("Z", "+0000"), "%Y-%m-%dT%H:%M%z")
    except ValueError:
        return None
    return stamp.astimezone(timezone.utc).replace(minute=0)


def _card(i: int, g: dict[str, Any], bins: _Bins | None, colours: dict[str, int]) -> str:
    count = int(g.get("count", 0))
    timed = sum(int(n) for _, _, n in g.get("timeline") or ())
    # Lines with no time have no bar: the card says how many, so the bars add up.
    untimed = f" ({count - timed:,} with no time, no bar)" if 0 < timed < count else ""
    head = (
        f'<section class="card" id="g{i}"><h3>{_e(g.get("title") or g.get("id"))}</h3>'
        f'<div class="muted"><code>{_e(g.get("id"))}</code> · {count:,} times{untimed} · '
        f"{_e(when(g.get('first_seen')))} to {_e(when(g.get('last_seen')))} UTC · "
        f"{_e(hosts_line(g.get('hosts') or {}))}</div>"
    )
    if g.get("fix"):
        head += f'<p class="fix"><b>Fix:</b> {_e(g["fix"])}</p>'
    chart = _timeline(g, bins, colours) if bins else ""
    example = f"<pre>{_e(cut(shown(g.get('example')), CARD_EXAMPLE))}</pre>"
    return (
        head
        + (chart or '<p class="muted">No line of this error had a time.</p>')
        + example
        + "</section>"
    )


def _timeline(g: dict[str, Any], bins: _Bins, colours: dict[str, int]) -> str:
    """The error's bars, one per bin, stacked by host colour, and the legend of its hosts."""
    other = len(COLOURS)
    stacks: dict[int, dict[int, int]] = {}
    hosts: dict[tuple[int, int], dict[str, int]] = {}  # per bin and colour: for the titles
    for bucket, host, n in g.get("timeline") or ():
        hour = _hour(bucket)
        if hour is None or int(n) <= 0:
            continue
        name = host_name(host)
        colour = colours.get(name, other)
        at = bins.index(hour)
        stack = stacks.setdefault(at, {})
        stack[colour] = stack.get(colour, 0) + int(n)
        names = hosts.setdefault((at, colour), {})
        names[name] = names.get(name, 0) + int(n)
    if not stacks:
        return ""
    top = max(sum(s.values()) for s in stacks.values())
    plot_w, plot_h = _WIDTH - _LEFT - _RIGHT, _HEIGHT - _TOP - _BOTTOM
    bar = plot_w / bins.bars
    gap = min(1.0, bar / 4)
    base = _TOP + plot_h
    out = [
        (
            f'<svg class="timeline" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
            f'aria-label="{_e(g.get("id"))}: occurrences over time by host">'
        ),
        f'<line class="grid" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{_TOP}" y2="{_TOP}"/>',
        f'<text class="end" x="{_LEFT - 6}" y="{_TOP + 4}">{top:,}</text>',
        f'<text class="end" x="{_LEFT - 6}" y="{base}">0</text>',
    ]
    for at in sorted(stacks):
        y = float(base)
        for colour in sorted(stacks[at]):
            n = stacks[at][colour]
            h = n / top * plot_h
            y -= h
            names = hosts[at, colour]
            who = hosts_line(names, 5) if colour == other else next(iter(names))
            out.append(
                f'<rect class="h{colour}" x="{_LEFT + at * bar + gap / 2:.2f}" y="{y:.2f}" '
                f'width="{max(bar - gap, 0.5):.2f}" height="{h:.2f}">'
                f"<title>{_e(bins.span(at))}: {_e(who)}: {n:,}</title></rect>"
            )
    out.append(f'<line class="axis" x1="{_LEFT}" x2="{_WIDTH - _RIGHT}" y1="{base}" y2="{base}"/>')
    # A label starts at its tick: none so near the right edge that it would be cut.
    for at in bins.ticks():
        x = _LEFT + at * bar
        if x > _WIDTH - _RIGHT - 72:
            break
        out.append(f'<line class="axis" x1="{x:.2f}" x2="{x:.2f}" y1="{base}" y2="{base + 4}"/>')
        out.append(f'<text x="{x:.2f}" y="{base + 16}">{escape(bins.label(at))}</text>')
    out.append("</svg>")
    return "".join(out) + _legend(g, colours)


def _legend(g: dict[str, Any], colours: dict[str, int]) -> str:
    """The colours of the hosts this error was seen on, and "other hosts" when some are grey."""
    seen = {host_name(h) for _, h, _ in g.get("timeline") or ()}
    named = sorted((colours[h], h) for h in seen if h in colours)
    others = len(seen) - len(named)
    items = [(c, _e(h)) for c, h in named]
    if others:
        items.append((len(COLOURS), f"{others:,} other host{'s' if others > 1 else ''}"))
    swatches = "".join(
        f'<li><svg width="10" height="10" aria-hidden="true"><rect class="h{c}" width="10" '
        f'height="10"/></svg>{label}</li>'
        for c, label in items
    )
    return f'<ul class="legend">{swatches}</ul>'
