"""Large record packs: each record's matching fields in memory, its body read when needed.

A ``.jsonl`` pack can hold 100k records and hundreds of MB of JSON, most of it text that is
shown only for the few records that match. So the registry keeps a
:class:`~errkb.records.RecordRef` for each record of a pack (its id, pattern, class, tags, and
the place of its line), and reads the line again when the whole record is needed.

Checking every record's fields and reading every pattern still takes seconds, so what loading
a pack found is kept in a build cache: one JSON-lines file per pack in :func:`cache_dir`, used
while the pack's size, modification time and inode, and errkb's own code, are what they were.
The refs, the problems found, the literal analysis of each pattern and its index keys are all
in it; a registry of 100k records builds from it in two to three seconds instead of twenty.
Packs smaller than :data:`MIN_CACHED` bytes are read each time. ``ERRKB_NO_CACHE=1`` turns the cache off and
``ERRKB_CACHE_DIR`` moves it. The cache holds data only (JSON, never pickle).

Record files may ship an index, so that a fresh install is not a cold build: one for all the
files of a folder (:data:`FOLDER_INDEX`, :func:`write_folder_index`), as the wheel's mined packs
and hand-written records have, or ``PACK.jsonl.index`` beside one pack (:func:`write_index`).
The index holds the literal index's two levels and where each record is, so the files load as
one :class:`LazyPack`: the index is mapped at start (its keys sorted, found by bisection for a
process's first message, as whole tables from its second), and a record only when a message
meets its keys, when it is shown, or when something asks for every record; a listing beside the index
serves ``errkb list``. Loading tens of thousands of records so costs milliseconds, not a
second. An index is used while each file's size and a CRC of its first and last :data:`_EDGE`
bytes are what the index says, and errkb's code is the code that wrote it; else the files are
read as any other (through the build cache). A check that passed is not made again while the
files and the code keep their sizes, modification times and inodes (:func:`_checked`).
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import importlib
import json
import os
import sys
from itertools import pairwise
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb._env import flag, text
from errkb._version import __version__
from errkb.exceptions import RecordError, RegistryError
from errkb.records import (
    SITE_TAG,
    Listed,
    RecordRef,
    jsonl_values,
    open_pack,
    pack_value,
    record_from_dict,
)
from errkb.records._files import is_pack, json_items

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Sequence

    from errkb._scanplan import NeedlePlan
    from errkb.records import Record

    #: What a word meets in an index, as LazyPack._word gives it.
    _Met = tuple[frozenset[int], dict[int, tuple[int, ...]], frozenset[int], frozenset[int]]
    #: A key's number in each of a level's tables, or None when the table does not hold it.
    _Lookups = list[Callable[[str], int | None]]

__all__ = [
    "CACHE_FORMAT",
    "COMPILED_FILE",
    "FOLDER_INDEX",
    "INDEX_SUFFIX",
    "LISTING_SUFFIX",
    "MIN_CACHED",
    "LazyPack",
    "cache_dir",
    "lazy_folder",
    "lazy_pack",
    "load_pack",
    "read_releases",
    "records_patterns",
    "releases_path",
    "write_folder_index",
    "write_index",
    "write_records_index",
]

#: The version of the cache file's layout; a file of another format is rebuilt.
CACHE_FORMAT = "errkb.pack-cache/1"
#: Packs smaller than this many bytes load fast enough without a cache.
MIN_CACHED = 1 << 20
#: The version of a shipped index's layout: header, problems, literal table, record lines.
INDEX_FORMAT = "errkb.pack-index/9"  # JSON lines, then binary keys and numbers
#: The suffix of a pack's shipped index, added to the pack's file name.
INDEX_SUFFIX = ".index"
#: The name of the one index of every pack of a folder (the wheel's mined packs have one).
FOLDER_INDEX = "packs.index"
#: The suffix of an index's listing (ids, titles, tags; xz), added to the index's name.
LISTING_SUFFIX = ".listing.xz"
#: The hand-written records' patterns, compiled, beside their index (see write_records_index).
COMPILED_FILE = "patterns.compiled"
# A shipped index names its pack by size and a digest of this many bytes at each end: read-only
# data that ships together, where hashing all of a large pack at each start would cost more.
# A hand-written record's file (at most 14 KB) is hashed whole; the mined packs' 20 ends are
# 640 KB to read and hash at each start, not the 2.5 MB that 64 KB ends were.
_EDGE = 1 << 14

# The modules whose code decides what a cache holds: a change to any file of them (every
# module of a package) rebuilds it. The files are found from the modules, so none is missed.
_CODE = ("errkb.records", "errkb._patterns", "errkb._index", "errkb.packs")
# ...and modules of errkb's folder named by their file, not imported to find it: the hand-
# written records' index holds what _scanplan reads of each pattern (where it can first match
# a newline), and a first diagnosis does not import it.
_CODE_BESIDE = ("_scanplan.py",)


def cache_dir() -> Path | None:
    """Where pack caches are kept (``None`` when ``ERRKB_NO_CACHE`` is set).

    ``ERRKB_CACHE_DIR``, else ``$XDG_CACHE_HOME/errkb``, else ``~/.cache/errkb``.
    """
    if flag("ERRKB_NO_CACHE"):
        return None
    given = text("ERRKB_CACHE_DIR")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "errkb"


class _Pack:
    """One pack file as it was when it was loaded.

    ``where`` is its path as a string, what opening and naming it need; :attr:`path` is made
    from it when asked (an index of the hand-written records covers 241 files, and a first
    diagnosis opens two of them).
    """

    __slots__ = ("_path", "label", "stamp", "where")

    def __init__(self, path: Path | str, label: str, stamp: tuple[int, int, int]) -> None:
        self.where = os.fspath(path)
        self._path = path if isinstance(path, Path) else None
        self.label, self.stamp = label, stamp

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = Path(self.where)
        return self._path


class _Line:
    """Where a record's body is: a line of a pack, or (number 0) a whole ``.json`` file."""

    __slots__ = ("data", "length", "number", "offset", "pack")

    def __init__(self, pack: _Pack, number: int, offset: int, length: int) -> None:
        self.pack, self.number, self.offset, self.length = pack, number, offset, length
        # The line's JSON, when a ref was just made from it: the record is built from that
        # once, not read and parsed again (then it is dropped).
        self.data: Any = None

    @property
    def source(self) -> str:
        return f"{self.pack.label}:{self.number}" if self.number else self.pack.label

    def read(self, record_id: str) -> Record:
        data, self.data = self.data, None
        try:
            if data is None:
                # A .jsonl.gz pack seeks by decompressing up to the offset: correct, slower.
                with open_pack(self.pack.path) as file:
                    file.seek(self.offset)
                    data = pack_value(json.loads(file.read(self.length)))
            record, _ = record_from_dict(data, source=self.source, validate=False)
        except (OSError, EOFError, ValueError, RecursionError) as exc:
            record, reason = None, f" ({exc})"
        else:
            reason = ""
        if record is None or record.id != record_id:
            raise RegistryError(
                f"{self.source}: record {record_id!r} is no longer there{reason}; the pack "
                "changed since it was loaded, so load the registry again"
            )
        return record


