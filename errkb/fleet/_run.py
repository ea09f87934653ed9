"""The fleet scan on Dask: list the sources, cut them into pieces, map, merge, report.

Each piece is scanned by :func:`errkb.scan.scan_part` (or :func:`errkb.scan.scan_range` for a
range of a large plain file) on a Dask worker, which sends back a small
:class:`errkb.scan.ScanPart`; the driver merges them. With no scheduler given, Dask's
single-machine scheduler runs the tasks on a pool of worker processes, one per core
(``--workers N``); ``--scheduler local-cluster`` starts a ``distributed.LocalCluster`` instead,
and an address uses a running Dask cluster; ``workers=0`` scans in this process, with no Dask
at all. A source that cannot be read (its
permissions, a truncated archive, an object deleted since it was listed) is reported in the
result and skipped; the rest of the run goes on.
"""

from __future__ import annotations

import functools
import importlib
import lzma
import os
import sys
import time
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb._attrs import attrs
from errkb._scanreport import fix_line, report
from errkb.fleet import _sources, _state
from errkb.scan import ScanPart, failed_part, merge, scan_part, scan_range

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from errkb.fleet._sources import Piece, Source
    from errkb.registry import Registry

__all__ = ["FleetOptions", "Plan", "plan", "report", "run", "scan_pieces"]

#: A task scans pieces of at most about this many bytes together (small files go in batches).
BATCH_BYTES = 32 << 20
#: ...and at most this many pieces.
BATCH_PIECES = 64
#: ``--scheduler`` for Dask's single-machine scheduler on a process pool (the default).
PROCESSES = "processes"
#: ``--scheduler`` for a ``distributed.LocalCluster`` started for the run.
LOCAL_CLUSTER = "local-cluster"
#: How many times the tasks left are run again after a local worker process died.
RETRIES = 3
#: What reading a source may raise; anything else is errkb's fault, and stops the run.
_READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error, lzma.LZMAError)


@attrs.frozen(kw_only=True)
class FleetOptions:
    """How to scan a fleet (``errkb scan``'s flags)."""

    #: Local worker processes; None: one per core; 0: in this process, without Dask.
    workers: int | None = None
    #: The address of a running Dask scheduler (``tcp://host:8786``); :data:`LOCAL_CLUSTER`
    #: for a ``distributed.LocalCluster`` of ``workers``; None or :data:`PROCESSES` for Dask's
    #: single-machine scheduler on ``workers`` processes.
    scheduler: str | None = None

    @property
    def remote(self) -> bool:
        """Whether the work goes to a running Dask cluster (its workers load their own records)."""
        return self.scheduler not in (None, PROCESSES, LOCAL_CLUSTER)

    #: Plain files larger than this are scanned in byte ranges of this size.
    split: int = _sources.SPLIT
    #: Options for fsspec's file system (``key``, ``endpoint_url``, ...).
    storage_options: Mapping[str, Any] = attrs.field(factory=dict)
    #: The state file (``--state``), or None.
    state: Path | None = None
    #: Record folders or files added to the built-in ones (``--records``).
    records: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class Plan:
    """What a run will read: the sources listed, the pieces, the state's new entries."""

    sources: tuple[Source, ...]
    pieces: tuple[Piece, ...]
    state: dict[str, Any] | None
    entries: dict[str, dict[str, Any]]


def plan(specs: Iterable[str], options: FleetOptions) -> Plan:
    """List the sources ``specs`` name and cut them into pieces (only what is new, with a state)."""
    cluster = options.scheduler == LOCAL_CLUSTER
    if options.workers and not options.remote and (cluster or not _forkable()):
        # It loads Dask and the records while we list.
        _start_forkserver(options.records, cluster=cluster)
    sources = _sources.list_sources(specs, options.storage_options)
    state = _state.load(options.state) if options.state is not None else None
    spans: dict[str, tuple[int, int | None]] | None = None
    entries: dict[str, dict[str, Any]] = {}
    todo = sources
    if state is not None:

        def tail(source: Source, n: int) -> bytes:
            try:
                with _sources.open_source(source, options.storage_options) as raw:
                    raw.seek(source.size - n)
                    return raw.read(n)
            except _READ_ERRORS:
                return b""  # it fails again, and is reported, when it is read

        todo, spans, entries = _state.changed(sources, state, tail)
    cut = _sources.pieces(todo, split=options.split, starts=spans)
    return Plan(sources=tuple(sources), pieces=tuple(cut), state=state, entries=entries)


