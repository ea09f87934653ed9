"""``--state FILE``: what each source was when it was last scanned, and the totals so far.

A nightly run reads only what is new: a source whose size and ETag (or, without one, its
modification time) are unchanged and that was read to its end is skipped; a plain file that
grew is read from the byte offset the last run stopped at; anything else (a rotated or
rewritten file, a compressed one that changed) is read again from its start. A plain file is
read up to the end of its last whole line, so that a line still being written is read whole
by the next run. The file is JSON (``"schema": "errkb.scan-state/1"``), written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb.exceptions import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from errkb.fleet._sources import Source

__all__ = ["SCHEMA", "changed", "load", "running", "save"]

SCHEMA = "errkb.scan-state/1"
#: How much of a plain file's end is read to find its last whole line.
TAIL = 64 << 10


def load(path: Path) -> dict[str, Any]:
    """The state in ``path``; an empty one when the file does not exist yet."""
    if not path.exists():
        return {"schema": SCHEMA, "sources": {}, "running": None}
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: --state: cannot read the state file ({exc})") from None
    if not isinstance(state, dict) or state.get("schema") != SCHEMA:
        raise UsageError(f"{path}: --state: expected a {SCHEMA} file, found something else")
    return state


def _same(source: Source, was: dict[str, Any]) -> bool:
    if was.get("size") != source.size:
        return False
    if source.etag is not None or was.get("etag") is not None:
        return bool(was.get("etag") == source.etag)
    return bool(was.get("mtime") == source.mtime)


def changed(
    sources: Iterable[Source],
    state: dict[str, Any],
    tail: Callable[[Source, int], bytes],
) -> tuple[list[Source], dict[str, tuple[int, int | None]], dict[str, dict[str, Any]]]:
    """The sources to read, the bytes of each to read, and the state's new entries.

    ``tail(source, n)`` reads the last ``n`` bytes of a plain source.
    """
    todo: list[Source] = []
    spans: dict[str, tuple[int, int | None]] = {}
    entries: dict[str, dict[str, Any]] = {}
    for source in sources:
        was = state["sources"].get(source.url) or {}
        offset = int(was.get("offset", 0))
        start = 0
        if source.compression is None and was and source.size >= offset:
            grew = source.size > int(was.get("size", 0)) and int(was.get("size", 0)) >= offset
            start = offset if grew or _same(source, was) else 0
        elif was and _same(source, was) and offset >= source.size:
            start = source.size
        end: int | None = None
        if source.compression is None and source.size > start:
            data = tail(source, min(TAIL, source.size - start))
            newline = data.rfind(b"\n")
            end = source.size - len(data) + newline + 1 if newline >= 0 else source.size
        stop = source.size if end is None else end
        entries[source.url] = {
            "size": source.size,
            "mtime": source.mtime,
            "etag": source.etag,
            "offset": stop,
        }
        if stop > start:
            todo.append(source)
            spans[source.url] = (start, end)
    return todo, spans, entries


def running(previous: dict[str, Any] | None, result: dict[str, Any]) -> dict[str, Any]:
    """The totals across runs: the previous ones plus this run's ``result``."""
    previous = previous or {"lines": 0, "bytes": 0, "groups": [], "unknown": []}
    groups = {g["id"]: dict(g) for g in previous["groups"]}
    for g in result["groups"]:
        had = groups.get(g["id"])
        if had is None:
            groups[g["id"]] = {k: g[k] for k in ("id", "count", "first_seen", "last_seen")}
            continue
        had["count"] += g["count"]
        seen = [x for x in (had["first_seen"], g["first_seen"]) if x]
        last = [x for x in (had["last_seen"], g["last_seen"]) if x]
        had["first_seen"], had["last_seen"] = min(seen, default=None), max(last, default=None)
    shapes = {u["shape"]: u["count"] for u in previous["unknown"]}
    for u in result["unknown"]:
        shapes[u["shape"]] = shapes.get(u["shape"], 0) + u["count"]
    return {
        "lines": previous["lines"] + result["lines"],
        "bytes": previous["bytes"] + result["bytes"],
        "groups": sorted(groups.values(), key=lambda g: (-g["count"], g["id"])),
        "unknown": [
            {"shape": s, "count": n}
            for s, n in sorted(shapes.items(), key=lambda kv: (-kv[1], kv[0]))
        ],
    }


def save(
    path: Path, entries: dict[str, dict[str, Any]], state: dict[str, Any], total: dict[str, Any]
) -> None:
    """Write the state: every source's new entry, and the running totals."""
    sources = dict(state["sources"])
    sources.update(entries)
    data = {"schema": SCHEMA, "sources": dict(sorted(sources.items())), "running": total}
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    temporary.replace(path)