def load_pack(path: Path, label: str, problems: list[RecordError]) -> Iterator[RecordRef]:
    """The records of one ``.jsonl`` pack as refs, from the build cache when it is current.

    A ``.jsonl.gz`` pack is read the same way, decompressed. Problems found in the pack are appended to ``problems`` (from the cache too, so a cached
    pack reports what a fresh read would).
    """
    try:
        st = path.stat()
    except OSError:
        return
    stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
    pack = _Pack(path, label, stamp)
    where = _cache_file(path) if st.st_size >= MIN_CACHED else None
    if where is not None:
        cached = _read_cache(where, pack, problems)
        if cached is not None:
            yield from cached
            return
    before = len(problems)
    refs = list(_read(pack, problems))
    if where is not None:
        _plan(refs)
        _write_cache(where, _header(pack), pack.label, refs, problems[before:])
    yield from refs


class LazyPack:
    """Packs loaded from a shipped index: refs made only for the records a message may match.

    One index may cover several packs (the folder index, :func:`write_folder_index`); its rows
    are their records in order. The index files each row at the literal index's two levels
    (see :func:`errkb._index.plan_keys`); :meth:`candidates` looks a message's keys up there,
    reads the few rows met at both, and keeps those whose required literals the message holds:
    the answer a :class:`~errkb._index.LiteralIndex` over the whole packs gives. :meth:`refs`
    reads them all; :meth:`listed` what a listing shows, from the index. Thread-safe: a ref is
    made once, under a lock.
    """

    def __init__(
        self,
        packs: Sequence[_Pack],
        table: dict[str, Any],
        lines: Sequence[Sequence[int]],
        runs: tuple[Sequence[int], Sequence[int]],
        rows: Any,
        seconds: Sequence[int],
        listing: Path | None = None,
        sets: Sequence[Any] | None = None,
        facts: Sequence[Any] | None = None,
        readings: _Texts | None = None,
    ) -> None:
        import threading

        from errkb._index import AFFIX, KINDS, MIN_LITERAL, word_keys

        self._packs = packs
        self._word_keys = word_keys  # imported once: an import statement costs a lookup
        # No key is shorter than this, and a shorter word gives itself as its affixes.
        self._shortest = min(AFFIX, MIN_LITERAL)
        # Pack, offset and length of each record's line: three columns. Its line number is
        # read from runs of rows whose numbers go up by one (:func:`_number_runs`).
        self._lines = lines
        self._runs = runs
        self._maps: list[Any] = [None] * len(packs)  # each pack, mapped on first read
        # The first level's tables, one a kind: key -> start * _SPAN + count of its rows in
        # ``rows``; the second level's: key -> its number (1 and on), and each row's own
        # second-level key by that number (0: it has none, the first level's are enough).
        self._first: list[_KeyTable] = [table[kind] for kind in KINDS[:3]]
        self._second: list[_KeyTable] = [table[kind] for kind in KINDS[3:]]
        self._seconds = seconds
        self._rows = rows
        # A message's word -> what it meets in the index, as read so far (see _Words).
        self._words = _Words(self._word)
        # Each row's literal sets, when the index holds them (the hand-written records'):
        # no pattern is read to tell what a row needs.
        self._sets = sets
        # ...and what scoring reads of each row's pattern (errkb._patterns.pattern_facts).
        self._facts = facts
        # ...and the whole pattern's literal sets and where it can first match a newline
        # (errkb._patterns.literal_sets, errkb._scanplan.first_newline): what a lookup's
        # searches and a scan's needles read of it.
        self._readings = readings
        # What a scan looks for in these records, when the index keeps it (the hand-written
        # records'): errkb._scanplan.NeedlePlan as a JSON text, parsed when a scan asks.
        self._needles: _Texts | None = table.get("needles")
        self._always: list[int] = table["always"]
        self._written: list[int] = table["written"]  # the rows not tagged mined
        self._sited: list[int] = table["sited"]  # ...of those, the rows with sitePatterns
        self._listing = listing  # the xz listing beside the index, if it ships one
        self._listed: list[Listed] | None = None
        self._keys: dict[str, int] | None = None  # id or slug -> row, made by find()
        self._made: dict[int, tuple[RecordRef, tuple[str, ...], tuple[tuple[str, ...], ...]]] = {}
        self._needs_of: dict[int, tuple[tuple[str, ...], tuple[tuple[str, ...], ...], Any]] = {}
        # What each row met so far needs of a message: its literals, and its any-of sets.
        self._checks: dict[int, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]] = {}
        # Each level's tables as key -> number functions (None: no such key). A process's
        # first message has its words' keys found by bisecting the index's sorted keys
        # (_KeyTable.get): a hook's one diagnosis builds no table of the tens of thousands of
        # keys of the mined packs, which costs about 10 ms. From the second message on, the
        # whole tables as dicts (_tables): a new word costs a few dict lookups.
        self._bisecting: tuple[_Lookups, _Lookups] = (
            [t.get for t in self._first],
            [t.get for t in self._second],
        )
        self._looked_up = False
        self._tables: tuple[_Lookups, _Lookups] | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._lines[0])

    def _where(self, row: int) -> tuple[int, int, int, int]:
        pack, offset, length = self._lines
        starts, numbers = self._runs
        run = bisect.bisect_right(starts, row) - 1
        return pack[row], numbers[run] + row - starts[run], offset[row], length[row]

    @property
    def label(self) -> str:
        """The label of the packs, as their records' sources begin (the first pack's)."""
        return self._packs[0].label

    def _needs(self, row: int) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...], Any]:
        """What a message must hold for the row's record to be a candidate, and its JSON.

        Read from the line's pattern alone: most rows a message's words reach are passed over
        without a record being made.
        """
        needs = self._needs_of.get(row)
        if needs is None:
            from errkb._index import requirements
            from errkb._patterns import head_pattern, literal_sets

            pack, _, offset, length = self._where(row)
            data = pack_value(json.loads(self._read(pack, offset, length)))
            pattern = data.get("messagePattern") if isinstance(data, dict) else None
            if not isinstance(pattern, str):  # the pack changed under the index
                raise RegistryError(f"{self.label}: the pack changed since it was loaded")
            sets = (
                self._sets[row]
                if self._sets is not None
                else literal_sets(head_pattern(pattern) or pattern)
            )
            needs = (*requirements(sets), (data, sets))
            self._needs_of[row] = needs
        return needs

    def _check(self, row: int) -> tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]:
        made = self._made.get(row)
        if made is not None:
            return made[1:]
        if self._sets is not None:
            from errkb._index import requirements

            return requirements(self._sets[row])
        return self._needs(row)[:2]

    def _entry(self, row: int) -> tuple[RecordRef, tuple[str, ...], tuple[tuple[str, ...], ...]]:
        made = self._made.get(row)
        if made is None:
            singles, alternatives, (data, sets) = self._needs(row)
            pack, number, offset, length = self._where(row)
            line = _Line(self._packs[pack], number, offset, length)
            ref = _written_ref(data, line, sets)
            if ref is not None:
                line.data = data
            if ref is not None and self._facts is not None:
                from errkb._patterns import know_facts

                know_facts(ref.message_pattern, self._facts[row])
            if ref is not None and self._readings is not None:
                _know_reading(ref.message_pattern, self._readings[row])
            if ref is None:
                record, _ = record_from_dict(data, source=line.source, validate=False)
                if record is None:  # the pack changed under the index: a pattern never runs
                    raise RegistryError(f"{line.source}: the pack changed since it was loaded")
                ref = RecordRef.of(record, body=line, keep=True)
                ref.sets = sets
            made = (ref, singles, alternatives)
            with self._lock:
                made = self._made.setdefault(row, made)
                self._needs_of.pop(row, None)  # the record holds what the JSON held
        return made

    def _read(self, pack: int, offset: int, length: int) -> bytes:
        if self._maps[pack] is None and self._packs[pack].stamp[0] <= _MAPPED_MIN:
            # A record file of its own (records/<library>/*.json): read, not mapped. A map
            # costs more system calls than the read, and holds a descriptor for the process.
            fd = os.open(self._packs[pack].where, os.O_RDONLY | getattr(os, "O_BINARY", 0))
            try:
                os.lseek(fd, offset, os.SEEK_SET)  # lseek and read: Windows has no pread
                return os.read(fd, length)
            finally:
                os.close(fd)
        if self._maps[pack] is None:
            import mmap

            with self._packs[pack].path.open("rb") as file, self._lock:
                if self._maps[pack] is None:
                    self._maps[pack] = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        return bytes(self._maps[pack][offset : offset + length])

    def _met(self, words: Iterable[str]) -> set[int]:
        """The rows a message's words meet at both levels (see :func:`errkb._index.plan_keys`).

        The rows filed under the first-level keys its words meet, less those whose own
        second-level key no word meets: maps and set operations in C, and a loop over the
        second-level keys met both ways. What a word meets is read from the index once
        (:class:`_Words`): a process's messages share most of their words, so a lookup reads
        nearly nothing. The rows checked for every message are added.
        """
        if self._looked_up and self._tables is None:  # a second message: more will come
            self._tables = (
                [t.as_dict().get for t in self._first],
                [t.as_dict().get for t in self._second],
            )
        self._looked_up = True
        met = list(filter(None, map(self._words.__getitem__, words)))
        kept = set(self._always)
        if not met:
            return kept
        kept.update(*map(_FREE, met))
        needed = _NONE.union(*map(_SECONDS, met))
        for _, by_key, keys, _ in met:
            if not needed.isdisjoint(keys):  # most: no set made
                for key in needed.intersection(keys):
                    kept.update(by_key[key])
        return kept

    def _word(self, word: str) -> _Met | None:
        """What ``word`` meets in the index, in four parts; None: nothing.

        The rows filed under the first-level keys it meets, in two parts: those met at the
        first level alone (no second-level key of their own), and the others by their
        second-level key, with those keys as a set. Last, the numbers of the second-level keys
        the word meets.
        """
        if len(word) < self._shortest:
            return None
        first, second = self._tables or self._bisecting
        all_rows, seconds = self._rows, self._seconds
        free: list[int] = []
        by_key: dict[int, list[int]] = {}
        met: list[int] = []
        for kind, kind_keys in enumerate(self._word_keys(word)):
            for key in kind_keys:
                number = first[kind](key)
                if number is not None:
                    start, count = divmod(number, _SPAN)
                    for row in all_rows[start : start + count]:
                        own = seconds[row]
                        if own:
                            by_key.setdefault(own, []).append(row)
                        else:
                            free.append(row)
                number = second[kind](key)
                if number is not None:
                    met.append(number)
        if not (free or by_key or met):
            return None
        rows = {key: tuple(found) for key, found in by_key.items()}
        return frozenset(free), rows, frozenset(rows), frozenset(met)

    def candidates(
        self,
        message: str,
        words: Iterable[str] | None = None,
        contains: Callable[[str], bool] | None = None,
    ) -> list[RecordRef]:
        """The refs of the records that may match ``message``, in pack order.

        ``words``: the message's words (:func:`errkb._index.words_of`, each once), and
        ``contains`` its :func:`errkb._index.literal_test`, when the caller has them.
        """
        if words is None or contains is None:
            from errkb._index import literal_test, words_of

            words = set(words_of(message)) if words is None else words
            contains = literal_test(message) if contains is None else contains
        rows = self._met(words)
        if not rows:
            return []
        checks = self._checks
        kept = []
        for row in rows:
            check = checks.get(row)
            if check is None:  # what the row needs, from its record, the index or its line
                check = checks[row] = self._check(row)
            singles, alternatives = check
            for literal in singles:  # a plain loop: most rows fail at their first literal
                if not contains(literal):
                    break
            else:
                for alternative in alternatives:  # a loop, not all() over a generator
                    if not any(map(contains, alternative)):
                        break
                else:
                    kept.append(row)
        kept.sort()
        entry = self._entry
        return [entry(row)[0] for row in kept]

    def ref_at(self, row: int) -> RecordRef:
        """The ref of the record on ``row`` (the index's order)."""
        return self._entry(row)[0]

    def needle_plan(self) -> NeedlePlan | None:
        """What a scan looks for in these records, as the index keeps it; None: not kept."""
        if self._needles is None or len(self._needles) != 1:
            return None
        from errkb._scanplan import NeedlePlan

        try:
            kept = json.loads(self._needles[0])
        except ValueError:
            return None
        return NeedlePlan.from_json(kept, len(self))

    def refs(self) -> list[RecordRef]:
        """Every ref of the packs, in order (read once, then kept)."""
        return [self._entry(row)[0] for row in range(len(self))]

    def written_refs(self) -> list[RecordRef]:
        """The refs of the records not tagged mined, in order."""
        return [self._entry(row)[0] for row in self._written]

    def written_count(self) -> int:
        """How many records are not tagged mined (none is read)."""
        return len(self._written)

    def sited_refs(self) -> list[RecordRef]:
        """The refs of the hand-written records with ``sitePatterns``: no other is read."""
        return [self._entry(row)[0] for row in self._sited]

    def find(self, key: str) -> RecordRef | None:
        """The ref of the record with this id, else of the first with this slug.

        Found in the listing: no other record is read.
        """
        if self._keys is None:
            keys: dict[str, int] = {}
            listed = self.listed()
            for row, item in enumerate(listed):
                keys.setdefault(item.slug, row)
            for row, item in enumerate(listed):
                keys[item.id] = row
            self._keys = keys
        found = self._keys.get(key)
        return None if found is None else self._entry(found)[0]

    def listed(self, *, mined: bool = True) -> list[Listed]:
        """What a listing shows of every record, in order, from the index's listing.

        No record is read (they are, when the index has no listing). ``mined=False`` leaves
        the mined records out, without reading the listing when all are mined.
        """
        if not mined and not self._written:
            return []
        if self._listed is None:
            if self._listing is None:
                listed = [ref.listed() for ref in self.refs()]
            else:
                import lzma

                with lzma.open(self._listing, "rt", encoding="utf-8") as file:
                    data = json.load(file)
                words = data["words"]
                tag_sets = [tuple(words[i] for i in t) for t in data["tags"]]
                listed = [
                    Listed(rid, slug, title, words[severity] if severity >= 0 else None,
                           words[library], tag_sets[tags])
                    for rid, slug, title, severity, library, tags in data["rows"]
                ]  # fmt: skip
            with self._lock:
                self._listed = self._listed or listed
        if mined:
            return self._listed
        return [self._listed[row] for row in self._written]


