"""Scanning logs for known errors: streaming, constant memory, grouped by record.

The text is read in large blocks of bytes. Every record contributes needles: for each record,
one any-of set of the literals its pattern requires (see :func:`errkb._patterns.literal_sets`),
the set whose shortest literal is longest. An Aho-Corasick automaton (the ``fast`` extra,
ahocorasick-rs) finds them all in one pass over a block; without it ``bytes.find`` looks for
each needle in turn. Only the lines that hold a needle are decoded and matched with the full
matcher: with the exception class read from the line (``ValueError: ...``, whatever comes
before it), or, on a line that names no class, the text after its log prefix
(:func:`errkb.parse.log_prefix`: vLLM's ``ERROR 11-30 06:00:01 [core.py:41] ``, a process tag,
a time stamp), as a pasted line is read; the whole line is read after when that finds nothing.
A record
with no literal at all is searched with its regex over the block. A line counts for the record
that ranks first on it (as ``errkb explain`` would rank it). The records looked for are the
hand-written ones (:meth:`errkb.registry.Registry.hand_written`): the mined packs' messages,
warnings and log lines among them, explain a failure, not a log.

**Messages over several lines.** A record whose pattern can match a newline
(:func:`errkb._scanplan.spans_lines`: a gated repo's ``403 Client Error.`` and, two lines on,
``Cannot access gated repo``; ``load_state_dict``'s list of keys) contributes as its needle a
literal of the line its message starts on, so that line is found. That line is then also
matched on a *window*: itself and the lines after it, at most :data:`WINDOW_LINES` lines and
:data:`WINDOW_BYTES` bytes, each with the log prefix of the first line (what comes before the
exception class, or the log prefix of a line without one, such as vLLM's ``(EngineCore_0
pid=1) ERROR ... [core.py:41]``) taken off. A
match on the window counts when it starts on that line, and the lines it runs over are part
of it: they are not matched again. A block's last lines are carried over to the next block,
so a window never stops at a block's end; the carried part is bounded by the window. A
message that a line seems to cut short (``Error(s) in loading state_dict for Net:`` and no
more) is taken as cut only when the next line does not go on with it: a next line that is
blank or indented, where the pattern would take a newline, says the message went on, with
something the pattern does not know.

**Counting: one failure counts once.** Programs print one failure several times: vLLM logs
an error in the engine core and prints the same traceback again when the process dies, then
raises a wrapper (``Engine core initialization failed. See root cause above.``) in the front
end; pytest repeats the error in its short summary; torch lists one size mismatch a line. A
group's ``count`` is the number of failures, and ``first_lines`` holds the first line of each
(up to :data:`FIRST_LINES`). A record's match is the same failure again, and not counted,
when

* it is on the line right after the record's previous match (one message, an item a line), or
* its matched text is the same as that of the failure it last counted, at most
  :data:`REPEAT_LINES` lines before (the same message printed again).

A record tagged ``wrapper-error`` (:data:`WRAPPER_TAG`: an error that only reports that
another one happened, whose cause was printed above it) is not counted when another record
matched at most :data:`REPEAT_LINES` lines before it: its root cause is that failure. With no
cause in sight, it counts, and says where to look.
"""

from __future__ import annotations

import functools
import gzip
import io
import os
import stat
import threading
from collections import deque
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, cast

from errkb._attrs import attrs
from errkb._env import text as env_text
from errkb._lazy_regex import regex_errors
from errkb._patterns import (
    PatternTimeoutError,
    compile_pattern,
    cut_chain,
    cut_pattern,
    head_regex,
    may_end_inside,
    search,
    search_prefix,
)
from errkb._scanplan import FindPlan, NeedlePlan, line_around, plan_needles
from errkb.exceptions import UsageError
from errkb.parse import class_at, log_prefix

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    import regex

    #: Needles found in a block: (needle, start, end) of each.
    Hits = list[tuple[int, int, int]]
    #: What was found in a block: its needles, and the words of lines that look like errors
    #: (:func:`_error_lines`); None where not searched for.
    Found = tuple[Hits | None, Hits | None]
    Finder = Callable[[bytes], Hits]

    from errkb.match import Match, Matcher
    from errkb.records import Record, RecordRef
    from errkb.registry import Registry

    #: A line read alone: its matches, best first, each with the text it matched; whether any
    #: record matched before the window judged it; where the best one matched.
    _Alone = tuple[list[tuple[Match, str]], bool, tuple[int, int] | None]

__all__ = [
    "ENGINES",
    "PartGroup",
    "PartShape",
    "PartSource",
    "ScanGroup",
    "ScanPart",
    "ScanResult",
    "failed_part",
    "merge",
    "open_log",
    "range_cut",
    "scan",
    "scan_part",
    "scan_range",
    "scan_stream",
    "source_host",
]

BLOCK = 4 << 20
#: A first block at least this long is worth a search plan (see :mod:`errkb._scanplan`).
PLAN_MIN = 1 << 20
#: How many first line numbers each group keeps.
FIRST_LINES = 5
#: Lines longer than this are cut before matching (a runaway line must not stall the scan).
MAX_LINE = 64 * 1024
#: A message over several lines is matched on at most this many lines after its first...
WINDOW_LINES = 64
#: ...and at most this many bytes after its first line.
WINDOW_BYTES = 64 * 1024
#: A match this many lines or fewer after a failure can be that failure printed again.
REPEAT_LINES = 200
#: The tag of records that only report another error, whose cause is printed above them.
WRAPPER_TAG = "wrapper-error"


@attrs.frozen(kw_only=True)
class ScanGroup:
    """The failures of one record: how many, the first line of each, the first one's text."""

    record: Record
    count: int
    first_lines: tuple[int, ...]
    example: str

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            **self.record.brief(),
            "count": self.count,
            "first_lines": list(self.first_lines),
            "example": self.example,
        }


@attrs.frozen(kw_only=True)
class ScanResult:
    """What a scan found: groups, most frequent first, and how much was read."""

    groups: tuple[ScanGroup, ...]
    lines: int
    bytes: int

    def to_dict(self) -> dict[str, object]:
        """The JSON form (``errkb scan --json``)."""
        return {
            "schema": "errkb.scan/1",
            "lines": self.lines,
            "bytes": self.bytes,
            "groups": [g.to_dict() for g in self.groups],
        }


class _Needles:
    """The byte strings to look for, and the records a needle does not find alone.

    Chosen from the records as :func:`errkb._scanplan.plan_needles` says, or read from the
    records index that holds them (the shipped records'). With the ``fast`` extra installed
    (ahocorasick-rs) one automaton finds every needle in a single pass over a block.
    Otherwise, on a large log, a plan made from its first block (:mod:`errkb._scanplan`) finds
    them in fewer ``bytes.find`` passes than there are needles; a small text gets a pass per
    needle.
    """

    def __init__(
        self,
        plan: NeedlePlan,
        record: Callable[[int], RecordRef],
        *,
        engine: str | None = None,
    ) -> None:
        #: The records whose pattern runs over lines, by the literal their first line holds.
        self.spanning = {k: [record(row) for row in rows] for k, rows in plan.spanning.items()}
        #: Those whose first line holds no literal to look for: tried on every line.
        self.spanning_anywhere = [record(row) for row in plan.anywhere]
        self.unfindable = [
            found for found in map(_over_bytes, map(record, plan.unfindable)) if found is not None
        ]
        self.needles = plan.needles
        self.engine, self._automaton = _automaton(self.needles, engine)
        self._plan = FindPlan(self.needles)
        self._sampled = False  # whether the plan was made from a large enough block

    @classmethod
    def of(cls, records: Sequence[RecordRef], *, engine: str | None = None) -> _Needles:
        """The needles of ``records``, chosen now."""
        rows = ((r.message_pattern, r.literal_sets(), r.retired) for r in records)
        return cls(plan_needles(rows), records.__getitem__, engine=engine)

    def starting(self, line: str) -> tuple[RecordRef, ...]:
        """The records whose pattern runs over lines that ``line`` may start a match of."""
        # A substring test a literal: a few dozen cost less than one search of an alternation
        # of them (2 us against 15 us a line), and nothing is compiled at the scan's start.
        held = [rs for literal, rs in self.spanning.items() if literal in line]
        if not held:
            return tuple(self.spanning_anywhere)
        found = {r.id: r for rs in held for r in rs}
        found.update((r.id, r) for r in self.spanning_anywhere)
        return tuple(found.values())

    def found(self, block: bytes) -> Hits | None:
        """Where the automaton finds needles in ``block``; None without the automaton.

        A worker thread calls this for the next block while a block is matched (see
        :func:`_searched_ahead`), then :meth:`lines_in` is given what it found.
        """
        if self._automaton is None:
            return None
        if not self._sampled and len(block) >= _TIMED:
            self._sampled = True  # one automaton, or SIMD passes: measured on this log
            if len(self.needles) > _PACKED:
                finders = (self._automaton, _packed(self.needles))
                self._automaton = _faster(finders, block[:_TIMED])
        return _found(self._automaton, block)

    def lines_in(self, block: bytes, hits: Hits | None = None) -> list[tuple[int, int]]:
        """(start, end) of every line of ``block`` that holds a needle, in order.

        ``hits``: what :meth:`found` found in ``block``, when it was searched already.
        """
        spans: set[tuple[int, int]] = set()
        if self._automaton is not None:
            end = -1
            for _, at, _ in (self.found(block) if hits is None else hits) or ():
                if at > end:  # one hit is enough for a line
                    start, end = line_around(block, at)
                    spans.add((start, end))
        else:
            if not self._sampled and len(block) >= PLAN_MIN:
                self._plan, self._sampled = FindPlan(self.needles, block), True
            spans = self._plan.lines(block)
        for pattern in self.unfindable:
            for m in pattern.finditer(block):
                # The line a match starts on; a window takes the lines after it.
                spans.add(line_around(block, m.start()))
        return sorted(spans)


