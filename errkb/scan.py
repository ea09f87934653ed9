"""Scanning logs for known errors: streaming, constant memory, grouped by record.

The text is read in large blocks of bytes. Every record contributes needles: for each record,
one any-of set of the literals its pattern requires (see :func:`errkb._patterns.literal_sets`),
the set whose shortest literal is longest. An Aho-Corasick automaton (the ``fast`` extra,
ahocorasick-rs) finds them all in one pass over a block; without it ``bytes.find`` looks for each
needle in turn. Only the lines that hold a needle are decoded and matched with the full matcher
(with the exception class read from the line, as in ``ValueError: ...``). A record with no literal at
all is searched with its regex over the block. A line counts once, for the record that ranks
first on it (as ``errkb explain`` would rank it).
"""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import attrs
import regex

from errkb._env import text
from errkb._patterns import best_set
from errkb._scanplan import FindPlan, line_around
from errkb.exceptions import UsageError
from errkb.parse import class_at

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from errkb.match import Matcher
    from errkb.records import Record, RecordRef
    from errkb.registry import Registry

__all__ = [
    "ENGINES",
    "ScanGroup",
    "ScanResult",
    "open_log",
    "scan",
    "scan_stream",
]

BLOCK = 4 << 20
#: A first block at least this long is worth a search plan (see :mod:`errkb._scanplan`).
PLAN_MIN = 1 << 20
#: How many first line numbers each group keeps.
FIRST_LINES = 5
#: Lines longer than this are cut before matching (a runaway line must not stall the scan).
MAX_LINE = 64 * 1024


@attrs.frozen(kw_only=True)
class ScanGroup:
    """Every line one record matched: how many, the first line numbers, the first such line."""

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
    """The byte strings to look for, and the records with no literal to look for.

    Each record contributes the longest literal its pattern requires (or, when its literals
    are alternatives, all of them); a needle that contains another is dropped, and so is one
    that spans lines (no single line can hold it). With the ``fast`` extra installed
    (ahocorasick-rs) one automaton finds every needle in a single pass over a block.
    Otherwise, on a large log, a plan made from its first block (:mod:`errkb._scanplan`)
    finds them in fewer ``bytes.find`` passes than there are needles; a small text gets a
    pass per needle.
    """

    def __init__(self, records: Iterable[RecordRef], *, engine: str | None = None) -> None:
        needles: set[bytes] = set()
        self.unfindable: list[regex.Pattern[bytes]] = []
        for record in records:
            if record.retired:
                continue
            sets = record.literal_sets() or ()
            singles = [s[0].encode() for s in sets if len(s) == 1 and len(s[0]) >= 3]
            if singles:
                needles.add(max(singles, key=len))
                continue
            best = best_set([s for s in sets if min(len(x) for x in s) >= 3])
            if best is not None:
                needles.update(x.encode() for x in best)
                continue
            try:
                self.unfindable.append(regex.compile(record.message_pattern.encode()))
            except regex.error:
                continue  # not expressible over bytes; lookups still find it through the index
        kept: list[bytes] = []
        for needle in sorted(needles, key=len):
            if b"\n" not in needle and not any(k in needle for k in kept):
                kept.append(needle)
        self.needles = tuple(kept)
        self.engine, self._automaton = _automaton(self.needles, engine)
        self._plan = FindPlan(self.needles)
        self._sampled = False  # whether the plan was made from a large enough block

    def lines_in(self, block: bytes) -> list[tuple[int, int]]:
        """(start, end) of every line of ``block`` that holds a needle, in order."""
        spans: set[tuple[int, int]] = set()
        if self._automaton is not None:
            end = -1
            for _, at, _ in self._automaton(block):
                if at > end:  # one hit is enough for a line
                    start, end = line_around(block, at)
                    spans.add((start, end))
        else:
            if not self._sampled and len(block) >= PLAN_MIN:
                self._plan, self._sampled = FindPlan(self.needles, block), True
            spans = self._plan.lines(block)
        for pattern in self.unfindable:
            for m in pattern.finditer(block):
                # A match may run over newlines: from its first line to its last.
                spans.add((line_around(block, m.start())[0], line_around(block, m.end())[1]))
        return sorted(spans)