# A first-level table's value is start * _SPAN + count: where the key's rows are in the rows
# array, and how many there are. No key has that many rows.
_SPAN = 1 << 20


def lazy_pack(path: Path, label: str, problems: list[RecordError]) -> LazyPack | None:
    """The pack at ``path`` as a :class:`LazyPack`, when its shipped index is current.

    ``None`` when it has no index, or one that another pack or other code wrote: the pack is
    then read as usual (:func:`load_pack`). The index's problems are appended to ``problems``.
    """
    return _lazy(
        path.with_name(path.name + INDEX_SUFFIX), path.parent, {path.name: label}, problems
    )


def lazy_folder(
    folder: Path, label_of: Callable[[str], str], problems: list[RecordError]
) -> tuple[LazyPack | None, frozenset[str]]:
    """The packs of ``folder`` as one :class:`LazyPack`, from its current folder index.

    ``label_of`` gives a pack's label from its file name. Returns the loaded packs and the
    names of the pack files the index covers (none when there is no current index).
    """
    where = folder / FOLDER_INDEX
    if not where.is_file():
        return None, frozenset()
    try:
        with where.open("rb") as file:
            names = [entry[0] for entry in json.loads(file.readline())["packs"]]
    except (OSError, ValueError, TypeError, KeyError, IndexError):
        return None, frozenset()
    loaded = _lazy(where, folder, {name: label_of(name) for name in names}, problems)
    if loaded is None:
        return None, frozenset()
    compiled = folder / COMPILED_FILE
    if compiled.is_file():
        from errkb._patterns import use_compiled

        use_compiled(compiled)
    return loaded, frozenset(names)


