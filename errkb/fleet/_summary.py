"""What the fleet reports (HTML and Markdown) say alike: the headline, hosts, times, cut text.

Everything here reads the fleet result (the ``errkb.scan/1`` JSON of a fleet scan, a plain
``dict``) and gives plain text: the renderers escape it for their own format. Text that came
from logs (examples, shapes, sources, hosts, reasons) and from records is untrusted: it passes
through :func:`shown` first, which masks secrets and shows control characters escaped.
"""

from __future__ import annotations

from typing import Any

from errkb._sanitize import clean
from errkb.units import format_bytes

__all__ = [
    "NO_HOST",
    "cut",
    "headline",
    "host_name",
    "hosts_line",
    "running_counts",
    "running_line",
    "shown",
    "when",
]

#: What a line with no known host is filed under, when the result says ``null``.
NO_HOST = "(no host)"


def shown(value: object) -> str:
    """``value`` as text safe to show: secrets masked, control characters escaped."""
    return "" if value is None else clean(value)


def cut(text: str, limit: int) -> str:
    """``text`` on one line, at most ``limit`` characters, ``…`` where it was cut."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def when(iso: str | None) -> str:
    """An ISO 8601 UTC time (``2026-12-01T14:03:07Z``) as ``2026-12-01 14:03:07``, or ``-``."""
    if not iso:
        return "-"
    return shown(iso).replace("T", " ").removesuffix("Z")


def host_name(host: object) -> str:
    """A host as the reports name it: a line with no known host (null, "") is ``(no host)``."""
    return str(host) if host else NO_HOST


def hosts_line(hosts: dict[str, int], top: int = 3) -> str:
    """The hosts, most lines first: ``node-1 (40), node-2 (3) and 5 more``."""
    ranked = sorted(hosts.items(), key=lambda kv: (-kv[1], str(kv[0])))
    named = ", ".join(f"{shown(host_name(h))} ({n:,})" for h, n in ranked[:top])
    rest = len(ranked) - top
    return f"{named} and {rest:,} more" if rest > 0 else named


def _failures(groups: list[dict[str, Any]]) -> int:
    return sum(int(g.get("count", 0)) for g in groups)


def headline(result: dict[str, Any]) -> str:
    """One sentence of totals: the known errors, the sources read and failed, what was read."""
    groups = result.get("groups") or []
    sources = result.get("sources") or []
    failed = int(result.get("failed") or 0)
    unknown = result.get("unknown") or []
    read = f"{int(result.get('lines', 0)):,} lines ({format_bytes(int(result.get('bytes', 0)))})"
    where = f"{len(sources):,} sources, {failed:,} failed" if sources else "1 source"
    return (
        f"{_failures(groups):,} known errors in {len(groups):,} kinds; "
        f"{_failures(unknown):,} unknown error lines in {len(unknown):,} shapes; "
        f"{read} read from {where}."
    )


def running_counts(result: dict[str, Any]) -> dict[str, int] | None:
    """Each known error's count across all runs with the state (``--state``), by record id.

    None on a run without a state.
    """
    running = result.get("running")
    if not isinstance(running, dict):
        return None
    return {str(g.get("id")): int(g.get("count", 0)) for g in running.get("groups") or []}


def running_line(result: dict[str, Any]) -> str | None:
    """The totals across all runs with the state, or None on a run without a state."""
    running = result.get("running")
    if not isinstance(running, dict):
        return None
    groups, unknown = running.get("groups") or [], running.get("unknown") or []
    read = f"{int(running.get('lines', 0)):,} lines ({format_bytes(int(running.get('bytes', 0)))})"
    return (
        f"All runs with this state: {_failures(groups):,} known errors in {len(groups):,} kinds; "
        f"{_failures(unknown):,} unknown error lines in {len(unknown):,} shapes; {read} read."
    )
