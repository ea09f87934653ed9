"""Fleet results (the ``errkb.scan/1`` JSON of a fleet scan) built from log events, for the
tests of its reports (tests/unit/test_fleet_html.py, test_fleet_markdown.py, tests/browser).

Each event is a line seen on a host at a time. Which record a line is, its id, title and
severity, come from the real scanner over the default records; the Fix is the record's first
solution; what no record knows is filed as an unknown shape. The counts, times, hosts and
timelines are then added up from the events, as docs/json.md says a fleet scan gives them, so
every figure a report shows can be checked against the events the test wrote.
"""

from __future__ import annotations

import functools
import re
from collections import Counter, defaultdict
from dataclasses import dataclass

from helpers import NO_BLOCKS_MESSAGE, NOISE, SEED_MESSAGE, TORCH_OOM_OTHERS

import errkb

#: Text that must reach a reader as text: markup, script, a Markdown table's pipes and code.
HOSTILE_HOST = '</script><img src=x onerror="window.__pwned=1">'
HOSTILE_PREFIX = "<script>window.__pwned=1</script> | a | b | `tick` ``` [x](javascript:y)"
HOSTILE_SHAPE = "RuntimeError: <img src=x onerror=alert(1)> | pipe | `<n>` failed"


@dataclass(frozen=True)
class Event:
    """A line on a host, at a time (ISO 8601 UTC) or with none."""

    host: str | None
    time: str | None
    line: str


@functools.cache
def _registry():
    from errkb.registry import default_registry

    return default_registry()


@functools.cache
def _known(line: str) -> dict | None:
    """The record the scanner files ``line`` under, as its brief, with a Fix; or None."""
    from errkb.scan import scan

    groups = scan([line], registry=_registry()).groups
    if not groups:
        return None
    said = errkb.explain(line).to_dict()
    fix = said["fix"]["text"] if said["fix"] else (said["solutions"] or [{"text": None}])[0]["text"]
    return {**groups[0].record.brief(), "fix": fix}


def _bucket(time: str) -> str:
    return time[:13] + ":00Z"


def _shape(line: str) -> str:
    return re.sub(r"\d+", "<n>", line)


def fleet_result(events: list[Event], failed: dict[str, str] | None = None) -> dict:
    """The fleet result of ``events``, each host a source ``<host>/app.log``; ``failed`` adds
    sources that could not be read (source -> why)."""
    by_record: dict[str, list[Event]] = defaultdict(list)
    briefs: dict[str, dict] = {}
    unknown: dict[str, list[Event]] = defaultdict(list)
    for e in events:
        brief = _known(e.line)
        if brief is None:
            if re.search(r"Error|Exception", e.line):  # looks like an error: a shape
                unknown[_shape(e.line)].append(e)
        else:
            briefs[brief["id"]] = brief
            by_record[brief["id"]].append(e)
    groups = []
    for rid, seen in by_record.items():
        times = sorted(e.time for e in seen if e.time)
        timeline = Counter((_bucket(e.time), e.host) for e in seen if e.time)
        groups.append(
            {
                **briefs[rid],
                "count": len(seen),
                "first_lines": [],
                "example": seen[0].line,
                "first_seen": times[0] if times else None,
                "last_seen": times[-1] if times else None,
                "hosts": dict(Counter(e.host for e in seen)),
                "sources": sorted({f"{e.host}/app.log" for e in seen}),
                "timeline": [[b, h, n] for (b, h), n in sorted(timeline.items(), key=str)],
            }
        )
    groups.sort(key=lambda g: (-g["count"], g["id"]))
    shapes = [
        {
            "shape": s,
            "count": len(seen),
            "example": seen[0].line,
            "hosts": dict(Counter(e.host for e in seen)),
        }
        for s, seen in unknown.items()
    ]
    shapes.sort(key=lambda u: (-u["count"], u["shape"]))
    hosts = sorted({str(e.host) for e in events})
    sources = [
        {"source": f"{h}/app.log", "host": h, "bytes": 0, "lines": 0, "offset": 0, "failed": None}
        for h in hosts
    ]
    sources += [
        {"source": s, "host": None, "bytes": 0, "lines": 0, "offset": 0, "failed": why}
        for s, why in (failed or {}).items()
    ]
    return {
        "schema": "errkb.scan/1",
        "lines": len(events),
        "bytes": sum(len(e.line) + 1 for e in events),
        "sources": sources,
        "failed": len(failed or {}),
        "groups": groups,
        "unknown": shapes,
        "running": None,
    }