def _lazy(
    where: Path, folder: Path, labels: dict[str, str], problems: list[RecordError]
) -> LazyPack | None:
    import mmap

    from errkb._index import KINDS

    try:
        packs = []
        base = os.fspath(folder)
        for name, label in labels.items():
            path = os.path.join(base, name)  # noqa: PTH118 - a hundred files: no pathlib
            st = os.stat(path)  # noqa: PTH116
            packs.append(_Pack(path, label, (st.st_size, st.st_mtime_ns, st.st_ino)))
        with where.open("rb") as file:
            head = file.readline()
            mark, newest = _check_mark(file.fileno(), packs)
            if mark not in _checked(where):
                if json.loads(head) != _index_header(packs, list(labels)):
                    return None
                _remember(where, mark, newest)
            found = [
                RecordError(packs[n].label + suffix, text, record_id=rid, field=field)
                for n, suffix, text, rid, field in json.loads(file.readline())
            ]
            table = json.loads(file.readline())
            # The rest: the tables' keys and numbers, rows and lines, binary. Mapped, not read:
            # a lookup touches a few pages of it (the mined packs': 1.4 MB).
            tail = file.tell()
            mapped = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        numbers = memoryview(mapped)[tail:]
        for kind in KINDS:
            (at, length), starts, values = table[kind]
            table[kind] = _KeyTable(
                mapped, tail + at, length, _ints(numbers, *starts), _ints(numbers, *values)
            )
        rows = _ints(numbers, *table["rows"])
        lines = tuple(_ints(numbers, *column) for column in (*table["lines"], table["second"]))
        runs = (_ints(numbers, *table["runs"][0]), _ints(numbers, *table["runs"][1]))
        readings = table.get("readings")
        if readings is not None:
            (at, length), starts = readings
            readings = _Texts(mapped, tail + at, length, _ints(numbers, *starts))
        if table.get("needles") is not None:
            (at, length), starts = table["needles"]
            table["needles"] = _Texts(mapped, tail + at, length, _ints(numbers, *starts))
    except (OSError, ValueError, TypeError, RecursionError):
        return None
    if len(lines) != 4 or len({len(column) for column in lines}) != 1:
        return None  # not four columns of one length: not an index this code wrote
    if not runs[0] or runs[0][0] != 0 or len(runs[0]) != len(runs[1]):
        return None
    problems.extend(found)
    listing = where.with_name(where.name + LISTING_SUFFIX)
    *where_lines, seconds = lines
    sets = table.get("sets")
    if sets is not None:
        if not isinstance(sets, list) or len(sets) != len(seconds):
            return None
        sets = [None if s is None else tuple(map(tuple, s)) for s in sets]
    facts = table.get("facts")
    if facts is not None and (not isinstance(facts, list) or len(facts) != len(seconds)):
        return None
    if readings is not None and len(readings) != len(seconds):
        return None
    return LazyPack(
        packs,
        table,
        where_lines,
        runs,
        rows,
        seconds,
        listing if listing.is_file() else None,
        sets,
        facts,
        readings,
    )


def write_index(path: Path, label: str | None = None) -> Path:
    """Write the index that ships beside the pack at ``path``; returns the index's path.

    The index holds the pack's problems, the literal index's table (each record filed under
    its keys) and where each record's line is, named by the pack's size and the digest of its
    ends instead of its inode and time, so it stays valid wherever the pack is installed.
    ``RegistryError`` if it cannot be written.
    """
    return _write_index(path.with_name(path.name + INDEX_SUFFIX), [path], label or str(path))


def write_folder_index(
    folder: Path, files: Sequence[Path] | None = None, *, sets: bool = False
) -> Path:
    """Write one index, and its listing, for record files of ``folder``.

    ``files``: the ``.jsonl`` packs and ``.json`` record files to cover (in or below
    ``folder``, named in the index by their path from it); by default every ``.jsonl`` pack
    directly in ``folder``. The index is ``folder/FOLDER_INDEX``; a lookup then costs the same
    whatever the number of files. ``sets``: keep each record's literal sets in the index too
    (a few hundred records: their patterns are then not read to start a scan). Returns its
    path.
    """
    covered = sorted(folder.glob("*.jsonl")) if files is None else list(files)
    if not covered:
        raise RegistryError(f"{folder}: no record file to index")
    return _write_index(
        folder / FOLDER_INDEX, covered, str(folder), listing=True, top=folder, sets=sets
    )


def write_records_index(folder: Path) -> Path:
    """Write the index of the hand-written records, ``folder/FOLDER_INDEX``.

    It covers every ``.json`` file in the sub-folders of ``folder``
    (``records/<library>/*.json``).

    Built by ``nox -s records``; with it the registry reads no record file at start, and a
    lookup reads only its candidates. Beside it goes :data:`COMPILED_FILE`: every record's
    pattern and its head compiled (:func:`errkb._patterns.write_compiled`), so that neither a
    diagnosis nor a scan compiles them, and those of the mined records the hand-written ones'
    own messages match (:func:`twin_patterns`; the mined folder's index must be current).
    Returns the index's path.
    """
    from errkb._patterns import write_compiled
    from errkb.records import load_paths

    files = sorted(folder.glob("*/*.json"))
    where = write_folder_index(folder, files, sets=True)
    records = load_paths(files, validate=False).records
    patterns = records_patterns(records) | twin_patterns(records, folder / MINED_FOLDER)
    write_compiled(folder / COMPILED_FILE, patterns)
    return where


#: A pack file at most this large (a hand-written record's ``.json``) is read, not mapped.
_MAPPED_MIN = 1 << 16

#: The folder of the mined packs, in the hand-written records' folder.
MINED_FOLDER = "mined"


def twin_patterns(records: Iterable[Record], mined: Path) -> set[str]:
    """The patterns of the mined records that a lookup of ``records``' own messages compiles.

    A hand-written record's message (its ``errorMessage`` and ``examples``) is what users hit
    most, and a lookup of it searches the mined records of the same raise sites as well (the
    twins its match folds in, see :mod:`errkb.match`), and siblings that share its words (vLLM's
    CPU worker's words for the seed's message, searched cut short and failing): compiled
    beforehand, a first diagnosis of the commonest errors compiles nothing. So each message is
    looked up in the mined records, and what the lookup compiled is taken (whole patterns,
    heads, the patterns a cut message is searched with): the other records it reaches are ten
    times as many and fail on their literals, unsearched. None when ``mined`` has no index; a
    stale one is an error (the file would silently lack them).
    """
    if not (mined / FOLDER_INDEX).is_file():
        return set()
    problems: list[RecordError] = []
    pack, _ = lazy_folder(mined, lambda name: name, problems)
    if pack is None:
        raise RegistryError(f"{mined / FOLDER_INDEX} is stale: write it first")
    found: set[str] = set()
    for record in records:
        for message in (record.error_message, *record.examples):
            if message:
                for ref in pack.candidates(message):
                    found |= _searched(ref, message)
    return found


