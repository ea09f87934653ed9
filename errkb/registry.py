"""The registry: every record errkb knows, from the built-in knowledge base and beyond.

Sources, in order (an id already taken by an earlier source is reported, and the earlier record
kept): the records shipped with errkb, paths given by the caller (``errkb --records PATH``),
paths in ``ERRKB_RECORDS`` (``os.pathsep``-separated), then record packs that installed
distributions declare in the entry-point group ``errkb.records``.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, overload

from errkb._env import paths as paths_from_env
from errkb._gc import paused
from errkb.exceptions import RecordError, RegistryError
from errkb.records import Record, RecordRef, load_refs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

    from errkb._scanplan import NeedlePlan
    from errkb.match import LazyRefs, Matcher
    from errkb.records import Listed

__all__ = [
    "ENTRY_POINT_GROUP",
    "Registry",
    "builtin_records_dir",
    "default_registry",
    "shipped_releases",
]

#: Up to this many records (and no pack), the matcher searches each without an index.
_UNINDEXED = 4

ENTRY_POINT_GROUP = "errkb.records"


def builtin_records_dir() -> Path:
    """Where the shipped records are: inside the wheel, or at the top of a source checkout."""
    here = Path(__file__).resolve().parent
    shipped = here / "_records"
    return shipped if shipped.is_dir() else here.parent / "records"


class Registry:
    """An immutable collection of records, with lookup by id, slug and tag.

    The registry keeps a :class:`~errkb.records.RecordRef` for each record: the fields that
    matching and listing need. A record of a large ``.jsonl`` pack is read whole only when it
    is asked for (:meth:`get`, a match, :attr:`records`), so 100k records fit in little memory.

    >>> reg = Registry.from_paths([])  # doctest: +SKIP
    >>> reg.get("vllm-kv-cache-max-seq-len").severity  # doctest: +SKIP
    'critical'
    """

    def __init__(
        self,
        records: Iterable[Record | RecordRef],
        problems: Iterable[RecordError] = (),
        *,
        lazy: Iterable[LazyRefs] = (),
    ) -> None:
        self._eager: tuple[RecordRef, ...] = tuple(
            r if isinstance(r, RecordRef) else RecordRef.of(r) for r in records
        )
        self.problems: tuple[RecordError, ...] = tuple(problems)
        # Packs loaded from a shipped index: their refs are made when a message needs them, or
        # all at once when something asks for every ref (refs, get, tags).
        self._lazy = tuple(lazy)
        self._refs: tuple[RecordRef, ...] | None = None if self._lazy else self._eager
        self._by_id: dict[str, RecordRef] = {}
        self._by_slug: dict[str, RecordRef] = {}
        self._index(self._eager)
        self._matcher: Matcher | None = None
        self._written: Registry | None = None
        self._listed: tuple[Listed, ...] | None = None
        self._lock = threading.Lock()

    def _index(self, refs: Iterable[RecordRef]) -> None:
        for r in refs:
            self._by_id.setdefault(r.id, r)
            self._by_slug.setdefault(r.slug, r)

    @property
    def refs(self) -> tuple[RecordRef, ...]:
        """Every record's ref, in load order (the refs of a lazily loaded pack are made now)."""
        if self._refs is None:
            with self._lock:
                if self._refs is None:
                    lazy = [r for pack in self._lazy for r in pack.refs()]
                    self._index(lazy)
                    self._refs = (*self._eager, *lazy)
        return self._refs

    def __len__(self) -> int:
        return len(self._eager) + sum(len(pack) for pack in self._lazy)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._find(key) is not None

    def _find(self, key: str) -> RecordRef | None:
        """The ref with this id, else the first with this slug.

        Eager refs first, then each lazily loaded pack from its listing (no other record of it
        is read).
        """
        ref = self._by_id.get(key) or self._by_slug.get(key)
        if ref is None:
            found = (pack.find(key) for pack in self._lazy)
            ref = next((r for r in found if r is not None), None)
        return ref

    @property
    def records(self) -> Sequence[Record]:
        """Every record, whole, in load order; each is read from its pack when first reached."""
        return _Records(self.refs)

    def get(self, key: str) -> Record:
        """The record with this id, else the first with this slug; :class:`RegistryError` if none."""
        ref = self._find(key)
        if ref is None:
            raise RegistryError(f"no record with id or slug {key!r}")
        return ref.load()

    def with_tag(self, tag: str) -> tuple[Record, ...]:
        """The records carrying ``tag`` (case-insensitive)."""
        return tuple(r.load() for r in self.refs_with_tag(tag))

    def refs_with_tag(self, tag: str) -> tuple[RecordRef, ...]:
        """The refs of the records carrying ``tag`` (case-insensitive); no body is read."""
        want = tag.lower()
        return tuple(r for r in self.refs if want in (t.lower() for t in r.tags))

    def listed(
        self, *, tag: str | None = None, library: str | None = None, mined: bool = True
    ) -> tuple[Listed, ...]:
        """What a listing shows of the records, in load order; no record is read.

        The packs loaded from an index list from it. ``tag`` (case-insensitive) and ``library``
        narrow it; ``mined=False`` leaves the mined records out.
        """
        if mined:
            with self._lock:
                if self._listed is None:
                    lazy = [item for pack in self._lazy for item in pack.listed()]
                    self._listed = (*(r.listed() for r in self._eager), *lazy)
            found: Iterable[Listed] = self._listed
        else:
            found = (
                *(r.listed() for r in self._eager if "mined" not in r.tags),
                *(item for pack in self._lazy for item in pack.listed(mined=False)),
            )
        if library is not None:
            found = (item for item in found if item.library == library)
        if tag is not None:
            want = tag.lower()
            found = (item for item in found if want in (t.lower() for t in item.tags))
        return tuple(found)

    def hand_written(self) -> Registry:
        """These records without the ones mined from source (tag ``mined``), made once.

        What ``errkb scan`` looks for in a log: tens of thousands of mined messages, warnings
        and log lines among them, would turn a scan into a listing of the log. The mined
        records explain one failure (``explain``, the hook), where they rank below these.
        """
        with self._lock:
            if self._written is None:
                kept = [r for r in self._eager if "mined" not in r.tags]
                counts = [(pack, pack.written_count()) for pack in self._lazy]
                if len(kept) == len(self._eager) and all(n == len(p) for p, n in counts):
                    self._written = self  # nothing mined here
                elif all(n in (0, len(pack)) for pack, n in counts):
                    # Each pack is all hand-written or all mined (the shipped ones are): the
                    # hand-written ones are kept whole, with their index.
                    written = [pack for pack, n in counts if n]
                    self._written = Registry(kept, self.problems, lazy=written)
                else:
                    kept += [r for pack in self._lazy for r in pack.written_refs()]
                    self._written = Registry(kept, self.problems)
            return self._written

    def needle_plan(self) -> tuple[NeedlePlan, Callable[[int], RecordRef]] | None:
        """What a scan looks for in these records, as their index keeps it, and their refs by row.

        None unless the records are exactly one index's (the hand-written records' are: see
        :meth:`hand_written`) and it keeps a plan.
        """
        if self._eager or len(self._lazy) != 1:
            return None
        [pack] = self._lazy
        plan = pack.needle_plan()
        return None if plan is None else (plan, pack.ref_at)

    @property
    def matcher(self) -> Matcher:
        """The matcher over these records, built once on first use."""
        if self._matcher is not None:  # built: no lock to take on every lookup
            return self._matcher
        with self._lock:
            if self._matcher is None:
                from errkb.match import Matcher

                # A few records are searched one by one: an index of them costs more to build
                # than it saves (a scan's report explains each group with its record alone).
                indexed = bool(self._lazy) or len(self._eager) > _UNINDEXED
                with paused():
                    self._matcher = Matcher(self._eager, lazy=self._lazy, indexed=indexed)
            return self._matcher

    @classmethod
    def from_paths(
        cls,
        paths: Sequence[str | os.PathLike[str]] = (),
        *,
        builtin: bool = True,
        env: bool = True,
        entry_points: bool = True,
        strict: bool = False,
        validate: bool = False,
    ) -> Registry:
        """Load the sources named in the module docstring, in that order.

        Every record's fields are checked as it loads. Its pattern is compiled when a message
        first needs it (a pattern that does not compile is then skipped and reported), so a
        registry of 100k records builds in seconds. ``validate=True`` compiles and checks the
        examples of every record not shipped with errkb at once, as ``errkb validate`` does;
        ``strict=True`` (which implies it) raises the first problem.
        """
        sources: list[str | os.PathLike[str]] = []
        trusted: list[str | os.PathLike[str]] = []
        if builtin:
            # The shipped records are validated by `nox -s records` and the tests before a
            # release; at run time their patterns compile only when a message needs them.
            trusted.append(builtin_records_dir())
            sources.extend(trusted)
        sources.extend(paths)
        if env:
            sources.extend(paths_from_env("ERRKB_RECORDS"))
        problems: list[RecordError] = []
        if entry_points:
            found, broken = _entry_point_paths()
            sources.extend(found)
            problems.extend(broken)
        if not (validate or strict):
            trusted = list(sources)
        lazy: list[LazyRefs] = []
        # Folder -> the files its folder index covers (read once, with the first file).
        indexed: dict[str, frozenset[str]] = {}
        tops = [Path(s).resolve() for s in trusted]
        given = [os.path.normpath(os.fspath(s)) for s in trusted]  # see _within

        def read_pack(
            path: Path, label: str, found: list[RecordError]
        ) -> Iterator[RecordRef] | None:
            """A trusted record file: lazily from an index, else read (bodies on demand).

            The index is a folder's (one for the record files of the folder or the one above
            it: records/packs.index, records/mined/packs.index) or a pack's own. A ``.json``
            file no index covers is left to the usual reading (``None``). The registry is
            where a trusted pack is read as one; :mod:`errkb.packs` is imported only when a
            file is there to read.
            """
            from errkb.packs import lazy_folder, lazy_pack, load_pack

            # String work, not pathlib: this runs for each of the files of a folder.
            parent = os.path.dirname(path)  # noqa: PTH120 - see above
            name = os.path.basename(path)  # noqa: PTH119
            above = (os.path.dirname(parent), f"{os.path.basename(parent)}/{name}")  # noqa: PTH119, PTH120
            for folder, inside in ((parent, name), above):
                covered = indexed.get(folder)
                if covered is None and not _within(folder, given, tops):
                    # An index above the folder given would bring in records not asked for.
                    covered = indexed[folder] = frozenset()
                if covered is None:
                    base = label[: len(label) - len(inside)]  # a label ends with it
                    loaded, covered = lazy_folder(
                        Path(folder), functools.partial(_label, base), found
                    )
                    indexed[folder] = covered
                    if loaded is not None:
                        lazy.append(loaded)
                if inside in covered:
                    return iter(())
            if not path.name.endswith((".jsonl", ".jsonl.gz")):
                return None
            pack = lazy_pack(path, label, found)
            if pack is None:
                return load_pack(path, label, found)
            lazy.append(pack)
            return iter(())

        with paused():
            refs, loading = load_refs(sources, strict=strict, trusted=trusted, read_pack=read_pack)
            return cls(refs, [*problems, *loading], lazy=lazy)