#: The engines that find needles: one automaton pass (the ``fast`` extra), or a pass a needle.
ENGINES = ("ahocorasick", "python")
# Above this many needles the automaton's DFA form takes too much memory to build.
_DFA_LIMIT = 5000


def _automaton(
    needles: tuple[bytes, ...], engine: str | None
) -> tuple[str, Callable[[bytes], list[tuple[int, int, int]]] | None]:
    """The engine to use (``ERRKB_SCAN_ENGINE`` when not given) and its search function."""
    engine = engine or text("ERRKB_SCAN_ENGINE") or "auto"
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
    automaton = ahocorasick_rs.BytesAhoCorasick(list(needles), implementation=kind)
    return "ahocorasick", automaton.find_matches_as_indexes


def _blocks(
    stream: BinaryIO, progress: Callable[[int], None] | None
) -> Iterator[tuple[bytes, int]]:
    """Blocks of whole lines (the last may lack its newline), with the bytes read for each.

    The line a block cuts is finished from the stream, keeping at most :data:`MAX_LINE` more
    bytes of it (no more of a line is matched); the rest is read past, so a runaway line
    cannot make a block grow without bound.
    """
    read, readline = stream.read, stream.readline
    while True:
        chunk = read(BLOCK)
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
        if progress is not None:
            progress(size)
        yield chunk, size


class _Accumulator:
    def __init__(self) -> None:
        self.groups: dict[str, list[Any]] = {}

    def add(self, record: Record, line_number: int, text: str) -> None:
        group = self.groups.get(record.id)
        if group is None:
            self.groups[record.id] = [record, 1, [line_number], text[:500]]
            return
        group[1] += 1
        if len(group[2]) < FIRST_LINES:
            group[2].append(line_number)

    def result(self, lines: int, size: int) -> ScanResult:
        groups = [
            ScanGroup(record=r, count=c, first_lines=tuple(first), example=ex)
            for r, c, first, ex in self.groups.values()
        ]
        groups.sort(key=lambda g: (-g.count, g.first_lines[0], g.record.id))
        return ScanResult(groups=tuple(groups), lines=lines, bytes=size)


def _match_line(matcher: Matcher, text: str, line_number: int, acc: _Accumulator) -> None:
    cls, message = class_at(text)
    found = matcher.match(message, cls) or (matcher.match(text) if cls is not None else [])
    if found:
        # A line is one error: it counts for the best match (as `errkb explain` would rank it).
        acc.add(found[0].record, line_number, text)


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
    """
    from errkb.registry import default_registry

    registry = registry or default_registry()
    matcher = registry.matcher
    needles = _Needles(registry.refs, engine=engine)
    acc = _Accumulator()
    line_base, size = 0, 0
    for block, read in _blocks(stream, progress):
        size += read
        # Lines are counted once, in steps: up to each line found, then to the block's end.
        last, line_base_here = 0, line_base
        for start, end in needles.lines_in(block):
            line_base_here += block.count(b"\n", last, start)
            last = start
            text = block[start : min(end, start + MAX_LINE)].decode("utf-8", "replace").rstrip("\r")
            _match_line(matcher, text, line_base_here + 1, acc)
        line_base = line_base_here + block.count(b"\n", last)
        if not block.endswith(b"\n"):
            line_base += 1
    return acc.result(line_base, size)


def scan(
    lines: Iterable[str], *, registry: Registry | None = None, engine: str | None = None
) -> ScanResult:
    """Scan lines of text (an open text file, a list); the lookup API's form of ``errkb scan``.

    >>> result = scan(["INFO all good", "ValueError: No available memory for the cache blocks. "
    ...                "Try increasing `gpu_memory_utilization` when initializing the engine."])
    >>> [(g.record.id, g.count, g.first_lines) for g in result.groups]
    [('vllm-no-cache-blocks', 1, (2,))]
    """
    from errkb.registry import default_registry

    registry = registry or default_registry()
    matcher = registry.matcher
    needles = _Needles(registry.refs, engine=engine)
    acc = _Accumulator()
    count = size = 0
    for count, line in enumerate(lines, 1):
        raw = line.rstrip("\r\n")
        size += len(line)
        data = raw.encode("utf-8", "replace")
        if needles.lines_in(data):
            _match_line(matcher, raw[:MAX_LINE], count, acc)
    return acc.result(count, size)


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
