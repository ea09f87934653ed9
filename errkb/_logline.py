"""What a log line says besides its message: when it was written, on which host, its shape.

The fleet scan (:func:`errkb.scan.scan_part`) reads these from the first line of each failure
it counts, and from the lines that look like errors no record knows.

**Times** (:func:`line_time`), the first of these forms the line holds:

* a syslog prefix (RFC 3164): ``Dec  1 14:03:07 node-7 vllm[122]: ...``;
* ISO 8601 / RFC 3339 near the line's start: ``2026-12-01T14:03:07.123456789Z`` (Kubernetes'
  container log prefix), ``2026-12-01 14:03:07,123`` (Python logging's ``asctime``), with or
  without a zone;
* vLLM's logger: ``INFO 12-01 14:03:07 [core.py:41] ...`` (level, then ``%m-%d %H:%M:%S``).

A time with no zone is read as UTC (a log does not say its host's zone). Where the year is
missing (syslog, vLLM) it is the year of the file's modification time, or the year before when
the date would fall more than a day after that time (a December line in a file last written in
January). Without a modification time such a line has no time.

**Hosts** (:func:`line_host`, :func:`path_host`): a syslog line names its host; otherwise the
path does, by the rules in :func:`path_host`.

**Shapes** (:func:`shape`): a message with its variable parts masked, so that lines that differ
only in numbers, ids, paths or addresses fall together.
"""

from __future__ import annotations

import calendar
import functools
import re
from datetime import datetime, timezone
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["SHAPE_MAX", "error_text", "hour", "iso", "line_host", "line_time", "path_host", "shape"]

#: How long a shape may be; the rest is cut.
SHAPE_MAX = 200
#: How far into a line (after a syslog prefix) an ISO 8601 time is looked for.
_ISO_WITHIN = 48

_MONTHS = {name: number for number, name in enumerate(calendar.month_abbr) if name}


@functools.cache
def _patterns() -> dict[str, re.Pattern[str]]:
    """The line forms, compiled on first use (nothing is compiled at import)."""
    months = "|".join(_MONTHS)
    return {
        "ansi": re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"),
        "syslog": re.compile(
            rf"(?P<mon>{months}) (?P<d>[ \d]\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d) "
            r"(?P<host>[^\s:\[]+) "
        ),
        "iso": re.compile(
            r"(?P<y>\d{4})-(?P<mo>\d\d)-(?P<d>\d\d)[T ](?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)"
            r"(?:[.,]\d+)?(?P<tz>Z|[+-]\d\d:?\d\d)?"
        ),
        "vllm": re.compile(
            r"\b(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<mo>\d\d)-(?P<d>\d\d) "
            r"(?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d) "
        ),
        "level": re.compile(
            r"\b(?P<level>ERROR|CRITICAL|FATAL)\b(?: \d\d-\d\d \d\d:\d\d:\d\d)?"
            r"(?: \[[^\]]*\]| [\w.\-]+:\d+\])?(?: [\w.\-]+:)? (?P<msg>[^\s\[\d].*)"
        ),
        "url": re.compile(r"\b[a-z][a-z0-9+.-]*://\S+"),
        "path": re.compile(r"(?:\b[A-Za-z]:)?(?:[\\/][\w.@+~-]+){2,}[\\/]?|\b[\w.-]+\.py\b"),
        "uuid": re.compile(r"\b[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\b"),
        "hex": re.compile(r"\b0x[0-9a-fA-F]+\b|\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{8,}\b"),
        "id": re.compile(r"\b(?=[\w-]*\d[\w-]*\d)(?=[\w-]*[A-Za-z])[\w-]{12,}\b"),
        "number": re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"),
        "space": re.compile(r"\s+"),
    }


def _plain(line: str) -> str:
    """``line`` without terminal colour codes (vLLM colours its level and date on a terminal)."""
    return _patterns()["ansi"].sub("", line) if "\x1b" in line else line


def _epoch(year: int, month: int, day: int, h: int, mi: int, s: int) -> int | None:
    try:
        return calendar.timegm((year, month, day, h, mi, s, 0, 0, 0)) if 0 < day <= 31 else None
    except (ValueError, OverflowError):
        return None


def _valid(month: int, day: int, h: int, mi: int, s: int) -> bool:
    return 1 <= month <= 12 and 1 <= day <= 31 and h < 24 and mi < 60 and s <= 60


def _yearless(month: int, day: int, h: int, mi: int, s: int, mtime: float | None) -> int | None:
    """Seconds since the epoch of a date with no year, the year read from ``mtime``."""
    if mtime is None or not _valid(month, day, h, mi, s):
        return None
    year = datetime.fromtimestamp(mtime, tz=timezone.utc).year
    at = _epoch(year, month, day, h, mi, s)
    if at is not None and at > mtime + 86400:
        at = _epoch(year - 1, month, day, h, mi, s)
    return at