@functools.cache
def _registry(records: tuple[str, ...]) -> Registry:
    """The built-in records, with ``records`` added: made once a process (a worker scans many)."""
    from errkb.registry import Registry, default_registry

    return Registry.from_paths(list(records)) if records else default_registry()


def _reason(exc: BaseException) -> str:
    said = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {said}"[:300]


def _scan_piece(piece: Piece, storage_options: Mapping[str, Any], registry: Registry) -> ScanPart:
    source = piece.source
    common: dict[str, Any] = {
        "source": source.url,
        "host": piece.host,
        "mtime": source.mtime,
        "registry": registry,
    }
    try:
        with _sources.open_source(source, storage_options) as raw:
            if piece.ranged or piece.start or piece.end is not None:
                end = source.size if piece.end is None else piece.end
                return scan_range(
                    raw,
                    piece.start,
                    end,
                    source.size,
                    cut=(piece.cut_start, piece.cut_end),
                    **common,
                )
            with _sources.decompressed(raw, source.compression) as stream:
                return scan_part(stream, **common)
    except _READ_ERRORS as exc:
        return failed_part(source.url, _reason(exc), start=piece.start, host=piece.host)
    except Exception as exc:
        if type(exc).__module__.split(".")[0] in ("zstandard", "botocore", "aiobotocore"):
            return failed_part(source.url, _reason(exc), start=piece.start, host=piece.host)
        raise


def scan_pieces(
    pieces: Sequence[Piece], storage_options: Mapping[str, Any], records: tuple[str, ...] = ()
) -> list[ScanPart]:
    """The task a worker runs: each piece scanned, a part each (a failed source's reason)."""
    registry = _registry(records)
    return [_scan_piece(p, storage_options, registry) for p in pieces]


