"""``errkb list``: the hand-written records (``--all``: the mined too), one a line or as JSON.

``--tag`` lists the records with a tag, mined ones included. Nothing is read but what a
listing shows (:meth:`errkb.registry.Registry.listed`): the mined packs list from their index.
On a terminal each line fits its width (long ids and titles are cut with an ellipsis, the
severity column aligned); piped, lines are whole, and written as they come.

(Named ``list_`` so that importing it does not bind ``list`` in the package's namespace.)
"""

from __future__ import annotations

import json
import shutil
import sys
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_NONE, EXIT_OK, registry

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterator

    from errkb.records import Listed

__all__ = ["run"]

# The id column is as wide as the longest id; on a terminal up to this, a longer id is cut.
_ID_WIDTH = 48
_SEVERITY_WIDTH = 9


def run(args: argparse.Namespace) -> int:
    """Print the records sorted by library and id; exit 1 when there are none."""
    from errkb._sanitize import escaped

    found = registry(args).listed(tag=args.tag, mined=bool(args.all or args.tag))
    listed = sorted(found, key=lambda r: (r.library, r.id))
    out = sys.stdout
    width = shutil.get_terminal_size().columns if out.isatty() else None
    id_width = max((len(r.id) for r in listed), default=0)
    if width is not None:
        id_width = min(id_width, _ID_WIDTH)
    lines = (
        json.dumps(_fields(r), ensure_ascii=False) if args.json else _line(r, id_width, width)
        for r in listed
    )
    try:
        for chunk in _chunks(lines):
            out.write(escaped(chunk))  # record text: its control characters shown escaped
        out.flush()
    except BrokenPipeError:  # `errkb list --all | head`: the reader has what it wanted
        sys.stdout = None  # nothing more to flush at exit
    return EXIT_OK if listed else EXIT_NONE


def _chunks(lines: Iterator[str], size: int = 1000) -> Iterator[str]:
    """The lines joined a thousand at a time: written as they come, escaped in bulk."""
    batch: list[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield "\n".join(batch) + "\n"
            batch.clear()
    if batch:
        yield "\n".join(batch) + "\n"


def _fields(r: Listed) -> dict[str, object]:
    return {
        "id": r.id,
        "slug": r.slug,
        "library": r.library,
        "severity": r.severity,
        "title": r.heading,
        "tags": list(r.tags),
    }


def _line(r: Listed, id_width: int, width: int | None) -> str:
    """One record: id, severity and title in columns, cut to ``width`` when one is given."""
    if width is None:  # piped: whole lines, columns as wide as they need
        return f"{r.id:<{id_width}} {r.severity or '':<{_SEVERITY_WIDTH}} {r.heading}"
    line = f"{_cut(r.id, id_width):<{id_width}} {r.severity or '':<{_SEVERITY_WIDTH}} {r.heading}"
    return _cut(line, width)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(width - 1, 0)] + "\u2026"