def _searched(ref: RecordRef, message: str) -> set[str]:
    """What a lookup of ``message`` compiles for ``ref``, one of its candidates.

    As :meth:`errkb.match.Matcher.match` searches it (this module cannot ask it): the whole
    pattern when the message holds the literals a whole match needs
    (:func:`errkb._index.beyond_head`); when that search finds nothing and the pattern has a
    head, the head and the pattern a cut message is searched with (the whole pattern itself
    where the two are one).
    """
    import regex

    from errkb._index import beyond_head, holds
    from errkb._patterns import (
        PatternTimeoutError,
        compile_pattern,
        cut_pattern,
        head_regex,
        literal_sets,
        search,
    )

    pattern = ref.message_pattern
    found: set[str] = set()
    try:
        if holds(beyond_head(literal_sets(pattern), ref.literal_sets()), message):
            found.add(pattern)
            if search(compile_pattern(pattern), message) is not None:
                return found
    except (PatternTimeoutError, regex.error, RecursionError, OverflowError):
        return found
    head = head_regex(pattern)
    if head is not None:
        found |= {head, cut_pattern(pattern)}
    return found


def records_patterns(refs: Iterable[RecordRef | Record]) -> set[str]:
    """The patterns a lookup or a scan may compile for ``refs``.

    Each one's, its head's, and the one a message cut short is searched with.
    """
    from errkb._patterns import cut_pattern, head_regex

    found: set[str] = set()
    for ref in refs:
        found.add(ref.message_pattern)
        head = head_regex(ref.message_pattern)
        if head is not None:
            found.add(head)
            found.add(cut_pattern(ref.message_pattern))
    return found


def _write_index(
    where: Path,
    paths: list[Path],
    label: str,
    *,
    listing: bool = False,
    top: Path | None = None,
    sets: bool = False,
) -> Path:
    packs: list[_Pack] = []
    refs: list[RecordRef] = []
    problems: list[tuple[int, RecordError]] = []
    for path in paths:
        st = path.stat()
        name = label if top is None else f"{label}/{path.relative_to(top).as_posix()}"
        pack = _Pack(path, name, (st.st_size, st.st_mtime_ns, st.st_ino))
        packs.append(pack)
        found: list[RecordError] = []
        refs.extend(_read(pack, found))
        problems.extend((len(packs) - 1, p) for p in found)
    _plan(refs)
    filed, numbered, seconds, always = _file(refs)
    flat: list[int] = []
    numbers = _Numbers()
    table: dict[str, Any] = {}
    for kind, filed_rows in filed.items():
        codes = {}
        for key, rows in filed_rows.items():
            codes[key] = len(flat) * _SPAN + len(rows)
            flat.extend(rows)
        table[kind] = numbers.table(codes)
    for kind, codes in numbered.items():
        table[kind] = numbers.table(codes)
    table["always"] = always
    table["written"] = [row for row, ref in enumerate(refs) if "mined" not in ref.tags]
    table["sited"] = [
        row for row in table["written"] if SITE_TAG in refs[row].tags and not refs[row].retired
    ]
    number = {id(pack): n for n, pack in enumerate(packs)}
    # Each row's pack, offset and length: three columns, each as narrow as its largest value
    # allows (a byte for the pack, two for most lengths). Line numbers as runs (_number_runs).
    lines: list[list[int]] = [[], [], []]
    line_numbers = []
    for ref in refs:
        body: _Line = ref._body  # type: ignore[assignment]  # noqa: SLF001 - our own refs
        for column, value in zip(
            lines, (number[id(body.pack)], body.offset, body.length), strict=True
        ):
            column.append(value)
        line_numbers.append(body.number)
    bad = [
        [n, p.source[len(packs[n].label) :], p.problem, p.record_id, p.field]
        for n, p in problems
        if p.source.startswith(packs[n].label)
    ]
    table["rows"] = numbers.add(flat, 4)
    table["lines"] = [numbers.add(column, _width(column)) for column in lines]
    table["runs"] = [numbers.add(column, _width(column)) for column in _number_runs(line_numbers)]
    table["second"] = numbers.add(seconds, _width(seconds))
    if sets:
        from errkb._patterns import literal_sets, pattern_facts
        from errkb._scanplan import first_newline, plan_needles

        table["sets"] = [ref.literal_sets() for ref in refs]
        # A text of the binary tail, as the readings are: parsed only when a scan asks.
        plan = plan_needles((ref.message_pattern, ref.literal_sets(), ref.retired) for ref in refs)
        table["needles"] = numbers.texts([json.dumps(plan.to_json(), separators=(",", ":"))])
        table["facts"] = [pattern_facts(ref.message_pattern) for ref in refs]
        table["readings"] = numbers.texts(
            [
                json.dumps(
                    [literal_sets(ref.message_pattern), first_newline(ref.message_pattern)],
                    separators=(",", ":"),
                )
                for ref in refs
            ]
        )
    header = _index_header(packs, [p.path.relative_to(where.parent).as_posix() for p in packs])
    text = "".join(json.dumps(x, separators=(",", ":")) + "\n" for x in (header, bad, table))
    if not _replace(where, text.encode("utf-8") + numbers.data()):
        raise RegistryError(f"{where}: cannot write the index")
    if listing:
        _write_listing(where.with_name(where.name + LISTING_SUFFIX), refs)
    return where


def _file(
    refs: Sequence[RecordRef],
) -> tuple[dict[str, dict[str, list[int]]], dict[str, dict[str, int]], list[int], list[int]]:
    """The two levels of an index, from its rows' planned keys.

    Each row under its first-level keys, and its own second-level key as a number in a column
    of its own (0: none, when its second level only has its first level's keys again, see
    :func:`errkb._index.plan_keys`: it is met when the first is). Returns the first level's rows by kind and key, the second level's numbers by
    kind and key, each row's number, and the rows with no key (checked always).
    """
    from errkb._index import KINDS, SECOND

    filed: dict[str, dict[str, list[int]]] = {kind: {} for kind in KINDS[:3]}
    numbered: dict[str, dict[str, int]] = {kind: {} for kind in KINDS[3:]}
    seconds: list[int] = []
    always: list[int] = []
    for row, ref in enumerate(refs):
        keys = ref.keys or []
        if not keys:
            always.append(row)
        # In the keys' own order: the files come out the same on every build.
        first = [(kind, key) for kind, key in keys if not kind.endswith(SECOND)]
        own = [(k, key) for k, key in keys if k.endswith(SECOND) and (k[:-1], key) not in first]
        if len(own) > 1:  # plan_keys gives one; a row could not be told apart by the column
            raise RegistryError(f"{ref.source}: more than one second-level key: {own}")
        for kind, key in first:
            filed[kind].setdefault(key, []).append(row)
        second = 0
        for kind, key in own:
            second = numbered[kind].setdefault(key, 1 + sum(map(len, numbered.values())))
        seconds.append(second)
    return filed, numbered, seconds, always