def fleet_events() -> list[Event]:
    """A day and a half of a small fleet: three known errors over five hosts, one of them with
    a hostile name, a line with a hostile prefix, a line with no time, unknown shapes."""
    events = []
    for hour in range(36):
        day, hh = divmod(8 + hour, 24)
        stamp = f"2026-12-{1 + day:02d}T{hh:02d}:{(hour * 7) % 60:02d}:05Z"
        for node in range(4):
            # A trickle on every node, and a burst on node-2 from the evening's deploy.
            times = (hour + node) % 5 == 0
            times += 3 * (node == 2 and 10 <= hour <= 15) + (node == 0 and 11 <= hour <= 13)
            line = f"ERROR [core.py:41] ValueError: {SEED_MESSAGE}"
            events += [Event(f"node-{node}", stamp, line)] * times
        if hour % 6 == 0:
            events.append(Event("node-1", stamp, f"torch.OutOfMemoryError: {TORCH_OOM_OTHERS}"))
        if hour % 9 == 3:
            events.append(
                Event(HOSTILE_HOST, stamp, f"{HOSTILE_PREFIX} ValueError: {NO_BLOCKS_MESSAGE}")
            )
            events.append(
                Event("node-2", stamp, f"{HOSTILE_SHAPE} after {hour} steps on rank {hour % 8}")
            )
        if hour % 12 == 5:
            events.append(
                Event("node-3", stamp, f"RuntimeError: NCCL watchdog saw rank {hour} stop")
            )
    events.append(Event("node-0", None, f"ValueError: {NO_BLOCKS_MESSAGE}"))
    return events


def scanned_result() -> dict:
    """The fleet result the real map and merge steps (``errkb.scan.scan_part``, ``merge``) give
    for two vLLM logs: node-a's path names its host, node-b's does not (its lines have none).
    The same error at 01:15 on node-a and at 02:15 on both, far enough apart to count thrice.
    """
    from errkb.scan import merge, scan_part

    def log(hours: list[int]) -> bytes:
        lines = []
        for h in hours:
            lines += [NOISE.format(n=i) for i in range(3)]
            line = f"ERROR [core.py:41] ValueError: {NO_BLOCKS_MESSAGE}"
            lines.append(f"2026-12-01T{h:02d}:15:00Z {line}")
            lines += [NOISE.format(n=i) for i in range(300)]  # past the scan's repeat window
        return ("\n".join(lines) + "\n").encode()

    parts = [
        scan_part(log([1, 2]), source="logs/node-a/vllm.log", host="node-a"),
        scan_part(log([2]), source="logs/node-b/vllm.log"),
    ]
    return merge(parts).to_dict()


def one_of_everything(text: str) -> dict:
    """A result with ``text`` in every place a log or record puts text."""
    group = {
        "id": "some-record",
        "slug": "some-record",
        "title": text,
        "severity": "error",
        "count": 2,
        "first_lines": [1],
        "example": text,
        "fix": text,
        "first_seen": None,
        "last_seen": None,
        "hosts": {text: 2},
        "sources": [text],
        "timeline": [],
    }
    source = {"source": text, "host": text, "bytes": 1, "lines": 1, "offset": 0, "failed": text}
    shape = {"shape": text, "count": 1, "example": text, "hosts": {text: 1}}
    return {"schema": "errkb.scan/1", "lines": 1, "bytes": 1, "sources": [source], "failed": 1,
            "groups": [group], "unknown": [shape], "running": None}  # fmt: skip
