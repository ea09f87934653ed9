"""``errkb scan``: known errors in log files, with a progress bar on a terminal.

The scanning itself is :mod:`errkb.scan`; this module reads the files, shows the progress of
a large one, and prints the groups (or ``--json``).
"""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from errkb.cli._common import EXIT_NONE, EXIT_OK, EXIT_USAGE, registry

if TYPE_CHECKING:
    import argparse

    from errkb.registry import Registry
    from errkb.scan import ScanResult

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Scan every file; exit 0 when known errors were found, 1 when none, 2 when unreadable."""
    from errkb._sanitize import clean

    records = registry(args)
    results: list[tuple[str, ScanResult]] = []
    for path in args.paths:
        result = _scan_path(path, records, progress=args.progress)
        if result is None:
            return EXIT_USAGE
        results.append((path, result))
    if args.json:
        out = [dict(r.to_dict(), path=path) for path, r in results]
        print(
            json.dumps(
                out[0] if len(out) == 1 else {"schema": "errkb.scan/1", "files": out},
                indent=2,
                ensure_ascii=True,
            )
        )
    else:
        for path, result in results:
            print(
                f"{path}: {result.lines:,} lines, {sum(g.count for g in result.groups):,} known errors in {len(result.groups)} kinds"
            )
            for g in result.groups:
                first = ", ".join(map(str, g.first_lines))
                print(clean(f"  {g.count:>7,}  {g.record.id}  (first at line {first})"))
                print(clean(f"           {g.record.heading}"))
    return EXIT_OK if any(r.groups for _, r in results) else EXIT_NONE


def _scan_path(path: str, registry: Registry, *, progress: bool) -> ScanResult | None:
    """One file scanned, or None (said on stderr) when it cannot be read."""
    from errkb.scan import open_log

    try:
        with open_log(path) as stream:
            return _scan_with_progress(path, stream, registry, progress)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        print(f"errkb: cannot read {path}: {exc}", file=sys.stderr)
        return None


def _scan_with_progress(
    path: str, stream: BinaryIO, registry: Registry, progress: bool
) -> ScanResult:
    """The scan of ``stream``, under a progress bar when stderr is a terminal and size known."""
    from errkb.scan import scan_stream

    size = _file_size(path)
    if not progress or size is None or not sys.stderr.isatty():
        return scan_stream(stream, registry=registry)
    from rich.progress import BarColumn, DownloadColumn, Progress, TransferSpeedColumn

    with Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=None,
        transient=True,
    ) as bar:
        task = bar.add_task("scanning", total=size)
        raw = getattr(stream, "fileobj", None) or stream
        last = [0]

        def advance(_: int) -> None:
            # Compressed input: follow the position in the file on disk, not the bytes read.
            pos = raw.tell() if hasattr(raw, "tell") else last[0]
            bar.update(task, completed=pos)
            last[0] = pos

        return scan_stream(stream, registry=registry, progress=advance)


def _file_size(path: str) -> int | None:
    """The size on disk of ``path``, or None (stdin, a pipe)."""
    if path == "-":
        return None
    try:
        return Path(path).stat().st_size
    except OSError:
        return None