def _entry_point_paths() -> tuple[list[Path], list[RecordError]]:
    """Folders or files of record packs, from the ``errkb.records`` entry points.

    An entry point names a module (its folder holds the records), or an object that is a path,
    or a callable returning one or more paths. A broken pack is reported (as a problem, and in
    one line through :mod:`errkb._plugins`), never fatal.
    """
    from errkb import _plugins

    paths: list[Path] = []
    problems: list[RecordError] = []
    for ep in _plugins.entry_points(ENTRY_POINT_GROUP):
        label = f"entry point {ep.name!r} ({ep.value})"
        try:
            obj = _plugins.load(ENTRY_POINT_GROUP, ep, call=True)
        except _plugins.PluginError as exc:
            problems.append(RecordError(label, exc.problem))
            continue
        if hasattr(obj, "__file__") and obj.__file__:
            paths.append(Path(obj.__file__).parent)
        elif isinstance(obj, (str, os.PathLike)):
            paths.append(Path(obj))
        elif isinstance(obj, (list, tuple)):
            paths.extend(Path(p) for p in obj)
        else:
            problem = f"expected a module or path, got {obj!r}"
            _plugins.report(ENTRY_POINT_GROUP, ep, problem)
            problems.append(RecordError(label, problem))
    return paths, problems


