"""``errkb scan``: known errors in logs, from one file to a fleet's thousands.

One file (or ``-``) is scanned in this process, with a progress bar on a terminal when it is
large. Several sources (paths, globs, folders, fsspec URLs) go to the fleet scan
(:mod:`errkb.fleet`): on local worker processes (Dask's single-machine scheduler, or a
``distributed.LocalCluster``), a running Dask scheduler, or in this process, and merged into one
result. The scanning itself is :mod:`errkb.scan`.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from errkb.cli._common import EXIT_NONE, EXIT_OK, EXIT_USAGE, registry

if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable

    from errkb.fleet._run import FleetOptions
    from errkb.registry import Registry
    from errkb.scan import ScanPart

__all__ = ["run"]

#: Below this many bytes in all, several sources are scanned in this process by default: the
#: worker pool's start-up (importing Dask, a forkserver loading the records) costs more than it
#: saves.
CLUSTER_MIN = 64 << 20


def run(args: argparse.Namespace) -> int:
    """Scan; exit 0 when known errors were found, 1 when none, 2 when a source failed."""
    from errkb._sanitize import clean
    from errkb.exceptions import UsageError

    fmt = "json" if args.json else (args.format or "text")
    try:
        result = _scan(args)
    except UsageError as exc:
        print(f"errkb: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if result is None:
        return EXIT_USAGE
    for source in result["sources"]:
        if source["failed"]:
            print(
                clean(f"errkb: cannot read {source['source']}: {source['failed']}"), file=sys.stderr
            )
    if args.html:
        from errkb.fleet._html import write_html

        write_html(result, Path(args.html))
    if fmt == "json":
        print(json.dumps(result, indent=2, ensure_ascii=True))
    elif fmt == "markdown":
        from errkb.fleet._markdown import markdown

        print(markdown(result))
    else:
        _print_text(result)
    if result["failed"]:
        return EXIT_USAGE
    return EXIT_OK if result["groups"] else EXIT_NONE


def _single(args: argparse.Namespace) -> bool:
    """Whether one local file (or stdin) is asked for, with nothing that needs the fleet."""
    if len(args.paths) != 1 or args.scheduler or args.state or args.workers:
        return False
    path = args.paths[0]
    return path == "-" or ("://" not in path and Path(path).is_file())


def _scan(args: argparse.Namespace) -> dict[str, Any] | None:
    """The result of the scan the arguments ask for, or None (said on stderr)."""
    from errkb._scanreport import fixes_ahead, report

    if _single(args):  # one file: none of the fleet's machinery is imported
        # The groups' Fix lines are made in a child process while this one reads the log.
        ahead = fixes_ahead(lambda: registry(args))
        records = registry(args)
        opened = ahead.want if ahead is not None else None
        part = _scan_file(args.paths[0], records, progress=args.progress, opened=opened)
        if part is None:
            if ahead is not None:
                ahead.fixes()  # the child is told the scan ended, and waited for
            return None
        result = report(part, records, ahead)
        result["path"] = args.paths[0]
        return result
    records = registry(args)
    from errkb.fleet._run import FleetOptions
    from errkb.fleet._run import run as run_fleet

    options = FleetOptions(
        workers=args.workers,
        scheduler=args.scheduler,
        state=Path(args.state) if args.state else None,
        records=tuple(args.records or ()),
        **({"split": args.split} if args.split else {}),
    )
    return _run_fleet(args, options, run_fleet)


def _run_fleet(args: argparse.Namespace, options: FleetOptions, run_fleet: Any) -> dict[str, Any]:
    from errkb._attrs import attrs
    from errkb.fleet._run import Progress, plan

    planned = plan(args.paths, options)
    if not planned.sources:
        from errkb.exceptions import UsageError

        raise UsageError(f"no file found for {' '.join(args.paths)}")
    if options.workers is None and options.scheduler is None:
        size = sum(s.size for s in planned.sources)
        if size < CLUSTER_MIN or not _has_dask():
            options = attrs.evolve(options, workers=0)
    progress = Progress() if args.progress and sys.stderr.isatty() else None
    try:
        return run_fleet(args.paths, options, progress=progress, planned=planned)  # type: ignore[no-any-return]
    finally:
        if progress is not None:
            progress.close()


def _has_dask() -> bool:
    """Whether Dask's core (its single-machine scheduler, the default for several sources) is here."""
    import importlib.util

    return importlib.util.find_spec("dask") is not None