def _write_listing(where: Path, refs: list[RecordRef]) -> None:
    """Write what a listing shows of each ref (xz JSON: repeated words kept once).

    xz, not gzip: the mined listing is 1.07 MB where gzip's best is 1.40 MB (the installed
    package's budget), and reads in about 0.09 s on a 2-core machine.
    """
    import lzma

    words: dict[str, int] = {}
    tag_sets: dict[tuple[int, ...], int] = {}

    def word(text: str) -> int:
        return words.setdefault(text, len(words))

    rows = []
    for ref in refs:
        tags = tuple(word(t) for t in ref.tags)
        severity = word(ref.severity) if ref.severity else -1
        tag_set = tag_sets.setdefault(tags, len(tag_sets))
        rows.append([ref.id, ref.slug, ref.title, severity, word(ref.library), tag_set])
    data = {"words": list(words), "tags": [list(t) for t in tag_sets], "rows": rows}
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    where.write_bytes(lzma.compress(text.encode("utf-8"), preset=9 | lzma.PRESET_EXTREME))
    where.chmod(0o644)


def _replace(where: Path, data: bytes) -> bool:
    """Write ``data`` to ``where`` whole: a reader never sees half a file.

    Shipped data, readable as the packs are. Returns whether it was written.
    """
    import tempfile

    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=where.parent, suffix=".tmp", delete=False) as out:
            out.write(data)
    except OSError:
        return False
    try:
        Path(out.name).chmod(0o644)
        Path(out.name).replace(where)
    except OSError:
        with contextlib.suppress(OSError):
            Path(out.name).unlink(missing_ok=True)
        return False
    return True