def _label(base: str, name: str) -> str:
    """The label of the file ``name`` (a path from an index's folder) under ``base``."""
    return base + (name if os.sep == "/" else name.replace("/", os.sep))


def _within(folder: str, given: list[str], tops: list[Path]) -> bool:
    """Whether ``folder`` is one of ``tops`` or inside one.

    ``given`` are the tops as given: a folder the walk of one reached is below it as written,
    which a string tells without resolving each folder's links (four system calls a folder).
    """
    if any(folder == top or folder.startswith(top + os.sep) for top in given):
        return True
    here = Path(folder).resolve()
    return any(here == top or top in here.parents for top in tops)


class _Records(Sequence[Record]):
    """The whole records behind a tuple of refs, each loaded when it is reached."""

    def __init__(self, refs: tuple[RecordRef, ...]) -> None:
        self._refs = refs

    def __len__(self) -> int:
        return len(self._refs)

    @overload
    def __getitem__(self, index: int) -> Record: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Record, ...]: ...
    def __getitem__(self, index: int | slice) -> Record | tuple[Record, ...]:
        if isinstance(index, slice):
            return tuple(r.load() for r in self._refs[index])
        return self._refs[index].load()

    def __iter__(self) -> Iterator[Record]:
        return (r.load() for r in self._refs)


_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry() -> Registry:
    """The process-wide registry of all default sources, loaded once, thread-safe."""
    global _default  # noqa: PLW0603 - one registry per process, loaded on first use
    if _default is not None:  # loaded: no lock to take on every lookup
        return _default
    with _default_lock:
        if _default is None:
            _default = Registry.from_paths()
        return _default


_releases: dict[str, dict[str, object]] | None = None


def shipped_releases(distribution: str) -> dict[str, object] | None:
    """The release list the shipped mined pack of ``distribution`` carries, if any.

    ``releases`` (every release of the package index in the mined range, oldest first),
    ``mined`` and ``unread`` (release -> why it was not read): see
    :func:`errkb.packs.read_releases`. Read once per process, on first use.
    """
    global _releases  # noqa: PLW0603 - read once per process, on first use
    with _default_lock:
        if _releases is None:
            from errkb.packs import read_releases

            _releases = read_releases(builtin_records_dir() / "mined")
        return _releases.get(distribution)