def _scan_file(
    path: str,
    registry: Registry,
    *,
    progress: bool,
    opened: Callable[[str, str], None] | None = None,
) -> ScanPart | None:
    """One file (or stdin) scanned, or None (said on stderr) when it cannot be read.

    A file is read through the codec its extension names (gzip also by its magic bytes, as
    :func:`errkb.fleet._sources.decompressed` reads a fleet's); stdin is plain or gzip.
    """
    import lzma
    import zlib

    from errkb.fleet._sources import compression_of, decompressed
    from errkb.scan import open_log

    try:
        if path == "-":
            with open_log(path) as stream:
                return _scan_with_progress(path, stream, registry, progress, opened)
        with Path(path).open("rb") as raw, decompressed(raw, compression_of(path)) as stream:
            return _scan_with_progress(path, stream, registry, progress, opened)
    except (OSError, EOFError, zlib.error, lzma.LZMAError) as exc:
        print(f"errkb: cannot read {path}: {exc}", file=sys.stderr)
        return None


def _scan_with_progress(
    path: str,
    stream: BinaryIO,
    registry: Registry,
    progress: bool,
    opened: Callable[[str, str], None] | None,
) -> ScanPart:
    """The scan of ``stream``, under a progress bar when stderr is a terminal and size known."""
    from errkb.scan import scan_part, source_host

    mtime, size = _stat(path)
    common: dict[str, Any] = {
        "source": path,
        "host": source_host(path) if path != "-" else None,
        "mtime": mtime,
        "registry": registry,
        "opened": opened,
    }
    if not progress or size is None or not sys.stderr.isatty():
        return scan_part(stream, **common)
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

        return scan_part(stream, progress=advance, **common)


def _stat(path: str) -> tuple[float | None, int | None]:
    """The modification time and size on disk of ``path``, or None (stdin, a pipe)."""
    if path == "-":
        return None, None
    try:
        stat = Path(path).stat()
    except OSError:
        return None, None
    return stat.st_mtime, stat.st_size


def _print_text(result: dict[str, Any]) -> None:
    """The groups as lines: count, record, where and when; then unknown shapes and failures."""
    from errkb._sanitize import clean

    known = sum(g["count"] for g in result["groups"])
    name = result.get("path") or f"{len(result['sources']):,} sources"
    print(
        clean(
            f"{name}: {result['lines']:,} lines, {known:,} known errors in "
            f"{len(result['groups'])} kinds"
        )
    )
    fleet = "path" not in result
    for g in result["groups"]:
        first = ", ".join(map(str, g["first_lines"]))
        where = f"(first at line {first})" if not fleet else _where(g)
        print(clean(f"  {g['count']:>7,}  {g['id']}  {where}"))
        print(clean(f"           {g['title'] or g['slug']}"))
    if fleet and result["unknown"]:
        lines = sum(u["count"] for u in result["unknown"])
        print(f"unknown errors: {lines:,} lines in {len(result['unknown']):,} shapes")
        for u in result["unknown"][:10]:
            print(clean(f"  {u['count']:>7,}  {u['shape']}"))
    if result.get("running"):
        running = result["running"]
        total = sum(g["count"] for g in running["groups"])
        print(f"all runs: {running['lines']:,} lines, {total:,} known errors")


def _where(group: dict[str, Any]) -> str:
    hosts = len(group["hosts"])
    seen = (
        f", {group['first_seen']} to {group['last_seen']}"
        if group["first_seen"] is not None
        else ""
    )
    return f"({len(group['sources']):,} sources, {hosts:,} hosts{seen})"