def releases_path(pack: Path) -> Path:
    """Where a pack's release list lies: ``torch.jsonl`` -> ``torch.releases`` beside it."""
    name = pack.name
    for suffix in (".jsonl.gz", ".jsonl"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return pack.with_name(name + ".releases")


def read_releases(folder: Path) -> dict[str, dict[str, Any]]:
    """The release lists of the packs in ``folder``: distribution -> its list.

    Each list (written by ``errkb mine --releases``) holds ``releases`` (every release of the
    package index in the mined range, oldest first), ``mined`` (those whose sites the records
    give) and ``unread`` (release -> why it was not read). A file that is not such a list is
    passed over: the lists only sharpen what a record's range says.
    """
    out: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.releases")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(data, dict) or data.get("schema") != "errkb.releases/1":
            continue
        lists = data.get("distributions")
        if not isinstance(lists, dict):
            continue
        for dist, entry in lists.items():
            if isinstance(entry, dict) and isinstance(entry.get("releases"), list):
                out[str(dist)] = entry
    return out


#: The parts of what a word meets (see LazyPack._word).
_FREE, _SECONDS = itemgetter(0), itemgetter(3)
_NONE: frozenset[int] = frozenset()


class _Words(dict[str, "_Met | None"]):
    """A message's word -> what it meets in an index (:meth:`LazyPack._word`), read once.

    A dict, so that a lookup maps a message's words to what they meet in C
    (:meth:`LazyPack._met`). Emptied when it holds :data:`_WORDS_KEPT` words: a long log's
    numbers and ids are words too.
    """

    __slots__ = ("_read",)

    def __init__(self, read: Callable[[str], _Met | None]) -> None:
        super().__init__()
        self._read = read

    def __missing__(self, word: str) -> _Met | None:
        met = self._read(word)
        if len(self) >= _WORDS_KEPT:
            self.clear()
        self[word] = met
        return met


#: How many words a pack keeps what they meet for: most meet nothing (a word and None,
#: about 100 bytes), a common one a few hundred rows.
_WORDS_KEPT = 20_000


class _KeyTable:
    """A key -> number table of an index, as :meth:`_Numbers.table` wrote it: keys sorted.

    A key is found by bisecting the keys' bytes, with no dict of the whole table built;
    :meth:`as_dict` builds it, for a process that looks up many messages.
    """

    __slots__ = ("_at", "_data", "_length", "_starts", "_values")

    def __init__(
        self, data: Any, at: int, length: int, starts: Sequence[int], values: Sequence[int]
    ) -> None:
        """The keys are ``length`` bytes at ``at`` of ``data`` (bytes, or a mapped file)."""
        if at < 0 or length < 0 or at + length > len(data):
            raise ValueError("the index's keys are cut short")
        # Each key ends a byte before the next starts, the last where one more would start.
        if len(starts) != len(values) + 1 or starts[-1] != (length + 1 if values else 0):
            raise ValueError("the index's keys and their numbers do not agree")
        self._data, self._at, self._length = data, at, length
        self._starts, self._values = starts, values

    def get(self, key: str) -> int | None:
        """The number of ``key``, or ``None`` when the table does not hold it."""
        target = key.encode("utf-8")
        data, at, starts = self._data, self._at, self._starts
        low, high = 0, len(self._values)
        while low < high:
            middle = (low + high) >> 1
            probe = data[at + starts[middle] : at + starts[middle + 1] - 1]
            if probe < target:
                low = middle + 1
            elif probe == target:
                return self._values[middle]
            else:
                high = middle
        return None

    def as_dict(self) -> dict[str, int]:
        """The whole table as a dict."""
        if not self._values:
            return {}
        keys = self._data[self._at : self._at + self._length].decode("utf-8").split("\n")
        return dict(zip(keys, list(self._values), strict=True))


class _Texts:
    """Texts of an index, one a row, as :meth:`_Numbers.texts` wrote them."""

    __slots__ = ("_at", "_data", "_starts")

    def __init__(self, data: Any, at: int, length: int, starts: Sequence[int]) -> None:
        if at < 0 or length < 0 or at + length > len(data):
            raise ValueError("the index's texts are cut short")
        if not starts or starts[-1] != length or any(a > b for a, b in pairwise(starts)):
            raise ValueError("the index's texts and where they start do not agree")
        self._data, self._at, self._starts = data, at, starts

    def __len__(self) -> int:
        return len(self._starts) - 1

    def __getitem__(self, row: int) -> bytes:
        text: bytes = self._data[self._at + self._starts[row] : self._at + self._starts[row + 1]]
        return text


class _Numbers:
    """The binary tail of an index: the tables' keys, and arrays of little-endian integers.

    Placed one after another; read back without parsing: slices of the mapped file's bytes,
    seen as integers.
    """

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._at = 0

    def add(self, values: list[int], size: int) -> list[int]:
        """Place ``values`` as ``size``-byte integers; returns where: [byte offset, count, size]."""
        import array

        packed = array.array(_TYPECODES[size], values)
        if sys.byteorder == "big":
            packed.byteswap()
        where = [self._at, len(values), size]
        self._parts.append(packed.tobytes())
        self._at += len(self._parts[-1])
        return where

    def table(self, table: dict[str, int]) -> list[Any]:
        """A key -> number table: its keys sorted, a line each, where each starts, its numbers.

        Returns where the three are. Read back as a :class:`_KeyTable`, which finds a key by
        bisecting the sorted keys without building a dict of tens of thousands of them.
        """
        if any("\n" in key for key in table):
            raise RegistryError("an index key holds a line break")  # keys are words: never
        encoded = sorted((key.encode("utf-8"), value) for key, value in table.items())
        starts, at = [], 0
        for key, _ in encoded:
            starts.append(at)
            at += len(key) + 1
        starts.append(at)  # where a key after the last would start: each key ends one before
        return [
            self.add_bytes(b"\n".join(key for key, _ in encoded)),
            self.add(starts, 4),
            self.add([value for _, value in encoded], 8),
        ]

    def texts(self, texts: list[str]) -> list[Any]:
        """Place ``texts`` one after another, and where each starts; returns where the two are.

        Read back as :class:`_Texts`, which decodes one item without reading the others.
        """
        encoded = [text.encode("utf-8") for text in texts]
        starts, at = [], 0
        for item in encoded:
            starts.append(at)
            at += len(item)
        starts.append(at)
        return [self.add_bytes(b"".join(encoded)), self.add(starts, 4)]

    def add_bytes(self, data: bytes) -> list[int]:
        """Place ``data`` as it is; returns where: [byte offset, length]."""
        self._parts.append(data)
        where = [self._at, len(data)]
        self._at += len(data)
        return where

    def data(self) -> bytes:
        return b"".join(self._parts)


#: The integers an index's binary tail holds, by their width: bytes and shorts unsigned (line
#: numbers, lengths, packs), ints and longs signed.
_TYPECODES = {1: "B", 2: "H", 4: "i", 8: "q"}


def _number_runs(numbers: Sequence[int]) -> tuple[list[int], list[int]]:
    """Line numbers as runs: each run's first row and its number, one more each row after it.

    A pack's records are its lines in order, so a folder index of eleven packs holds eleven
    runs, not a column of 64,000 numbers (128 KB of the installed package). A record file of
    its own is a run of one (its number is 0).
    """
    starts: list[int] = []
    firsts: list[int] = []
    for row, number in enumerate(numbers):
        if not starts or number != firsts[-1] + row - starts[-1]:
            starts.append(row)
            firsts.append(number)
    return starts, firsts


def _width(values: Sequence[int]) -> int:
    """The narrowest of :data:`_TYPECODES`' widths that holds every one of ``values``."""
    top, low = max(values, default=0), min(values, default=0)
    if low >= 0 and top < 1 << 8:
        return 1
    if low >= 0 and top < 1 << 16:
        return 2
    return 4 if -(1 << 31) <= low and top < 1 << 31 else 8


def _ints(data: bytes | memoryview, at: int, count: int, size: int) -> Sequence[int]:
    """The ``count`` integers of ``size`` bytes at byte ``at`` of an index's binary tail."""
    if at < 0 or count < 0 or size not in _TYPECODES or at + count * size > len(data):
        raise ValueError("the index's numbers are cut short")
    view = memoryview(data)[at : at + count * size]
    if sys.byteorder == "little" or size == 1:
        return view.cast(_TYPECODES[size])  # type: ignore[call-overload,no-any-return]  # no copy
    import array

    values = array.array(_TYPECODES[size], view)
    values.byteswap()
    return values


def _plan(refs: list[RecordRef]) -> None:
    """Give each ref its index keys, planned over the whole pack."""
    from errkb._index import plan_keys

    for ref, keys in zip(refs, plan_keys([r.key_sets() for r in refs]), strict=True):
        ref.keys = keys
        ref.literal_sets()  # read now: the cache keeps the substring tests beside the keys


def _read(pack: _Pack, problems: list[RecordError]) -> Iterator[RecordRef]:
    """Every valid record of a pack, checked as it is read, as a ref to its line.

    A ``.json`` record file (one record, an object) is one line, number 0: the whole file.
    """
    for data, number, offset, length in _values(pack, problems):
        line = _Line(pack, number, offset, length)
        record, found = record_from_dict(data, source=line.source, validate=False)
        problems.extend(found)
        if record is not None:
            yield RecordRef.of(record, body=line)


def _values(pack: _Pack, problems: list[RecordError]) -> Iterator[tuple[Any, int, int, int]]:
    """The JSON values of a pack's lines, or of a ``.json`` record file (whole: number 0)."""
    if is_pack(pack.path):
        yield from jsonl_values(pack.path, pack.label, problems)
        return
    for data, where in json_items(pack.path, pack.label, problems):
        if where != pack.label:  # a list of records: each is not a span of its own
            raise RegistryError(f"{pack.label}: a list of records cannot be indexed")
        yield data, 0, 0, pack.stamp[0]


# A cached ref, in this order: line number, offset, length, then the RecordRef fields.
_FIELDS = (
    "id",
    "slug",
    "title",
    "severity",
    "repo",
    "message_pattern",
    "error_class",
    "file_path",
    "retired",
    "variant_of",
    "tags",
    "error_classes",
    "sets",
    "keys",
)


def _ref(pack: _Pack, row: list[Any]) -> RecordRef:
    (number, offset, length, rid, slug, title, severity, repo, pattern, error_class, file_path,
     retired, variant_of, tags, error_classes, sets, keys) = row  # fmt: skip
    # Fields that many records share are kept once (JSON gives each its own copy).
    return RecordRef(
        id=rid,
        slug=slug,
        title=title,
        severity=severity and _intern(severity),
        repo=repo and _intern(repo),
        message_pattern=pattern,
        error_class=error_class and _intern(error_class),
        file_path=file_path and _intern(file_path),
        retired=retired,
        variant_of=variant_of,
        tags=tuple(map(_intern, tags)),
        error_classes=tuple(map(_intern, error_classes)),
        sets=None if sets is None else tuple(map(tuple, sets)),
        keys=[(_intern(kind), text) for kind, text in keys],
        body=_Line(pack, number, offset, length),
    )


_intern = sys.intern


def _know_reading(pattern: str, text: bytes) -> None:
    """Tell what the index read of ``pattern``: ``[literal sets, first newline]`` in JSON."""
    try:
        reading = json.loads(text)
    except ValueError:
        return  # not what this code writes: both are read from the pattern
    if isinstance(reading, list) and len(reading) == 2:
        from errkb._patterns import know_newline, know_sets

        know_sets(pattern, reading[0])
        know_newline(pattern, reading[1])


def _written_ref(data: dict[str, Any], body: _Line, sets: Any) -> RecordRef | None:
    """The ref of a hand-written record straight from its JSON, its body read when needed.

    A record of an index was checked when the index was built; what a ref holds is read from
    its fields (by the schema's own key for each, :data:`errkb.records.JSON_KEYS`) without
    building the whole record, which most refs a lookup or a scan makes never need. None for a
    mined record (its repository may be implied by its versions) or a field of the wrong kind:
    the whole record is built then, as before.
    """
    from errkb.records import JSON_KEYS

    get = data.get
    tags, classes = get("tags") or [], get(JSON_KEYS["error_classes"]) or []
    if not isinstance(tags, list) or "mined" in tags or not isinstance(classes, list):
        return None
    texts = {
        name: get(JSON_KEYS[name])
        for name in (
            "id", "slug", "title", "severity", "repo", "message_pattern", "error_class",
            "file_path", "variant_of",
        )
    }  # fmt: skip
    if not all(v is None or isinstance(v, str) for v in texts.values()):
        return None
    if not (texts["id"] and texts["slug"] and texts["message_pattern"]):
        return None
    if not all(isinstance(t, str) for t in (*tags, *classes)):
        return None
    retired = get(JSON_KEYS["retired"], False)
    if not isinstance(retired, bool):
        return None
    ref = RecordRef(
        **texts,  # type: ignore[arg-type]
        retired=retired,
        tags=tuple(tags),
        error_classes=tuple(classes),
        body=body,
    )
    ref.sets = sets
    return ref


def _row(ref: RecordRef) -> list[Any]:
    line: _Line = ref._body  # type: ignore[assignment]  # noqa: SLF001 - our own refs
    return [line.number, line.offset, line.length, *(getattr(ref, f) for f in _FIELDS)]


def _code_files() -> list[Path]:
    """The source files of the :data:`_CODE` modules, sorted: a package's are all its modules."""
    files: set[Path] = set()
    for name in _CODE:
        module = importlib.import_module(name)
        folders = getattr(module, "__path__", None)
        if folders is not None:
            files.update(path for folder in folders for path in Path(folder).rglob("*.py"))
        elif module.__file__:
            files.add(Path(module.__file__))
    files.update(Path(__file__).with_name(name) for name in _CODE_BESIDE)
    return sorted(files)


@functools.cache
def _code_stamp() -> str:
    # A CRC of the code, not a cryptographic digest: it tells a change (not an attack), and
    # hashlib's import alone would cost a first diagnosis milliseconds.
    import zlib

    digest = zlib.crc32(__version__.encode())
    for path in _code_files():
        # Each file's name marks where it starts: code moved across two files changes the stamp.
        digest = zlib.crc32(f"\0{path.name}\0".encode(), digest)
        digest = zlib.crc32(path.read_bytes(), digest)
    return f"{digest:08x}"


def _cache_file(path: Path) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    import hashlib

    key = hashlib.sha256(os.fsencode(path.resolve())).hexdigest()[:32]
    return folder / "packs" / f"{key}.json"


def _header(pack: _Pack) -> dict[str, object]:
    return {
        "format": CACHE_FORMAT,
        "code": _code_stamp(),
        "path": str(pack.path.resolve()),
        "stamp": list(pack.stamp),
    }


def _index_header(packs: Sequence[_Pack], names: list[str]) -> dict[str, object]:
    """The header of a shipped index: each pack by its name, size and the digest of its ends.

    A name is the pack's path from the index's folder.
    """
    import zlib

    named = []
    for pack, name in zip(packs, names, strict=True):
        # os.open and os.read, not open(): a file object costs three more system calls
        # (fstat, the terminal check, the position) for each of the hand-written records' 230.
        fd = os.open(pack.where, os.O_RDONLY | getattr(os, "O_BINARY", 0))
        try:
            digest = zlib.crc32(os.read(fd, _EDGE))
            if pack.stamp[0] > _EDGE:  # lseek and read: Windows has no pread
                os.lseek(fd, max(_EDGE, pack.stamp[0] - _EDGE), os.SEEK_SET)
                digest = zlib.crc32(os.read(fd, _EDGE), digest)
        finally:
            os.close(fd)
        named.append([name, pack.stamp[0], digest])
    return {"format": INDEX_FORMAT, "code": _code_stamp(), "packs": named}


# An index whose files were checked (sizes and CRCs, above) is not checked again while they and
# errkb's code are as they were: by size, modification time and inode, as Python trusts a .pyc
# while its source's stay. The marks are kept beside this module's bytecode (errkb._beside),
# as attrs's compiled methods are: 241 files read and hashed at every start become 241 stats,
# which the index's loading makes anyway.
_CHECKED_FORMAT = 1
_CHECKED_MAX = 64  # indexes remembered
_checked_marks: dict[str, list[str]] | None = None  # index path -> its marks, read once


def _check_mark(fd: int, packs: Sequence[_Pack]) -> tuple[str, int]:
    """What a check of an index (open as ``fd``) and its ``packs`` holds for, and their newest time.

    The mark is made of their stats and the code's; the time is the latest modification among
    the index and the packs, in nanoseconds.
    """
    import zlib

    st = os.fstat(fd)
    digest = zlib.crc32(repr([st.st_size, st.st_mtime_ns, st.st_ino, _code_marks()]).encode())
    names = [(os.path.basename(p.where), p.stamp) for p in packs]  # noqa: PTH119 - see _Pack
    digest = zlib.crc32(repr(names).encode(), digest)
    newest = max([st.st_mtime_ns, *(p.stamp[1] for p in packs)])
    return f"{INDEX_FORMAT} {len(packs)} {digest:08x}", newest


@functools.cache
def _code_marks() -> list[tuple[str, int, int]]:
    marks = []
    for path in _code_files():
        st = path.stat()
        marks.append((str(path), st.st_size, st.st_mtime_ns))
    return marks


def _checked_path() -> Path:
    from errkb import _beside

    return _beside.path(__file__, "index-checks.json")


def _checked(where: Path) -> list[str]:
    """The marks under which the index at ``where`` was found current (none: check it)."""
    global _checked_marks  # noqa: PLW0603 - read once a process
    if _checked_marks is None:
        try:
            data = json.loads(_checked_path().read_bytes())
            marks = data["indexes"] if data.get("format") == _CHECKED_FORMAT else {}
        except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
            marks = {}
        _checked_marks = marks if isinstance(marks, dict) else {}
    found = _checked_marks.get(str(where))
    return found if isinstance(found, list) else []


def _remember(where: Path, mark: str, newest: int) -> None:
    """Keep ``mark`` for the index at ``where``, found current; a failure to write costs nothing.

    Not while a file is newer than :data:`errkb._beside.SETTLED_NS` (``newest``, ns): a file
    system keeps times to a clock tick, so a file rewritten within one with the same size would
    keep its mark. Written as :mod:`errkb._beside` writes; an index keeps its last few marks (a
    checkout and an install side by side).
    """
    import time

    from errkb import _beside

    if sys.dont_write_bytecode or time.time_ns() - newest < _beside.SETTLED_NS:
        return
    marks = _checked_marks if _checked_marks is not None else {}
    if len(marks) >= _CHECKED_MAX and str(where) not in marks:
        marks.clear()  # many indexes (tests' folders): start again rather than grow
    kept = [m for m in marks.get(str(where), []) if m != mark][-3:]
    marks[str(where)] = [*kept, mark]
    _beside.write(
        _checked_path(), json.dumps({"format": _CHECKED_FORMAT, "indexes": marks}).encode()
    )


def _read_cache(where: Path, pack: _Pack, problems: list[RecordError]) -> list[RecordRef] | None:
    """The refs of a current cache file (its problems appended); ``None`` when there is none.

    The file is JSON lines: a header, the pack's problems, then one line per ref, read one at a
    time so that loading a large pack never holds its whole cache in memory.
    """
    try:
        with where.open("rb") as file:
            if json.loads(file.readline()) != _header(pack):
                return None
            found = [
                RecordError(pack.label + suffix, text, record_id=rid, field=field)
                for suffix, text, rid, field in json.loads(file.readline())
            ]
            refs = [_ref(pack, json.loads(line)) for line in file]
    except (OSError, ValueError, TypeError, RecursionError):
        return None  # missing, stale or damaged: the pack is read again
    problems.extend(found)
    return refs


def _write_cache(
    where: Path,
    header: dict[str, object],
    label: str,
    refs: list[RecordRef],
    problems: list[RecordError],
) -> bool:
    """Write a cache file; one that cannot be written is skipped (it only saves time).

    Returns whether it was written.
    """
    import tempfile

    found = [
        [p.source[len(label) :], p.problem, p.record_id, p.field]
        for p in problems
        if p.source.startswith(label)
    ]
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        out = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed, then moved or removed
            "w", dir=where.parent, suffix=".tmp", delete=False, encoding="utf-8"
        )
    except OSError:
        return False
    try:
        with out:
            out.write(json.dumps(header) + "\n")
            out.write(json.dumps(found) + "\n")
            for ref in refs:
                out.write(json.dumps(_row(ref), separators=(",", ":")) + "\n")
        # Moved into place whole, so a reader never sees half a file.
        Path(out.name).replace(where)
    except OSError:
        Path(out.name).unlink(missing_ok=True)
        return False
    return True
