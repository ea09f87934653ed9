"""The registry: every record errkb knows, from the built-in knowledge base and beyond.

Sources, in order (an id already taken by an earlier source is reported, and the earlier record
kept): the records shipped with errkb, paths given by the caller (``errkb --records PATH``),
paths in ``ERRKB_RECORDS`` (``os.pathsep``-separated), then record packs that installed
distributions declare in the entry-point group ``errkb.records``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from errkb.exceptions import RecordError, RegistryError
from errkb.records import LoadResult, Record, load_paths

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from errkb.match import Matcher

__all__ = ["ENTRY_POINT_GROUP", "Registry", "builtin_records_dir", "default_registry"]

ENTRY_POINT_GROUP = "errkb.records"


def builtin_records_dir() -> Path:
    """Where the shipped records are: inside the wheel, or at the top of a source checkout."""
    here = Path(__file__).resolve().parent
    shipped = here / "_records"
    return shipped if shipped.is_dir() else here.parent / "records"


class Registry:
    """An immutable collection of records, with lookup by id, slug and tag.

    >>> reg = Registry.from_paths([])  # doctest: +SKIP
    >>> reg.get("vllm-kv-cache-max-seq-len").severity  # doctest: +SKIP
    'critical'
    """

    def __init__(self, records: Iterable[Record], problems: Iterable[RecordError] = ()) -> None:
        self.records: tuple[Record, ...] = tuple(records)
        self.problems: tuple[RecordError, ...] = tuple(problems)
        self._by_id = {r.id: r for r in self.records}
        self._by_slug: dict[str, Record] = {}
        for r in self.records:
            self._by_slug.setdefault(r.slug, r)
        self._matcher: Matcher | None = None
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.records)

    def __contains__(self, key: object) -> bool:
        return key in self._by_id or key in self._by_slug

    def get(self, key: str) -> Record:
        """The record with this id, else the first with this slug; :class:`RegistryError` if none."""
        record = self._by_id.get(key) or self._by_slug.get(key)
        if record is None:
            raise RegistryError(f"no record with id or slug {key!r}")
        return record

    def with_tag(self, tag: str) -> tuple[Record, ...]:
        """The records carrying ``tag`` (case-insensitive)."""
        want = tag.lower()
        return tuple(r for r in self.records if want in (t.lower() for t in r.tags))

    @property
    def matcher(self) -> Matcher:
        """The matcher over these records, built once on first use."""
        with self._lock:
            if self._matcher is None:
                from errkb.match import Matcher

                self._matcher = Matcher(self.records)
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
            sources.extend(p for p in os.environ.get("ERRKB_RECORDS", "").split(os.pathsep) if p)
        problems: list[RecordError] = []
        if entry_points:
            found, broken = _entry_point_paths()
            sources.extend(found)
            problems.extend(broken)
        if not (validate or strict):
            trusted = list(sources)
        result: LoadResult = load_paths(sources, strict=strict, trusted=trusted)
        return cls(result.records, [*problems, *result.problems])


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


_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry() -> Registry:
    """The process-wide registry of all default sources, loaded once, thread-safe."""
    global _default  # noqa: PLW0603 - one registry per process, loaded on first use
    with _default_lock:
        if _default is None:
            _default = Registry.from_paths()
        return _default
