"""Large record packs: each record's matching fields in memory, its body read when needed.

A ``.jsonl`` pack can hold 100k records and hundreds of MB of JSON, most of it text that is
shown only for the few records that match. So the registry keeps a
:class:`~errkb.records.RecordRef` for each record of a pack (its id, pattern, class, tags, and
the place of its line), and reads the line again when the whole record is needed.

Checking every record's fields and reading every pattern still takes seconds, so what loading
a pack found is kept in a build cache: one JSON-lines file per pack in :func:`cache_dir`, used
while the pack's size, modification time and inode, and errkb's own code, are what they were.
The refs, the problems found, the literal analysis of each pattern and its index keys are all
in it; a registry of 100k records builds from it in two to three seconds instead of twenty. Packs smaller than
:data:`MIN_CACHED` bytes are read each time. ``ERRKB_NO_CACHE=1`` turns the cache off and
``ERRKB_CACHE_DIR`` moves it. The cache holds data only (JSON, never pickle).

A pack may ship its cache beside it: ``PACK.jsonl.index`` (:func:`write_index`), as the mined
packs of the wheel do, so that a fresh install is not a cold build. A shipped index is used
while the pack's size and a digest of its first and last :data:`_EDGE` bytes are what the
index says, and errkb's code is the code that wrote it; else the build cache takes over.
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb._env import flag, text
from errkb._version import __version__
from errkb.exceptions import RecordError, RegistryError
from errkb.records import RecordRef, jsonl_values, record_from_dict

if TYPE_CHECKING:
    from collections.abc import Iterator

    from errkb.records import Record

__all__ = ["CACHE_FORMAT", "INDEX_SUFFIX", "MIN_CACHED", "cache_dir", "load_pack", "write_index"]

#: The version of the cache file's layout; a file of another format is rebuilt.
CACHE_FORMAT = "errkb.pack-cache/1"
#: Packs smaller than this many bytes load fast enough without a cache.
MIN_CACHED = 1 << 20
#: The suffix of a pack's shipped index, added to the pack's file name.
INDEX_SUFFIX = ".index"
# A shipped index names its pack by size and a digest of this many bytes at each end: read-only
# data that ships together, where hashing all of a large pack at each start would cost more.
_EDGE = 1 << 16

# The modules whose code decides what a cache holds: a change to any file of them (every
# module of a package) rebuilds it. The files are found from the modules, so none is missed.
_CODE = ("errkb.records", "errkb._patterns", "errkb._index", "errkb.packs")


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
    """One pack file as it was when it was loaded."""

    __slots__ = ("label", "path", "stamp")

    def __init__(self, path: Path, label: str, stamp: tuple[int, int, int]) -> None:
        self.path, self.label, self.stamp = path, label, stamp


class _Line:
    """Where a record's body is: a line of a pack. Calling it reads the whole record."""

    __slots__ = ("length", "number", "offset", "pack")

    def __init__(self, pack: _Pack, number: int, offset: int, length: int) -> None:
        self.pack, self.number, self.offset, self.length = pack, number, offset, length

    @property
    def source(self) -> str:
        return f"{self.pack.label}:{self.number}"

    def read(self, record_id: str) -> Record:
        try:
            with self.pack.path.open("rb") as file:
                file.seek(self.offset)
                raw = file.read(self.length)
            record, _ = record_from_dict(json.loads(raw), source=self.source, validate=False)
        except (OSError, ValueError, RecursionError) as exc:
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

    Problems found in the pack are appended to ``problems`` (from the cache too, so a cached
    pack reports what a fresh read would).
    """
    try:
        st = path.stat()
    except OSError:
        return
    stamp = (st.st_size, st.st_mtime_ns, st.st_ino)
    pack = _Pack(path, label, stamp)
    shipped = path.with_name(path.name + INDEX_SUFFIX)
    if shipped.is_file():
        cached = _read_cache(shipped, pack, problems, header=_index_header(pack))
        if cached is not None:
            yield from cached
            return
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


def write_index(path: Path, label: str | None = None) -> Path:
    """Write the index that ships beside the pack at ``path``; returns the index's path.

    The index holds what the build cache holds (refs, problems, literal analysis, index keys),
    named by the pack's size and the digest of its ends instead of its inode and time, so it
    stays valid wherever the pack is installed. ``RegistryError`` if it cannot be written.
    """
    label = label or str(path)
    st = path.stat()
    pack = _Pack(path, label, (st.st_size, st.st_mtime_ns, st.st_ino))
    problems: list[RecordError] = []
    refs = list(_read(pack, problems))
    _plan(refs)
    where = path.with_name(path.name + INDEX_SUFFIX)
    if not _write_cache(where, _index_header(pack), label, refs, problems):
        raise RegistryError(f"{where}: cannot write the pack's index")
    return where


def _plan(refs: list[RecordRef]) -> None:
    """Give each ref its index keys, planned over the whole pack."""
    from errkb._index import plan_keys

    for ref, keys in zip(refs, plan_keys([r.literal_sets() for r in refs]), strict=True):
        ref.keys = keys


def _read(pack: _Pack, problems: list[RecordError]) -> Iterator[RecordRef]:
    """Every valid record of a pack, checked as it is read, as a ref to its line."""
    for data, number, offset, length in jsonl_values(pack.path, pack.label, problems):
        line = _Line(pack, number, offset, length)
        record, found = record_from_dict(data, source=line.source, validate=False)
        problems.extend(found)
        if record is not None:
            yield RecordRef.of(record, body=line)


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
    return sorted(files)


@functools.cache
def _code_stamp() -> str:
    digest = hashlib.sha256(__version__.encode())
    for path in _code_files():
        # Each file's name marks where it starts: code moved across two files changes the stamp.
        digest.update(f"\0{path.name}\0".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _cache_file(path: Path) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    key = hashlib.sha256(os.fsencode(path.resolve())).hexdigest()[:32]
    return folder / "packs" / f"{key}.json"


def _header(pack: _Pack) -> dict[str, object]:
    return {
        "format": CACHE_FORMAT,
        "code": _code_stamp(),
        "path": str(pack.path.resolve()),
        "stamp": list(pack.stamp),
    }


def _index_header(pack: _Pack) -> dict[str, object]:
    """The header of a shipped index: the pack by its size and the digest of its ends."""
    digest = hashlib.sha256()
    with pack.path.open("rb") as file:
        digest.update(file.read(_EDGE))
        if pack.stamp[0] > _EDGE:
            file.seek(max(_EDGE, pack.stamp[0] - _EDGE))
            digest.update(file.read(_EDGE))
    return {
        "format": CACHE_FORMAT,
        "code": _code_stamp(),
        "size": pack.stamp[0],
        "edges": digest.hexdigest(),
    }


def _read_cache(
    where: Path,
    pack: _Pack,
    problems: list[RecordError],
    *,
    header: dict[str, object] | None = None,
) -> list[RecordRef] | None:
    """The refs of a current cache file (its problems appended); ``None`` when there is none.

    The file is JSON lines: a header, the pack's problems, then one line per ref, read one at a
    time so that loading a large pack never holds its whole cache in memory.
    """
    try:
        with where.open("rb") as file:
            if json.loads(file.readline()) != (header or _header(pack)):
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