def _over_bytes(record: RecordRef) -> regex.Pattern[bytes] | None:
    """The record's pattern compiled over bytes; None where it cannot be (lookups find it)."""
    import regex  # a record without a literal to look for: rare

    try:
        return regex.compile(record.message_pattern.encode())
    except regex.error:
        return None


#: The engines that find needles: one automaton pass (the ``fast`` extra), or a pass a needle.
ENGINES = ("ahocorasick", "python")
# Above this many needles the automaton's DFA form takes too much memory to build.
_DFA_LIMIT = 5000
# Needles per SIMD pass: up to 64 the library finds candidates by their opening bytes with SIMD
# (its "Teddy" searcher, used for leftmost matching only), several times faster than its
# automaton when those openings are rare in the log, and slower when they are common ("llama",
# "phi", "Rank "). Which is faster for a registry's needles on a log is measured on its first
# block (see _Needles.lines_in).
_PACKED = 64


def _automaton(needles: tuple[bytes, ...], engine: str | None) -> tuple[str, Finder | None]:
    """The engine to use (``ERRKB_SCAN_ENGINE`` when not given) and its search function.

    The search function is one automaton of every needle (a single SIMD pass when there are
    at most :data:`_PACKED`); :func:`_packed` is the other way for more needles.
    """
    engine = engine or env_text("ERRKB_SCAN_ENGINE") or "auto"
    if engine not in (*ENGINES, "auto"):
        raise UsageError(f"unknown scan engine {engine!r} (expected one of {', '.join(ENGINES)})")
    if engine == "python" or not needles:
        return "python", None
    try:
        import ahocorasick_rs
    except ImportError:
        if engine == "ahocorasick":
            raise UsageError(
                "the ahocorasick scan engine needs the fast extra: pip install 'errkb[fast]'"
            ) from None
        return "python", None
    kind = ahocorasick_rs.Implementation.DFA if len(needles) <= _DFA_LIMIT else None
    if len(needles) > _PACKED:
        automaton = ahocorasick_rs.BytesAhoCorasick(list(needles), implementation=kind)
        return "ahocorasick", automaton.find_matches_as_indexes
    return "ahocorasick", _packed(needles)


def _packed(needles: tuple[bytes, ...]) -> Finder:
    """A SIMD pass for each :data:`_PACKED` needles, their hits merged by where they start."""
    import ahocorasick_rs

    # Leftmost matches find every line that holds a needle: a needle's first hit on a line
    # is reported unless an earlier match overlaps it, and that one is on the same line.
    finders = [
        ahocorasick_rs.BytesAhoCorasick(
            list(needles[at : at + _PACKED]),
            matchkind=ahocorasick_rs.MatchKind.LeftmostFirst,
            implementation=ahocorasick_rs.Implementation.DFA,
        ).find_matches_as_indexes
        for at in range(0, len(needles), _PACKED)
    ]
    if len(finders) == 1:
        return finders[0]

    def find_all(block: bytes) -> list[tuple[int, int, int]]:
        hits = [hit for find in finders for hit in find(block)]
        hits.sort(key=itemgetter(1))  # by where each starts
        return hits

    return find_all