def _batches(pieces: Sequence[Piece], workers: int) -> list[list[Piece]]:
    """Pieces in tasks of about equal size, several a worker, so that the work spreads."""
    total = sum(_size(p) for p in pieces)
    limit = max(1, min(BATCH_BYTES, total // max(1, 8 * workers)))
    out: list[list[Piece]] = []
    held = 0
    for piece in pieces:
        if not out or held + _size(piece) > limit or len(out[-1]) >= BATCH_PIECES:
            out.append([])
            held = 0
        out[-1].append(piece)
        held += _size(piece)
    return out


def _size(piece: Piece) -> int:
    end = piece.source.size if piece.end is None else piece.end
    return max(0, end - piece.start)


def _execute(
    batches: list[list[Piece]],
    options: FleetOptions,
    done: Callable[[list[Piece], list[ScanPart]], None],
    client: Any,
) -> None:
    """Run every batch: in this process, on ``client``, or on the workers the options name."""
    if client is None and not options.remote and options.workers == 0:
        for batch in batches:
            done(batch, scan_pieces(batch, options.storage_options, options.records))
        return
    if client is not None:
        _gather(client, batches, options, done)
        return
    if options.scheduler in (None, PROCESSES):
        _on_processes(batches, options, done)
        return
    forkserver = _start_forkserver(options.records, cluster=True) if not options.remote else False
    try:
        distributed = _distributed()
    except ImportError:
        raise _no_fleet_extra("on a Dask cluster") from None
    if options.remote:
        with distributed.Client(options.scheduler) as remote:
            _gather(remote, batches, options, done)
        return
    import logging

    import dask

    workers = options.workers or cores()
    method = {"distributed.worker.multiprocessing-method": "forkserver"} if forkserver else {}
    with (
        dask.config.set(method),
        distributed.LocalCluster(
            n_workers=workers,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.CRITICAL,  # shutdown races log errors that are not the scan's
        ) as cluster,
        distributed.Client(cluster) as local,
    ):
        _gather(local, batches, options, done)


def _on_processes(
    batches: list[list[Piece]],
    options: FleetOptions,
    done: Callable[[list[Piece], list[ScanPart]], None],
) -> None:
    """Run the batches on Dask's single-machine scheduler, a pool of worker processes.

    Its start-up is that of the pool: each worker is a fork of this process, which holds
    errkb, the records (the report needs them here too) and Dask's task code, ready at once;
    where this process runs other threads (forking it then is not safe) or cannot fork, a fork
    of a forkserver that loaded them. This process imports only Dask's core (``distributed``,
    its scheduler and its worker, cost a second of CPU in each of two processes: a third of a
    two-core run of 2 GB). A worker process that dies (killed, out of memory) breaks the pool:
    the batches not done yet run again on a new one, up to :data:`RETRIES` times.
    """
    from concurrent.futures.process import BrokenProcessPool

    try:
        import dask
        import dask.multiprocessing
    except ImportError:
        raise _no_fleet_extra("on several processes") from None
    if _forkable():
        _registry(options.records)  # loaded before the fork: each worker has it
        context = {"multiprocessing.context": "fork"}
    elif _start_forkserver(options.records, cluster=False):
        context = {"multiprocessing.context": "forkserver"}
    else:
        context = {}
    workers = options.workers or cores()
    todo = dict(enumerate(batches))
    storage = dict(options.storage_options)

    def posttask(key: Any, result: list[ScanPart], *_: Any) -> None:
        done(todo.pop(key[1]), result)

    for attempt in range(RETRIES + 1):
        graph = {
            ("errkb-scan", i): (scan_pieces, batch, storage, options.records)
            for i, batch in todo.items()
        }
        try:
            with dask.config.set(context):
                dask.multiprocessing.get(
                    graph,
                    list(graph),
                    num_workers=min(workers, len(graph)),
                    chunksize=1,  # one batch a worker at a time: the batches are sized to spread
                    optimize_graph=False,
                    callbacks=[(None, None, None, posttask, None)],
                )
        except BrokenProcessPool:
            if attempt == RETRIES or not todo:
                raise
        else:
            return


def cores() -> int:
    """The cores this process may run on: the default number of local workers.

    The CPU affinity where the platform has one (a container or ``taskset`` limits it), not
    the machine's count, which a 2-core job on a 64-core host would take for 64.
    """
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def _forkable() -> bool:
    """Whether worker processes may be forked from this process itself.

    On Linux, while this process runs no other thread: a fork copies only the thread that
    forks, and a lock another thread held (logging's, an import's) would stay held forever in
    the child. macOS's system libraries are not safe to fork without exec at all.
    """
    import multiprocessing
    import threading

    return (
        sys.platform == "linux"
        and "fork" in multiprocessing.get_all_start_methods()
        and threading.active_count() == 1
    )


def _start_forkserver(records: tuple[str, ...], *, cluster: bool) -> bool:
    """Start the process local workers are forked from, loading Dask and the records there.

    Started as a fresh interpreter (``spawn``, Dask's default), each worker would import Dask
    and errkb, and load the records, again: seconds of a short run. A ``forkserver`` does that
    once, while this process goes on listing the sources, and each worker is a fork of it,
    ready. ``cluster``: the workers are a ``distributed.LocalCluster``'s (the server loads
    ``distributed`` too), else the single-machine scheduler's (Dask's core only). False where
    the platform has no forkserver (Windows): Dask's default then.
    """
    import multiprocessing
    from multiprocessing import forkserver

    if "forkserver" not in multiprocessing.get_all_start_methods():
        return False
    # Set before the server starts (Dask's own list, set when it first asks, then comes too late);
    # a forkserver started before (an earlier run in this process) keeps its modules.
    dask = ["distributed"] if cluster else ["dask.multiprocessing"]
    warm = ["errkb.fleet._warm"] if not records else ["errkb.fleet._run"]
    multiprocessing.get_context("forkserver").set_forkserver_preload([*dask, *warm])
    forkserver.ensure_running()
    return True


def _gather(
    client: Any,
    batches: list[list[Piece]],
    options: FleetOptions,
    done: Callable[[list[Piece], list[ScanPart]], None],
) -> None:
    futures = {
        client.submit(
            scan_pieces, batch, dict(options.storage_options), options.records, pure=False
        ): batch
        for batch in batches
    }
    for future in _distributed().as_completed(futures):
        done(futures[future], future.result())


def _no_fleet_extra(where: str) -> Exception:
    """The error for a scan ``where`` Dask is needed and not installed."""
    from errkb.exceptions import UsageError

    return UsageError(
        f"scanning {where} needs the fleet extra: pip install 'errkb[fleet]' "
        "(or --workers 0 to scan in this process)"
    )


def _distributed() -> Any:
    """Dask's ``distributed`` (the fleet extra), typed loosely: it ships no type hints."""
    return importlib.import_module("distributed")


@attrs.define
class _Done:
    """What the progress line and the result know so far."""

    parts: list[ScanPart] = attrs.field(factory=list)
    pieces: int = 0
    bytes: int = 0
    errors: int = 0


def run(
    specs: Iterable[str],
    options: FleetOptions,
    *,
    progress: Callable[[int, int, int, int, int], None] | None = None,
    client: Any = None,
    planned: Plan | None = None,
) -> dict[str, Any]:
    """Scan the fleet ``specs`` name; the result (with the running totals, with a state).

    ``progress(pieces done, pieces, bytes done, bytes, known errors so far)`` is called as
    each task ends; ``client`` is a ``distributed.Client`` to run on (else see
    :class:`FleetOptions`); ``planned`` a :func:`plan` made before (the sources as they were
    listed then).
    """
    the_plan = planned or plan(specs, options)
    workers = options.workers or cores()
    batches = _batches(the_plan.pieces, workers)
    total_bytes = sum(_size(p) for p in the_plan.pieces)
    so_far = _Done()

    def done(batch: list[Piece], parts: list[ScanPart]) -> None:
        if not so_far.errors:
            # The report's records and diagnosis, made ready here while the workers go on
            # scanning: the registry (once a process), and the diagnosis' modules and patterns
            # by one explanation, not kept (the report explains each group's example again).
            registry = _registry(options.records)
            found = next((g for p in parts for g in p.groups), None)
            if found is not None and found.record_id in registry:
                fix_line()(registry.get(found.record_id), found.example[3])
        so_far.parts.extend(parts)
        so_far.pieces += len(batch)
        so_far.bytes += sum(_size(p) for p in batch)
        so_far.errors += sum(g.count for p in parts for g in p.groups)
        if progress is not None:
            progress(so_far.pieces, len(the_plan.pieces), so_far.bytes, total_bytes, so_far.errors)

    _execute(batches, options, done, client)
    failed = {piece.source for p in so_far.parts for piece in p.pieces if piece.failed}
    # A source that failed counts nothing, not even its pieces that were read.
    kept = [
        p if not any(piece.source in failed for piece in p.pieces) else _failure_only(p)
        for p in so_far.parts
    ]
    result = report(merge(kept), _registry(options.records))
    if options.state is not None and the_plan.state is not None:
        entries = {k: v for k, v in the_plan.entries.items() if k not in failed}
        result["running"] = _state.running(the_plan.state.get("running"), result)
        _state.save(options.state, entries, the_plan.state, result["running"])
    return result


def _failure_only(part: ScanPart) -> ScanPart:
    """The pieces of ``part`` with nothing counted: its failure, or what was read of it."""
    pieces = tuple(attrs.evolve(p, bytes=0, lines=0) for p in part.pieces)
    return ScanPart(pieces=pieces)


class Progress:
    """A line on a terminal: files and bytes done, the rate, the time left, errors so far."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self.shown = False

    def __call__(self, done: int, pieces: int, read: int, total: int, errors: int) -> None:
        """Show the line again, in place (after a carriage return)."""
        from errkb.units import format_bytes

        spent = max(time.monotonic() - self.started, 1e-6)
        rate = read / spent
        left = (total - read) / rate if rate > 0 else 0.0
        line = (
            f"scanning: {done:,}/{pieces:,} pieces, {format_bytes(read)} of "
            f"{format_bytes(total)}, {format_bytes(int(rate))}/s, {left:,.0f} s left, "
            f"{errors:,} known errors"
        )
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()
        self.shown = True

    def close(self) -> None:
        """End the line, when one was shown."""
        if self.shown:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