def line_time(line: str, mtime: float | None = None) -> int | None:
    """When ``line`` was written, in seconds since the epoch (UTC), or None when it does not say.

    ``mtime`` (the file's modification time) gives the year to forms that lack one.

    >>> iso(line_time("2026-12-01T14:03:07.123456789Z stdout F INFO starting"))
    '2026-12-01T14:03:07Z'
    >>> iso(line_time("INFO 12-01 14:03:07 [core.py:41] ready", mtime=1796140800.0))
    '2026-12-01T14:03:07Z'
    """
    line = _plain(line)
    p = _patterns()
    m = p["syslog"].match(line)
    if m is not None:
        return _yearless(
            _MONTHS[m["mon"]], int(m["d"]), int(m["h"]), int(m["mi"]), int(m["s"]), mtime
        )
    m = p["iso"].search(line, 0, _ISO_WITHIN + 32)
    if m is not None and m.start() <= _ISO_WITHIN:
        values = [int(m[k]) for k in ("mo", "d", "h", "mi", "s")]
        if not _valid(*values):
            return None
        at = _epoch(int(m["y"]), *values)
        if at is not None and m["tz"] not in (None, "Z"):
            sign = 1 if m["tz"][0] == "+" else -1
            digits = m["tz"][1:].replace(":", "")
            at -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
        return at
    m = p["vllm"].search(line)
    if m is not None:
        month, day, h, mi, s = (int(m[k]) for k in ("mo", "d", "h", "mi", "s"))
        return _yearless(month, day, h, mi, s, mtime)
    return None


def iso(at: int | None) -> str | None:
    """Seconds since the epoch as ISO 8601 in UTC with ``Z``; None stays None."""
    if at is None:
        return None
    return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def hour(at: int) -> str:
    """The hour ``at`` falls in, as ``YYYY-MM-DDTHH:00Z`` (the timeline's bucket)."""
    return datetime.fromtimestamp(at - at % 3600, tz=timezone.utc).strftime("%Y-%m-%dT%H:00Z")


def line_host(line: str) -> str | None:
    """The host a syslog line names (``Dec  1 14:03:07 node-7 vllm[122]: ...``), or None."""
    m = _patterns()["syslog"].match(_plain(line))
    return m["host"] if m is not None else None


#: Kubernetes' node log folders: ``/var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log``
#: and ``/var/log/containers/<pod>_<namespace>_<container>-<id>.log``.
_PODS, _CONTAINERS = "pods", "containers"


def path_host(path: str, root: str = "") -> str | None:
    """The host a log's path names, by these rules, the first that applies.

    1. A part ``host=NAME`` or ``hostname=NAME`` (the partition style of object stores).
    2. A Kubernetes node's pod log (``.../pods/<namespace>_<pod>_<uid>/...`` or
       ``.../containers/<pod>_<namespace>_<container>-<id>.log``): the pod.
    3. Below ``root`` (the folder, or the part of a glob or URL before its first wildcard,
       that the source was given as): the first folder, when the file is in one.

    Otherwise None.

    >>> path_host("s3://logs/date=2026-12-01/host=node-7/vllm.log.gz", "s3://logs")
    'node-7'
    >>> path_host("/var/log/pods/serving_vllm-0_1f2e/vllm/0.log", "/var/log/pods")
    'vllm-0'
    >>> path_host("fleet/node-3/2026-12-01/vllm.log", "fleet")
    'node-3'
    """
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    for part in parts:
        key, _, value = part.partition("=")
        if key in ("host", "hostname") and value:
            return value
    for at, part in enumerate(parts[:-1]):
        following = parts[at + 1]
        if part == _PODS and following.count("_") >= 2:
            return following.split("_")[1] or None
        if part == _CONTAINERS and at + 1 == len(parts) - 1 and following.count("_") >= 2:
            return following.split("_")[0] or None
    base = [p for p in root.replace("\\", "/").split("/") if p]
    if parts[: len(base)] == base and len(parts) - len(base) >= 2:
        return parts[len(base)]
    return None


def error_text(line: str, class_at: Callable[[str], tuple[str | None, str]]) -> str | None:
    """The part of ``line`` that says an error, when it looks like one no record knows.

    A line looks like an error when it names an exception class followed by ``": "`` (read by
    ``class_at``, :func:`errkb.parse.class_at`) whose name ends in ``Error`` or ``Exception``,
    or when a log level ``ERROR``, ``CRITICAL`` or ``FATAL`` is followed by a message that
    starts with a word (not a traceback's indented lines, nor its ``Traceback`` header).
    """
    line = _plain(line)
    cls, message = class_at(line)
    if cls is not None and cls.endswith(("Error", "Exception")):
        return f"{cls}: {message}"
    m = _patterns()["level"].search(line)
    if m is None or m["msg"].startswith("Traceback (most recent call last)"):
        return None
    return f"{m['level']} {m['msg']}"


def shape(text: str) -> str:
    """``text`` with its variable parts masked: URLs, paths, UUIDs, hex, ids and numbers.

    >>> shape("RuntimeError: CUDA error at /opt/x/y.cu:88 on device 3 (0x7f3a)")
    'RuntimeError: CUDA error at <path>:<n> on device <n> (<hex>)'
    """
    p = _patterns()
    out = p["url"].sub("<url>", text)
    out = p["path"].sub("<path>", out)
    out = p["uuid"].sub("<id>", out)
    out = p["hex"].sub("<hex>", out)
    out = p["id"].sub("<id>", out)
    out = p["number"].sub("<n>", out)
    out = p["space"].sub(" ", out).strip()
    return out if len(out) <= SHAPE_MAX else out[: SHAPE_MAX - 1] + "…"