def _found(find: Finder, block: bytes) -> list[tuple[int, int, int]]:
    """What ``find`` finds in ``block``, in order; a large block in two halves at once.

    The automaton lets go of the interpreter while it searches, so with a second CPU the
    half after the middle line's end is searched in a worker thread meanwhile. No needle holds
    a newline: no hit crosses the cut.
    """
    pool = _worker(_HALVES) if len(block) >= _SPLIT_MIN else None
    cut = block.find(b"\n", len(block) // 2) + 1 if pool is not None else 0
    if pool is None or not 0 < cut < len(block):
        return find(block)
    view = memoryview(block)
    later = pool.submit(find, view[cut:])  # any bytes-like object
    first = find(view[:cut])  # type: ignore[arg-type]
    return [*first, *((n, start + cut, end + cut) for n, start, end in later.result())]


#: How much of the first large block each way of finding the needles is timed on (see
#: _Needles.found): a quarter of a megabyte tells them apart as well as a megabyte, and the
#: timing holds up the first block's matching (8 ms at 1 MiB, 2 ms at this).
_TIMED = 1 << 18
#: A block this large (or larger) is searched in two halves (see :func:`_found`).
_SPLIT_MIN = 1 << 20
#: The worker threads: one searches a block's second half (:func:`_found`), the other the
#: next block (:func:`_searched_ahead`).
_HALVES, _AHEAD = "errkb-scan", "errkb-ahead"
#: Each worker thread by name, and the process it was started in (a forked child starts its
#: own: a thread inherited through ``fork`` never runs).
_WORKERS: dict[str, tuple[int, _Worker | None]] = {}


def _worker(name: str) -> _Worker | None:
    """This process's worker thread ``name``, started on first use; None with a single CPU."""
    pid = os.getpid()
    worker = _WORKERS.get(name)
    if worker is None or worker[0] != pid:
        worker = _WORKERS[name] = (pid, _Worker(name) if _cpus() >= 2 else None)
    return worker[1]


class _Worker:
    """A thread that runs what it is given, in turn: ``ThreadPoolExecutor(1)``'s ``submit``.

    Without ``concurrent.futures``, whose import (with ``logging``'s) was 3 ms of a scan's
    start. A daemon: it waits for work between scans, and never holds up the interpreter's
    exit.
    """

    def __init__(self, name: str) -> None:
        from queue import SimpleQueue

        self._jobs: SimpleQueue[_Job] = SimpleQueue()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def submit(self, function: Callable[..., Any], *args: Any) -> _Job:
        """Run ``function(*args)`` in the thread after what was given before; its job."""
        job = _Job(function, args)
        self._jobs.put(job)
        return job

    def _run(self) -> None:
        while True:
            self._jobs.get().run()


class _Job:
    """What :meth:`_Worker.submit` was given; :meth:`result` waits for it to be done."""

    __slots__ = ("_args", "_done", "_error", "_function", "_value")

    def __init__(self, function: Callable[..., Any], args: tuple[Any, ...]) -> None:
        self._function, self._args = function, args
        self._value: Any = None
        self._error: BaseException | None = None
        self._done = threading.Lock()
        self._done.acquire()  # released when the job has run

    def run(self) -> None:
        try:
            self._value = self._function(*self._args)
        except BaseException as exc:  # raised again where the result is asked for
            self._error = exc
        finally:
            self._function = self._args = None  # type: ignore[assignment]  # a block's views go
            self._done.release()

    def result(self) -> Any:
        """What the function returned, once it has run; what it raised is raised here."""
        with self._done:
            pass
        if self._error is not None:
            raise self._error
        return self._value


def _cpus() -> int:
    """The CPUs this process may run on."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return cpus or 1


def _searched_ahead(
    blocks: Iterable[tuple[bytes | _Read, int]], needles: _Needles, *, errors: bool = False
) -> Iterator[tuple[bytes, int, Found | None]]:
    """``blocks``, each with what was found in it, searched while the one before is matched.

    The automaton lets go of the interpreter while it searches, so with a second CPU a worker
    thread searches each block (in two halves, see :func:`_found`) for the needles, and for
    the words of lines that look like errors when ``errors`` (a fleet scan's, see
    :func:`_error_lines`), while this thread matches the lines of the block before. A block of
    a file on disk (a :class:`_Read`, see :func:`_reads`) is read by the worker too, before
    it searches it: the copy of its bytes is off this thread, which matching keeps busy. Other
    blocks are read here, in the caller's thread: a stream may only be read where it was made
    (the console's upload is pulled from its event loop). Without the automaton, or with one
    CPU, each block is read and searched when it is matched.
    """
    searcher = _worker(_AHEAD) if needles.engine == "ahocorasick" else None
    if searcher is None:
        yield from ((_read(block), read, None) for block, read in blocks)
        return
    # Up to _AHEAD_BLOCKS are read and searched ahead of the one matched: the worker's pace
    # varies (it shares two CPUs with this thread, the halves' worker and the Fix lines' child).
    held: deque[tuple[int, Any]] = deque()
    for block, read in blocks:
        held.append((read, searcher.submit(_search, needles, block, errors)))
        if len(held) > _AHEAD_BLOCKS:
            yield _unheld(held.popleft())
    while held:
        yield _unheld(held.popleft())


def _unheld(held: tuple[int, Any]) -> tuple[bytes, int, Found]:
    """A block searched ahead, once the worker is done with it: the block, its size, hits."""
    block, found = held[1].result()
    return block, held[0], found


def _search(needles: _Needles, block: bytes | _Read, errors: bool) -> tuple[bytes, Found]:
    """What :func:`_searched_ahead`'s worker finds in ``block``, read first if it is not yet."""
    block = _read(block)
    find = _error_finder() if errors else None
    return block, (needles.found(block), find(block) if find is not None else None)


def _faster(finders: tuple[Finder, ...], sample: bytes) -> Finder:
    """Whichever of ``finders`` searches ``sample`` fastest (each finds the same lines)."""
    import time

    def took(find: Finder) -> float:
        start = time.perf_counter()
        find(sample)
        return time.perf_counter() - start

    return min(finders, key=lambda find: min(took(find) for _ in range(2)))


def _blocks(
    stream: BinaryIO, progress: Callable[[int], None] | None
) -> Iterator[tuple[bytes, int]]:
    """Blocks of whole lines (the last may lack its newline), with the bytes read for each.

    :func:`_reads`, each read when it is taken. A block of a file on disk is a buffer that a
    later block is read into (see :data:`_AHEAD_BLOCKS`): it is to be done with by then.
    """
    return ((_read(block), size) for block, size in _reads(stream, progress))


def _reads(
    stream: BinaryIO, progress: Callable[[int], None] | None
) -> Iterator[tuple[bytes | _Read, int]]:
    """The blocks of :func:`_blocks`, those of a file on disk still to be read (:class:`_Read`).

    The line a block cuts is finished from the stream, keeping at most :data:`MAX_LINE` more
    bytes of it (no more of a line is matched); the rest is read past, so a runaway line
    cannot make a block grow without bound. A block of a file on disk whose last line ends
    within :data:`MAX_LINE` of the block's size is read with ``os.preadv`` at its offset,
    where and when :meth:`_Read.read` is called (by the worker that searches it, see
    :func:`_searched_ahead`); it is to be read, and done with, before :data:`_AHEAD_BLOCKS`
    more are taken.
    """
    read, readline = stream.read, stream.readline
    fd, at = _plain_file(stream)
    # A file on disk is read into buffers that take turns, one more than the blocks searched
    # ahead (a block is kept only until that many more are taken: see _searched_ahead). A fresh
    # 4 MiB object a block was fresh memory each time, a page fault every 4 KiB: 6,000 of a
    # 134 MB log's scan.
    buffers = tuple(bytearray() for _ in range(_AHEAD_BLOCKS + 1)) if fd is not None else None
    turn = 0
    moved = False  # whether the stream's position is behind `at` (blocks read at their offset)
    # The first blocks are small, each twice the one before up to BLOCK: matching begins as
    # soon as the first is read and searched, and each is matched while the worker reads and
    # searches the next, twice as large (the worker's pace is about twice the matching's).
    wanted = min(BLOCK, _FIRST_BLOCK)
    while True:
        want, wanted = wanted, min(BLOCK, 2 * wanted)
        if fd is not None:
            # Where the line the block would cut ends, looked up first: the block is then read
            # in one piece at its offset, not finished by readline and copied whole again (60
            # ms of a 134 MB log's scan). A line longer than MAX_LINE there, the file's end and
            # a stream that is not a file on disk take the way below.
            end = os.pread(fd, MAX_LINE + 1, at + want - 1).find(b"\n")
            if end >= 0 and buffers is not None and _PREADV:
                want += end
                yield _Read(fd, buffers[turn], at, want), want
                turn = (turn + 1) % len(buffers)
                at += want
                moved = True
                if progress is not None:
                    progress(want)
                continue
            if end >= 0:
                want += end
            if moved:
                stream.seek(at)
                moved = False
        if buffers is not None:
            # A bytearray has every method of bytes that a block is read with.
            chunk = cast("bytes", _read_into(stream, buffers[turn], want))
            turn = (turn + 1) % len(buffers)
        else:
            chunk = read(want)
        if not chunk:
            return
        size = len(chunk)
        if not chunk.endswith(b"\n"):
            rest, kept = [chunk], 0
            while True:
                piece = readline(MAX_LINE)
                size += len(piece)
                if kept < MAX_LINE:
                    rest.append(piece)
                    kept += len(piece)
                elif piece.endswith(b"\n"):
                    rest.append(b"\n")
                if not piece or piece.endswith(b"\n"):
                    break
            chunk = b"".join(rest)
        at += size
        if progress is not None:
            progress(size)
        yield chunk, size


#: The size of a scan's first block (see _reads): matching begins once it is read and
#: searched (with a block of BLOCK bytes, 12 ms into the 134 MB log's scan; 2 ms with this).
_FIRST_BLOCK = 1 << 18
#: How many blocks the worker may read and search ahead of the one matched.
_AHEAD_BLOCKS = 2
#: Whether the platform reads into a buffer at an offset (os.preadv: Linux, the BSDs, macOS 11).
_PREADV = hasattr(os, "preadv")


class _Read:
    """A block of a file on disk, to be read at its offset into a buffer (see :func:`_reads`)."""

    __slots__ = ("at", "buffer", "fd", "want")

    def __init__(self, fd: int, buffer: bytearray, at: int, want: int) -> None:
        self.fd, self.buffer, self.at, self.want = fd, buffer, at, want

    def read(self) -> bytes:
        """The block: its buffer, made ``want`` bytes long and read into (shorter at the end)."""
        buffer, want = _sized(self.buffer, self.want), self.want
        got = 0
        with memoryview(buffer) as view:
            while got < want:
                n = os.preadv(self.fd, [view[got:]], self.at + got)
                if n <= 0:  # the file was cut short since its size was looked up
                    break
                got += n
        if got < want:
            del buffer[got:]
        # A bytearray has every method of bytes that a block is read with.
        return cast("bytes", buffer)


def _read(block: bytes | _Read) -> bytes:
    """``block``, read if it is a :class:`_Read`."""
    return block.read() if isinstance(block, _Read) else block


def _read_into(stream: BinaryIO, buffer: bytearray, want: int) -> bytearray:
    """``buffer``, made ``want`` bytes long and filled from ``stream`` (shorter at its end)."""
    _sized(buffer, want)
    got = cast("io.BufferedReader", stream).readinto(buffer)
    if got < want:
        del buffer[got:]
    return buffer


def _sized(buffer: bytearray, size: int) -> bytearray:
    """``buffer``, made ``size`` bytes long (what it held is to be read over)."""
    if len(buffer) < size:
        buffer.extend(bytes(size - len(buffer)))
    elif len(buffer) > size:
        del buffer[size:]
    return buffer


def _plain_file(stream: BinaryIO) -> tuple[int | None, int]:
    """The descriptor of the regular file ``stream`` reads as it is, and where it is; else None.

    Only a buffered reader of a file on disk: its bytes can be looked at ahead with
    ``os.pread``, which leaves its position alone.
    """
    raw = getattr(stream, "raw", None)
    if not isinstance(stream, io.BufferedReader) or not isinstance(raw, io.FileIO):
        return None, 0
    if not hasattr(os, "pread"):  # Windows
        return None, 0
    try:
        fd = raw.fileno()
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, 0
        return fd, stream.tell()
    except (OSError, ValueError):
        return None, 0


def _ready(block: bytes) -> int:
    """Where the lines of ``block`` whose whole window it holds end (a line's start).

    A line before it is followed in ``block`` by :data:`WINDOW_BYTES` bytes or by
    :data:`WINDOW_LINES` whole lines; the lines from it on wait for the next block.
    """
    by_bytes = block.rfind(b"\n", 0, max(len(block) - WINDOW_BYTES, 0)) + 1
    at = len(block)
    for _ in range(WINDOW_LINES + 1):
        at = block.rfind(b"\n", 0, at)
        if at == -1:
            return by_bytes
    return max(by_bytes, at + 1)


def _newlines(block: bytes, start: int, end: int) -> int:
    """How many newlines ``block[start:end]`` holds.

    Counted a 32 KiB piece at a time as the bytes a piece loses when its newlines are taken
    out: that runs on memchr, where ``bytes.count`` looks at each byte in turn (a quarter of a
    scan's main thread), and takes about half its time. A piece that size stays in the CPU's
    cache and its copy is not a fresh mapping of memory.
    """
    if end - start <= _SMALL_COUNT:
        return block.count(b"\n", start, end)
    found = 0
    for at in range(start, end, _COUNT_PIECE):
        piece = block[at : min(at + _COUNT_PIECE, end)]
        found += len(piece) - len(piece.replace(b"\n", b""))
    return found


_COUNT_PIECE = 1 << 15
#: Up to this many bytes bytes.count is as fast (no piece to copy).
_SMALL_COUNT = 1 << 10


def _decode(line: bytes) -> str:
    return line[:MAX_LINE].decode("utf-8", "replace").rstrip("\r")


class _After:
    """The lines of a window after its first: read from the block as asked, unprefixed.

    At most :data:`WINDOW_LINES` lines and :data:`WINDOW_BYTES` bytes after the line ending
    at ``end``, each without the log ``prefix`` of the first line (see :func:`_without_prefix`).
    A window is mostly decided by its first few lines: a line is decoded when it is asked for.
    """

    def __init__(self, block: bytes, end: int, prefix: str) -> None:
        self._data = block[end + 1 : end + 1 + WINDOW_BYTES]
        self._prefix = prefix
        self._at = 0  # where the next line to decode starts in _data
        self._done: list[str] = []
        self._size: int | None = None

    def __bool__(self) -> bool:  # whether a line follows: not counted, as len() would
        return bool(self._data)

    def __len__(self) -> int:
        if self._size is None:
            data = self._data
            lines = data.count(b"\n") + 1 if data else 0  # the last one cut by WINDOW_BYTES
            if lines and data.endswith(b"\n"):
                lines -= 1  # the end of the last line, not a line
            self._size = min(lines, WINDOW_LINES)
        return self._size

    def head(self, count: int) -> list[str]:
        """The first ``count`` lines (fewer where the window ends)."""
        data, done = self._data, self._done
        while len(done) < min(count, WINDOW_LINES) and self._at < len(data):
            end = data.find(b"\n", self._at)
            end = len(data) if end < 0 else end
            line = data[self._at : end].decode("utf-8", "replace").rstrip("\r")
            done.append(_without_prefix(line, self._prefix))
            self._at = end + 1
        return done[:count]


# Where a log prefix may end: what may come before an exception class (see parse.class_at).
_PREFIX_ENDS = frozenset(" \t:])>|")


def _without_prefix(line: str, prefix: str) -> str:
    """``line`` without the log prefix of a message's first line, or as much of it as it has.

    vLLM writes the whole prefix on every line of a message; Ray, torchrun's ``--tee`` and
    pytest's ``E   `` write their part of it. A shared part counts up to where a prefix may end,
    so a line that merely starts like the prefix keeps its text.
    """
    if line.startswith(prefix):
        return line[len(prefix) :]
    shared = 0
    for a, b in zip(line, prefix, strict=False):
        if a != b:
            break
        shared += 1
    while shared and prefix[shared - 1] not in _PREFIX_ENDS:
        shared -= 1
    return line[shared:]


def _continues(after: _After) -> bool:
    """Whether the first line after a message's first goes on with it: blank or indented."""
    first = after.head(1)
    return bool(first) and (not first[0] or first[0][0] in " \t")


@attrs.define
class _Group:
    record: Record
    count: int
    first_lines: list[int]
    example: str
    opened: int  # the first line of the failure counted last
    text: str  # its matched text
    last: int  # the last line of the record's latest match


class _Counter:
    """Failures by record, counted by the rule in the module docstring."""

    def __init__(self) -> None:
        self.groups: dict[str, _Group] = {}
        self.last_cause = -REPEAT_LINES - 1  # the last line of the latest match, not a wrapper

    def add(self, record: Record, first: int, last: int, text: str, example: str) -> bool:
        """Count the match of ``record`` on lines ``first`` to ``last``; whether it counted."""
        if WRAPPER_TAG in record.tags:
            if first - self.last_cause <= REPEAT_LINES:
                return False  # its root cause was just found: that is the failure
        else:
            self.last_cause = last
        group = self.groups.get(record.id)
        if group is None:
            self.groups[record.id] = _Group(
                record=record,
                count=1,
                first_lines=[first],
                example=example,
                opened=first,
                text=text,
                last=last,
            )
            return True
        again = first == group.last + 1 or (
            first - group.opened <= REPEAT_LINES and text == group.text
        )
        group.last = last
        if again:
            return False
        group.count += 1
        group.opened, group.text = first, text
        if len(group.first_lines) < FIRST_LINES:
            group.first_lines.append(first)
        return True

    def result(self, lines: int, size: int) -> ScanResult:
        groups = [
            ScanGroup(
                record=g.record, count=g.count, first_lines=tuple(g.first_lines), example=g.example
            )
            for g in self.groups.values()
        ]
        groups.sort(key=lambda g: (-g.count, g.first_lines[0], g.record.id))
        return ScanResult(groups=tuple(groups), lines=lines, bytes=size)


def _where(record: RecordRef | Record, text: str) -> tuple[int, int] | None:
    """Where ``record``'s pattern matches ``text``, whole or cut short by its end; None: nowhere."""
    compiled = compile_pattern(record.message_pattern)
    try:
        hit = search(compiled, text)
        if hit is None:
            head = head_regex(record.message_pattern)
            chain = cut_chain(record.message_pattern)
            if head is not None and (chain is None or may_end_inside(chain, text)):
                cut = compile_pattern(cut_pattern(record.message_pattern))
                hit = search_prefix(cut, compile_pattern(head), text)
    except regex_errors(PatternTimeoutError):
        return None
    return None if hit is None else hit.span()


def _cut_before_newline(record: Record, text: str, timeout: float) -> bool:
    """Whether ``record`` matches ``text`` only cut short by its end, and a newline could follow."""
    compiled = compile_pattern(record.message_pattern)
    try:
        return (
            compiled.search(text, timeout=timeout) is None
            and compiled.search(text + "\n", partial=True, timeout=timeout) is not None
        )
    except regex_errors(TimeoutError):
        return False


class _Scanner:
    """One scan: the needles, the matchers, the count, and how many lines went by.

    Blocks are fed in order; the lines at the end of a block whose window runs past it are
    kept (:attr:`carried`) until the next block or :meth:`finish`.
    """

    def __init__(
        self, registry: Registry, engine: str | None, *, tally: _Tally | None = None
    ) -> None:
        registry = registry.hand_written()
        self.matcher = registry.matcher
        self.needles = _needles_for(registry, engine)
        self.counter = _Counter()
        #: What a fleet scan keeps besides the counts: times, hosts, unknown shapes.
        self.tally = tally
        self.lines = 0  # lines before the first one not matched yet
        self.covered = 0  # the last line of a message already matched
        self.carried = b""
        self._carried_found: Found | None = None
        # Matchers for windows, by the records a line may start: a regex search a record.
        self._window_matchers: dict[tuple[str, ...], Matcher] = {}
        # What a line read alone gave, by its message and class, and where the best record
        # matched it: a log repeats its failures word for word under new timestamps, and
        # matching is the same each time.
        self._alone: dict[tuple[str, str | None], _Alone] = {}

    def feed(self, block: bytes, found: Found | None = None) -> None:
        """Match the lines of ``block`` (whole lines), and those carried from the last one.

        ``found``: what was found in ``block`` already (see :func:`_searched_ahead`), if any.
        """
        carried, self.carried = self.carried, b""
        if carried and len(block) > WINDOW_BYTES:
            # The carried lines' windows end in the first WINDOW_BYTES of this block: only
            # that much is joined to them, not the whole block; only they are matched.
            self._match(carried + block[:WINDOW_BYTES], len(carried), self._carried_found)
        elif carried:
            found = _joined(self._carried_found, found, len(carried))
            block = carried + block
        ready = _ready(block)
        self._match(block, ready, found)
        self.carried = block[ready:]
        # What was found in the lines carried, kept for them: the next block's search starts
        # after them (nothing looked for spans lines).
        self._carried_found = _from(found, ready)

    def read(self, stream: BinaryIO, progress: Callable[[int], None] | None) -> ScanResult:
        """Scan ``stream`` to its end, in blocks searched ahead (see :func:`_searched_ahead`)."""
        size = 0
        blocks = _reads(stream, progress)
        errors = self.tally is not None  # the tally's unknown shapes: see _error_lines
        for block, read, found in _searched_ahead(blocks, self.needles, errors=errors):
            size += read
            self.feed(block, found)
        return self.finish(size)

    def finish(self, size: int) -> ScanResult:
        """Match the lines still carried (the log ends there) and return the result."""
        block, self.carried = self.carried, b""
        self._match(block, len(block), self._carried_found)
        if block and not block.endswith(b"\n"):
            self.lines += 1  # a last line without its newline
        return self.counter.result(self.lines, size)

    def _match(self, block: bytes, ready: int, found: Found | None = None) -> None:
        """Match the lines of ``block`` that start before ``ready`` (a line's start)."""
        last, line = 0, self.lines
        hits, error_hits = found or (None, None)
        spans = self.needles.lines_in(block, hits)
        # A fleet scan also reads the lines that look like errors (see _error_lines).
        errors = _error_lines(block, ready, error_hits) if self.tally is not None else None
        needled = None
        if errors:
            needled = set(spans)
            spans = sorted(needled | errors)
        for start, end in spans:
            if start >= ready:
                break
            line += _newlines(block, last, start)
            last = start
            if line + 1 > self.covered:
                known = (needled is None or (start, end) in needled) and self._line(
                    block, start, end, line + 1
                )
                if not known and errors and (start, end) in errors and self.tally is not None:
                    self.tally.unknown(_decode(block[start : min(end, start + MAX_LINE)]), line + 1)
        self.lines = line + _newlines(block, last, ready)

    def _line(self, block: bytes, start: int, end: int, number: int) -> bool:
        """Match the line at ``start:end`` of ``block`` (line ``number``), and count its failure.

        Whether a record matched it (counted or not).
        """
        text = _decode(block[start : min(end, start + MAX_LINE)])
        cls, message = class_at(text)
        if cls is not None:
            prefix = text[: len(text) - len(message) - len(cls) - 2]
            readings: tuple[tuple[str, str | None], ...] = ((message, cls), (text, None))
        else:
            # The message after the log prefix, as a paste's line is read: a logger's prefix
            # (vLLM's "[core.py:N]" names its own line) makes a repeated error's lines differ.
            prefix = log_prefix(text)
            readings = ((text[len(prefix) :], None), (text, None)) if prefix else ((text, None),)
        starting = self.needles.starting(text)
        after = _After(block, end, prefix) if starting else None
        where = None
        for subject, error_class in readings:
            if after is None:
                ranked, any_found, where = self._rank_alone(subject, error_class)
            else:
                ranked, any_found = self._rank(subject, error_class, after, starting)
            if any_found:
                break  # the line without its class is read only when the class ruled all out
        if not ranked:
            return False
        best, window = ranked[0]
        if after is not None:
            where = _where(best.record, window)
        lines_after = 0
        matched = window
        if where is not None:
            lines_after = window.count("\n", 0, max(where[1] - 1, 0))
            matched = window[where[0] : where[1]]
        if lines_after:
            self.covered = number + lines_after
        example = "\n".join([text, *(after.head(lines_after) if after else ())])[:500]
        counted = self.counter.add(best.record, number, number + lines_after, matched, example)
        if counted and self.tally is not None:
            self.tally.failure(best.record.id, number, text, example)
        return True

    def _rank(
        self,
        subject: str,
        error_class: str | None,
        after: _After | None,
        starting: tuple[RecordRef, ...],
    ) -> tuple[list[tuple[Match, str]], bool]:
        """Matches for a line read as ``subject``, best first, each with the text it matched.

        And whether any record matched the line before the window judged it (the line is then
        not read again without its class).

        A record that runs over lines (of those in ``starting``) is judged on the window when
        the line has lines after it: it counts when its match starts on this line.
        """
        found = {m.record.id: (m, subject) for m in self.matcher.match(subject, error_class)}
        any_found = bool(found)
        if after and starting:
            window, matching = self._window(subject, after, starting)
            on_window: set[str] = set()
            for m in self._window_matcher(matching).match(window, error_class) if matching else ():
                where = _where(m.record, window)
                if where is not None and (where[0] < len(subject) or where[0] == 0):
                    found[m.record.id] = (m, window)
                    on_window.add(m.record.id)
            if _continues(after):
                timeout = self.matcher.timeout
                for record_id in {r.id for r in starting} & found.keys() - on_window:
                    # Cut short by the line's end, where the next line goes on with the
                    # message (and the pattern with a newline): not cut, but another message.
                    if _cut_before_newline(found[record_id][0].record, subject, timeout):
                        del found[record_id]
        from errkb.match import ranked

        order = [found[m.record.id] for m in ranked(m for m, _ in found.values())]
        return order, any_found or bool(order)

    def _rank_alone(self, subject: str, error_class: str | None) -> _Alone:
        """:meth:`_rank` for a line no record may start a message of more lines on, kept.

        With where the best record matched it (None when none did).
        """
        key = (subject, error_class)
        found = self._alone.get(key)
        if found is None:
            if len(self._alone) >= _ALONE_KEPT:
                self._alone.clear()
            ranked, any_found = self._rank(subject, error_class, None, ())
            where = _where(ranked[0][0].record, ranked[0][1]) if ranked else None
            found = self._alone[key] = (ranked, any_found, where)
        return found

    def _window(
        self, subject: str, after: _After, starting: tuple[RecordRef, ...]
    ) -> tuple[str, tuple[RecordRef, ...]]:
        """The shortest window that decides the records in ``starting``, and those that match.

        The first line and as few lines after it as decide every record; the records returned
        are those whose match (whole, or running past the window's end) starts on the first
        line. A partial search tells whether a record's match that starts on the first line runs
        on past the window's end: the lines are doubled until none does, or the window is
        whole. A message of a few lines costs a window of a few lines.
        """
        count = 1
        while True:
            window = "\n".join([subject, *after.head(count)])
            hits = [(record, self._hit(record, window, len(subject))) for record in starting]
            if not any(hit is not None and hit.partial for _, hit in hits) or count >= len(after):
                return window, tuple(record for record, hit in hits if hit is not None)
            count *= 2

    def _hit(self, record: RecordRef, window: str, first: int) -> regex.Match[str] | None:
        """The first match of ``record`` in ``window`` (whole or running past its end).

        None when there is none, or when it starts after ``window[:first]``.
        """
        try:
            hit = compile_pattern(record.message_pattern).search(
                window, partial=True, timeout=self.matcher.timeout
            )
        except regex_errors(TimeoutError):
            return None
        return hit if hit is not None and (hit.start() < first or hit.start() == 0) else None

    def _window_matcher(self, records: tuple[RecordRef, ...]) -> Matcher:
        key = tuple(sorted(r.id for r in records))
        matcher = self._window_matchers.get(key)
        if matcher is None:
            from errkb.match import Matcher

            matcher = Matcher(records, timeout=self.matcher.timeout, indexed=False)
            self._window_matchers[key] = matcher
        return matcher


def _moved(hits: Hits | None, by: int, since: int = 0) -> Hits | None:
    """The ``hits`` that start at ``since`` or later, moved by ``by``; None stays None."""
    if hits is None:
        return None
    return [(n, start + by, end + by) for n, start, end in hits if start >= since]


def _joined(first: Found | None, then: Found | None, shift: int) -> Found | None:
    """What was found in two texts joined, ``then``'s moved by ``shift``.

    A kind is None unless it is known in both.
    """
    if first is None or then is None:
        return None
    return _join(first[0], then[0], shift), _join(first[1], then[1], shift)


def _join(first: Hits | None, then: Hits | None, shift: int) -> Hits | None:
    """The hits of two texts joined, ``then``'s moved by ``shift``; None unless both are known."""
    moved = _moved(then, shift)
    return None if first is None or moved is None else [*first, *moved]


def _from(found: Found | None, at: int) -> Found | None:
    """What was found at or after ``at``, moved to count from it."""
    if found is None:
        return None
    return _moved(found[0], -at, at), _moved(found[1], -at, at)


#: How many lines read alone a scan keeps the matches of (see _Scanner._rank_alone).
_ALONE_KEPT = 4096


def scan_stream(
    stream: BinaryIO,
    *,
    registry: Registry | None = None,
    progress: Callable[[int], None] | None = None,
    engine: str | None = None,
) -> ScanResult:
    """Scan a binary stream of log text (UTF-8; undecodable bytes are replaced).

    ``engine`` picks how needles are found (see :data:`ENGINES`; by default the automaton
    when the ``fast`` extra is installed, else ``ERRKB_SCAN_ENGINE``); the result is the same.
    Groups count failures, not lines (see the module docstring).
    """
    from errkb.registry import default_registry

    return _Scanner(registry or default_registry(), engine).read(stream, progress)


def scan(
    lines: Iterable[str], *, registry: Registry | None = None, engine: str | None = None
) -> ScanResult:
    """Scan lines of text (an open text file, a list); the lookup API's form of ``errkb scan``.

    Each item is a line (its ending newline, if any, is dropped); an item holding a newline counts
    as the lines it holds.

    >>> result = scan(["INFO all good", "ValueError: No available memory for the cache blocks. "
    ...                "Try increasing `gpu_memory_utilization` when initializing the engine."])
    >>> [(g.record.id, g.count, g.first_lines) for g in result.groups]
    [('vllm-no-cache-blocks', 1, (2,))]
    """
    from errkb.registry import default_registry

    scanner = _Scanner(registry or default_registry(), engine)
    size = held = 0
    pending: list[bytes] = []
    for line in lines:
        size += len(line)
        # Only the "\n": a "\r" before it stays, as in the file's bytes that scan_stream reads
        # (matching drops it; a window's byte count must not differ between the two).
        data = line.removesuffix("\n").encode("utf-8", "replace") + b"\n"
        pending.append(data)
        held += len(data)
        if held >= BLOCK:
            scanner.feed(b"".join(pending))
            pending, held = [], 0
    scanner.feed(b"".join(pending))
    return scanner.finish(size)


def open_log(path: str) -> BinaryIO:
    """A file, ``-`` for standard input, read as bytes; gzip is recognised by its magic bytes."""
    if path == "-":
        import sys

        raw: BinaryIO = sys.stdin.buffer
        head = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
        return gzip.GzipFile(fileobj=raw) if head == b"\x1f\x8b" else raw  # type: ignore[return-value]
    file = Path(path).open("rb")  # noqa: SIM115 - the caller closes it
    if file.read(2) == b"\x1f\x8b":
        file.seek(0)
        return gzip.GzipFile(fileobj=file)  # type: ignore[return-value]
    file.seek(0)
    return file


# -- The fleet scan's map step: one piece of one source, a mergeable result -----------------
#
# A fleet is scanned piece by piece (a whole file, or a byte range of a large plain one), on
# any engine (Dask in errkb.fleet, or Ray, Spark, a loop); each piece gives a ScanPart, and
# merge() adds them up in any order. A part holds counts, never log lines in bulk: per record,
# its failures, the first few line numbers, one example, the first and last time, the hosts
# and a timeline by hour and host; per unknown shape, its lines and one example.

#: The words a line that looks like an error holds (see :func:`errkb._logline.error_text`).
_ERROR_WORDS = (b"Error", b"Exception", b"ERROR", b"CRITICAL", b"FATAL")


def _error_lines(block: bytes, ready: int, found: Hits | None = None) -> set[tuple[int, int]]:
    """(start, end) of the lines before ``ready`` that hold a word of :data:`_ERROR_WORDS`.

    One automaton pass with the ``fast`` extra (a ``bytes.find`` pass a word costs as much
    as the rest of a fleet scan of a quiet log); a pass a word without it. ``found``: where
    the automaton found the words in ``block`` already (see :func:`_searched_ahead`).
    """
    spans: set[tuple[int, int]] = set()
    if found is None:
        find = _error_finder()
        found = find(block) if find is not None else None
    if found is not None:
        end = -1
        for _, at, _ in found:
            if at >= ready:
                break
            if at > end:
                start, end = line_around(block, at)
                spans.add((start, end))
        return spans
    for word in _ERROR_WORDS:
        at = block.find(word, 0, ready)
        while at >= 0:
            start, end = line_around(block, at)
            spans.add((start, end))
            at = block.find(word, end + 1, ready)
    return spans


@functools.cache
def _error_finder() -> Callable[[bytes], list[tuple[int, int, int]]] | None:
    """An automaton that finds :data:`_ERROR_WORDS`, leftmost first; None without the extra."""
    try:
        import ahocorasick_rs
    except ImportError:
        return None
    automaton = ahocorasick_rs.BytesAhoCorasick(
        list(_ERROR_WORDS), matchkind=ahocorasick_rs.MatchKind.LeftmostFirst
    )
    return automaton.find_matches_as_indexes


#: Where a thing was first seen: (source, the piece's first byte, line in the piece, text).
_Seen = tuple[str, int, int, str]


@attrs.frozen(kw_only=True)
class PartSource:
    """One piece of a source: where it starts, what was read, or why it could not be."""

    source: str
    start: int
    host: str | None
    bytes: int
    lines: int
    failed: str | None = None


@attrs.frozen(kw_only=True)
class PartGroup:
    """One record's failures in a part (see :class:`ScanPart`)."""

    record_id: str
    count: int
    #: (source, piece start, first lines in the piece): the first source's pieces only.
    firsts: tuple[tuple[str, int, tuple[int, ...]], ...]
    example: _Seen
    first_seen: int | None
    last_seen: int | None
    hosts: tuple[tuple[str, int], ...]
    sources: tuple[str, ...]
    #: (the hour, in seconds since the epoch; host; failures).
    timeline: tuple[tuple[int, str, int], ...]


@attrs.frozen(kw_only=True)
class PartShape:
    """The lines of one unknown error shape in a part."""

    shape: str
    count: int
    example: _Seen
    hosts: tuple[tuple[str, int], ...]


@attrs.frozen(kw_only=True)
class ScanPart:
    """What the scan of pieces of a fleet found: mergeable (:func:`merge`), picklable.

    ``to_dict()`` gives the ``errkb.scan/1`` object of a fleet (docs/json.md).
    """

    pieces: tuple[PartSource, ...] = ()
    groups: tuple[PartGroup, ...] = ()
    unknown: tuple[PartShape, ...] = ()

    @property
    def lines(self) -> int:
        """Lines read, over every piece."""
        return sum(p.lines for p in self.pieces)

    @property
    def bytes(self) -> int:
        """Bytes read (uncompressed), over every piece."""
        return sum(p.bytes for p in self.pieces)

    def to_dict(
        self,
        registry: Registry | None = None,
        *,
        fix: Callable[[Record, str], str | None] | None = None,
    ) -> dict[str, Any]:
        """The JSON form: groups and shapes most frequent first, every list in a fixed order.

        ``fix`` gives a group's Fix line from its record and example (by default the record's
        first solution; ``errkb scan`` gives the diagnosis' Fix line).
        """
        from errkb._logline import hour, iso
        from errkb.registry import default_registry

        registry = registry or default_registry()
        by_source: dict[str, list[PartSource]] = {}
        for piece in self.pieces:
            by_source.setdefault(piece.source, []).append(piece)
        line_base: dict[tuple[str, int], int] = {}
        sources = []
        for name in sorted(by_source):
            # An empty range (its ends cut to one line) starts where the next range does.
            pieces = sorted(by_source[name], key=lambda p: (p.start, p.bytes))
            done = 0
            for piece in pieces:
                line_base.setdefault((name, piece.start), done)
                done += piece.lines
            failed = next((p.failed for p in pieces if p.failed is not None), None)
            sources.append(
                {
                    "source": name,
                    "host": pieces[0].host,
                    "bytes": sum(p.bytes for p in pieces),
                    "lines": done,
                    "offset": pieces[0].start,
                    "failed": failed,
                }
            )
        groups = []
        for g in sorted(self.groups, key=lambda g: (-g.count, g.example[:3], g.record_id)):
            record = registry.get(g.record_id)
            firsts = sorted(
                line_base.get((source, start), 0) + n
                for source, start, numbers in g.firsts
                for n in numbers
            )
            groups.append(
                {
                    **record.brief(),
                    "count": g.count,
                    "first_lines": firsts[:FIRST_LINES],
                    "example": g.example[3],
                    "fix": fix(record, g.example[3])
                    if fix is not None
                    else (record.solutions[0] if record.solutions else None),
                    "first_seen": iso(g.first_seen),
                    "last_seen": iso(g.last_seen),
                    "hosts": dict(g.hosts),
                    "sources": list(g.sources),
                    "timeline": [[hour(at), host, n] for at, host, n in g.timeline],
                }
            )
        unknown = [
            {"shape": u.shape, "count": u.count, "example": u.example[3], "hosts": dict(u.hosts)}
            for u in sorted(self.unknown, key=lambda u: (-u.count, u.shape))
        ]
        return {
            "schema": "errkb.scan/1",
            "lines": self.lines,
            "bytes": self.bytes,
            "sources": sources,
            "failed": sum(1 for s in sources if s["failed"] is not None),
            "groups": groups,
            "unknown": unknown,
            "running": None,
        }


class _Tally:
    """What one piece's scan keeps for :class:`ScanPart`: told by the scanner as it counts."""

    def __init__(
        self,
        source: str,
        start: int,
        host: str | None,
        mtime: float | None,
        opened: Callable[[str, str], None] | None = None,
    ) -> None:
        self.source, self.start, self.host, self.mtime = source, start, host, mtime
        self.opened = opened
        self.groups: dict[str, dict[str, Any]] = {}
        self.shapes: dict[str, dict[str, Any]] = {}

    def _host(self, line: str) -> str:
        from errkb._logline import line_host

        return line_host(line) or self.host or ""

    def failure(self, record_id: str, number: int, line: str, example: str) -> None:
        """A failure counted on line ``number`` (of this piece), whose first line is ``line``."""
        from errkb._logline import line_time

        at = line_time(line, self.mtime)
        host = self._host(line)
        g = self.groups.get(record_id)
        if g is None:
            g = self.groups[record_id] = {
                "count": 0,
                "firsts": [],
                "example": (self.source, self.start, number, example),
                "first_seen": None,
                "last_seen": None,
                "hosts": {},
                "timeline": {},
            }
            if self.opened is not None:
                self.opened(record_id, example)
        g["count"] += 1
        if len(g["firsts"]) < FIRST_LINES:
            g["firsts"].append(number)
        g["hosts"][host] = g["hosts"].get(host, 0) + 1
        if at is not None:
            g["first_seen"] = at if g["first_seen"] is None else min(g["first_seen"], at)
            g["last_seen"] = at if g["last_seen"] is None else max(g["last_seen"], at)
            key = (at - at % 3600, host)
            g["timeline"][key] = g["timeline"].get(key, 0) + 1

    def unknown(self, line: str, number: int) -> None:
        """A line that may be an error no record knows (line ``number`` of this piece)."""
        from errkb._logline import error_text, shape

        said = error_text(line, class_at)
        if said is None:
            return
        key = shape(said)
        host = self._host(line)
        u = self.shapes.get(key)
        if u is None:
            u = self.shapes[key] = {
                "count": 0,
                "example": (self.source, self.start, number, line[:500]),
                "hosts": {},
            }
        u["count"] += 1
        u["hosts"][host] = u["hosts"].get(host, 0) + 1

    def part(self, size: int, lines: int) -> ScanPart:
        groups = tuple(
            PartGroup(
                record_id=record_id,
                count=g["count"],
                firsts=((self.source, self.start, tuple(g["firsts"])),),
                example=g["example"],
                first_seen=g["first_seen"],
                last_seen=g["last_seen"],
                hosts=tuple(sorted(g["hosts"].items())),
                sources=(self.source,),
                timeline=tuple(sorted((at, h, n) for (at, h), n in g["timeline"].items())),
            )
            for record_id, g in sorted(self.groups.items())
        )
        shapes = tuple(
            PartShape(
                shape=key,
                count=u["count"],
                example=u["example"],
                hosts=tuple(sorted(u["hosts"].items())),
            )
            for key, u in sorted(self.shapes.items())
        )
        piece = PartSource(
            source=self.source, start=self.start, host=self.host, bytes=size, lines=lines
        )
        return ScanPart(pieces=(piece,), groups=groups, unknown=shapes)


def _added(a: tuple[tuple[Any, int], ...], b: tuple[tuple[Any, int], ...]) -> dict[Any, int]:
    out = dict(a)
    for key, n in b:
        out[key] = out.get(key, 0) + n
    return out


def _merge_groups(a: PartGroup, b: PartGroup) -> PartGroup:
    first_source = min(s for s, _, _ in (*a.firsts, *b.firsts))
    seen = [x for x in (a.first_seen, b.first_seen) if x is not None]
    last = [x for x in (a.last_seen, b.last_seen) if x is not None]
    timeline = _added(
        tuple(((at, h), n) for at, h, n in a.timeline),
        tuple(((at, h), n) for at, h, n in b.timeline),
    )
    return PartGroup(
        record_id=a.record_id,
        count=a.count + b.count,
        firsts=tuple(sorted(f for f in (*a.firsts, *b.firsts) if f[0] == first_source)),
        example=min(a.example, b.example),
        first_seen=min(seen) if seen else None,
        last_seen=max(last) if last else None,
        hosts=tuple(sorted(_added(a.hosts, b.hosts).items())),
        sources=tuple(sorted({*a.sources, *b.sources})),
        timeline=tuple(sorted((at, h, n) for (at, h), n in timeline.items())),
    )


def _merge_shapes(a: PartShape, b: PartShape) -> PartShape:
    return PartShape(
        shape=a.shape,
        count=a.count + b.count,
        example=min(a.example, b.example),
        hosts=tuple(sorted(_added(a.hosts, b.hosts).items())),
    )


def merge(parts: Iterable[ScanPart]) -> ScanPart:
    """The sum of ``parts``: the same whatever their order or grouping.

    >>> merge([]).to_dict()["groups"]
    []
    """
    pieces: list[PartSource] = []
    groups: dict[str, PartGroup] = {}
    shapes: dict[str, PartShape] = {}
    for part in parts:
        pieces.extend(part.pieces)
        for g in part.groups:
            had = groups.get(g.record_id)
            groups[g.record_id] = g if had is None else _merge_groups(had, g)
        for u in part.unknown:
            was = shapes.get(u.shape)
            shapes[u.shape] = u if was is None else _merge_shapes(was, u)
    pieces.sort(key=lambda p: (p.source, p.start, p.bytes, p.lines, p.failed or ""))
    return ScanPart(
        pieces=tuple(pieces),
        groups=tuple(groups[k] for k in sorted(groups)),
        unknown=tuple(shapes[k] for k in sorted(shapes)),
    )


def failed_part(source: str, reason: str, *, start: int = 0, host: str | None = None) -> ScanPart:
    """The part of a source that could not be read: its reason, and nothing counted."""
    piece = PartSource(source=source, start=start, host=host, bytes=0, lines=0, failed=reason)
    return ScanPart(pieces=(piece,))


# Needles made for a registry, kept for the next piece in this process (a worker scans many).
_KEPT_NEEDLES: dict[tuple[int, str], tuple[Registry, _Needles]] = {}


def _needles_for(registry: Registry, engine: str | None) -> _Needles:
    written = registry.hand_written()
    key = (id(written), engine or env_text("ERRKB_SCAN_ENGINE") or "auto")
    kept = _KEPT_NEEDLES.get(key)
    if kept is None or kept[0] is not written:
        if len(_KEPT_NEEDLES) >= 4:
            _KEPT_NEEDLES.clear()
        planned = written.needle_plan()  # the shipped records' index keeps it
        needles = (
            _Needles(*planned, engine=engine)
            if planned is not None
            else _Needles.of(written.refs, engine=engine)
        )
        kept = _KEPT_NEEDLES[key] = (written, needles)
    return kept[1]


def scan_part(
    data: bytes | BinaryIO,
    *,
    source: str,
    host: str | None = None,
    mtime: float | None = None,
    start: int = 0,
    registry: Registry | None = None,
    engine: str | None = None,
    progress: Callable[[int], None] | None = None,
    opened: Callable[[str, str], None] | None = None,
) -> ScanPart:
    r"""The map step of a fleet scan: one log (bytes, or a binary file object read to its end).

    ``source`` names it in the result (a path or URL), ``host`` is the host its lines are
    filed under when a line does not name one (see :func:`source_host`), ``mtime`` (seconds
    since the epoch) gives the year to times that lack one, and ``start`` is the byte offset
    of ``data`` in the source (its line numbers count from there). Parts add up with
    :func:`merge`; the same scanner as :func:`scan_stream` counts the failures (``progress``
    is told the bytes read, as there). ``opened`` is told each group's record id and example
    as the group opens (its first failure).

    >>> part = scan_part(b"ValueError: No available memory for the cache blocks. Try "
    ...                  b"increasing `gpu_memory_utilization` when initializing the engine.\n",
    ...                  source="node-1/vllm.log")
    >>> [(g["id"], g["count"]) for g in part.to_dict()["groups"]]
    [('vllm-no-cache-blocks', 1)]
    """
    from errkb.registry import default_registry

    registry = registry or default_registry()
    tally = _Tally(source, start, host, mtime, opened)
    scanner = _Scanner(registry, engine, tally=tally)
    stream: BinaryIO = io.BytesIO(data) if isinstance(data, bytes) else data
    result = scanner.read(stream, progress)
    return tally.part(result.bytes, result.lines)


#: A byte range's ends move to a line that this many lines without a match start precede:
#: no message over several lines, no repeat and no wrapper then reaches across it (see
#: :func:`range_cut`).
QUIET_LINES = REPEAT_LINES + WINDOW_LINES + 1
#: How much before a range's nominal end is read to find the quiet lines...
CUT_BEHIND = 1 << 20
#: ...and how much after it, at first (doubled until a cut is found, or the file ends).
CUT_AHEAD = 1 << 20


def range_cut(
    read_at: Callable[[int, int], bytes],
    at: int,
    size: int,
    *,
    registry: Registry | None = None,
    engine: str | None = None,
) -> int:
    """Where a byte range that should end at ``at`` ends: the first quiet line start from ``at``.

    A line start is *quiet* when the :data:`QUIET_LINES` lines before it hold no line that a
    record's match may start on (none holds a needle); of those lines, only the ones that start
    in the :data:`CUT_BEHIND` bytes before it are looked at (on a log of lines of several KiB,
    those bytes holding no such line is taken as enough). The end of the file is quiet. Counting
    is then the same on both sides of a quiet line as in one scan: a message over several
    lines, a failure printed again and a wrapper's cause all lie within fewer lines
    (:data:`WINDOW_LINES`, :data:`REPEAT_LINES`). Being quiet is a property of the line, not of
    ``at``: ranges that meet at one offset meet at one line, and cuts never cross, so a
    traceback that straddles ``at`` is scanned once, by the range it starts in.
    ``read_at(lo, hi)`` reads bytes ``lo:hi``.
    """
    from bisect import bisect_left

    from errkb.registry import default_registry

    if at <= 0:
        return 0
    if at >= size:
        return size
    needles = _needles_for(registry or default_registry(), engine)
    ahead = CUT_AHEAD
    while True:
        lo, hi = max(0, at - CUT_BEHIND - 1), min(size, at + ahead)
        data = read_at(lo, hi)
        first = 0 if lo == 0 else data.find(b"\n") + 1
        starts: list[int] = []  # every line start from the first one in the bytes read
        pos = first if first or lo == 0 else len(data) + 1
        while pos <= len(data):
            starts.append(lo + pos)
            nl = data.find(b"\n", pos)
            if nl == -1:
                break
            pos = nl + 1
        hits = {lo + first + start for start, _ in needles.lines_in(data[first:])}
        last_hit = -1  # the index in starts of the last line before the candidate with a needle
        for k, p in enumerate(starts):
            if p >= at and (p < hi or p == size):
                window = max(bisect_left(starts, p - CUT_BEHIND), k - QUIET_LINES)
                if last_hit < window:
                    return p
            if p in hits:
                last_hit = k
        if hi >= size:
            return size
        ahead *= 2


class _Range(io.RawIOBase):
    """Bytes ``start:end`` of a seekable binary file, read as a stream."""

    def __init__(self, file: BinaryIO, start: int, end: int) -> None:
        file.seek(start)
        self._file, self._left = file, end - start

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._left <= 0:
            return 0
        data = self._file.read(min(len(buffer), self._left))
        buffer[: len(data)] = data
        self._left -= len(data)
        return len(data)


def scan_range(
    file: BinaryIO,
    start: int,
    end: int,
    size: int,
    *,
    source: str,
    host: str | None = None,
    mtime: float | None = None,
    cut: tuple[bool, bool] = (True, True),
    registry: Registry | None = None,
    engine: str | None = None,
) -> ScanPart:
    """The map step for bytes ``start:end`` of a large plain log of ``size`` bytes.

    Both ends move to their :func:`range_cut`, so that ranges which meet at one offset meet
    at one line and the parts merge to what one scan of the file gives; ``cut`` says, for the
    start and the end, whether to (an end that is where the scan of the file starts or stops
    stays). ``file`` is an open, seekable binary file of the whole log.
    """

    def read_at(lo: int, hi: int) -> bytes:
        file.seek(lo)
        return file.read(hi - lo)

    first = range_cut(read_at, start, size, registry=registry, engine=engine) if cut[0] else start
    last = range_cut(read_at, end, size, registry=registry, engine=engine) if cut[1] else end
    stream = io.BufferedReader(_Range(file, first, max(first, last)), BLOCK)
    return scan_part(
        stream,
        source=source,
        host=host,
        mtime=mtime,
        start=first,
        registry=registry,
        engine=engine,
    )


def source_host(path: str, root: str = "") -> str | None:
    """The host a log's path names, or None.

    ``host=NAME``, a Kubernetes pod, the first folder below ``root``: the rules of
    :func:`errkb._logline.path_host`.
    """
    from errkb._logline import path_host

    return path_host(path, root)
