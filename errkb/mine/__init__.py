"""The miner: records from the source of a distribution (``errkb mine``).

One record per message the source raises, checks, warns or logs; the rule and the forms
understood are in ``docs/mining.md``. The road: :func:`open_source` gives the files of each
release; each reader turns them into :class:`Site` values; :func:`build_records` keeps the specific templates and
makes one record per message per distribution, with the releases that raise it; the pack is
JSON lines, which the registry reads as it reads any pack.

The readers: :func:`errkb.mine._python.read_source` (stdlib ``ast``) for ``.py`` files, and
:func:`errkb.mine._native.native_sites` for the C++ and Rust files a source ships.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from typing import TYPE_CHECKING, Any

from errkb._attrs import attrs
from errkb.mine._bounds import Bound, involved, messages_of, presence, refine, release_list
from errkb.mine._site import Hole, Site, Template
from errkb.mine._sources import Source, open_source
from errkb.mine._write import FORMATS, build_records, write_pack

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
    from pathlib import Path

    from errkb.mine._bounds import Messages

__all__ = [
    "FORMATS",
    "Hole",
    "MineResult",
    "Site",
    "Source",
    "Template",
    "mine",
    "open_source",
    "sized",
    "write_pack",
]

SUMMARY_SCHEMA = "errkb.mine-summary/1"


@attrs.frozen(kw_only=True)
class MineResult:
    """What mining gave: the records (JSON objects, in pack order) and the summary.

    The summary is JSON: the sources read, the records per kind and language, and what was
    dropped, by reason (see ``docs/mining.md``).
    """

    records: tuple[dict[str, Any], ...]
    summary: dict[str, Any]


def mine(
    given: Sequence[str],
    *,
    excerpt_lines: int = 10,
    native: bool = True,
    history: bool = False,
    bounds: Sequence[str] = (),
    releases: Sequence[str] = (),
    unread: Mapping[str, str] | None = None,
    yanked: Sequence[str] = (),
    read: Callable[[str], Path | None] | None = None,
    workers: int | None = None,
    bounds_cache: Path | None = None,
    history_from: tuple[Sequence[dict[str, Any]], Mapping[str, int]] | None = None,
    max_classes: int | None = None,
) -> MineResult:
    """Read every source and make the records; a bad source raises ``UsageError``.

    ``native=False`` reads the Python files only (no C++ or Rust). ``history=True`` also diffs
    the public API of consecutive releases of each distribution given in several releases, and
    adds the records of version skew (:func:`errkb.mine._history.history_records`; needs the
    ``mine`` extra, griffe). ``excerpt_lines=0`` writes no source excerpt: the record keeps the
    raise site and its link.

    ``bounds`` are more releases of the same distributions, read only for the messages whose
    boundary lies next to them, from the files involved, so that each record's ``first`` and
    ``last`` name real releases, not the nearest mined ones (:mod:`errkb.mine._bounds`); the
    skew records' changes are placed among them too (``history_records``' ``read``: each
    bound's Python files are unpacked when a change needs them, unless ``read(version)`` is
    given). ``releases`` is every release the package index has in the range, in any order
    (the mined and bounds ones are added; one distribution at a time): a change between two
    releases read with others between them is stated as not exact, and pins name releases
    read. ``unread`` says why a listed release was not read, ``yanked`` which the index marks
    yanked; the summary's ``releases`` holds each distribution's list
    (:func:`errkb.mine._bounds.release_list`), which the pack carries. The bounds are read in
    ``workers`` processes (default: one per core); ``bounds_cache`` is a folder that keeps each
    reading for the next run with the same file and the same code. ``history_from`` is the
    skew records and counts of an earlier run of the same releases, used instead of diffing
    their APIs again (the slow part) when only the message readers or the bounds changed.
    ``max_classes`` leaves out the skew records of members of more than that many classes, and
    of members added to classes (see :func:`sized`): the size a pack may take.

    >>> result = mine(["transformers"])  # doctest: +SKIP
    >>> result.summary["records"], result.records[0]["id"]  # doctest: +SKIP
    (4177, 'mined-transformers-...')
    """
    started = time.perf_counter()
    sources = [open_source(s) for s in given]
    dropped: Counter[str] = Counter()
    found: list[tuple[Source, Site]] = []
    described = []
    for source in sources:
        count = 0
        for site in _sites(source, excerpt_lines, dropped, native=native):
            found.append((source, site))
            count += 1
        described.append(
            {
                "source": source.given,
                "distribution": source.distribution,
                "version": source.version,
                "archive": source.archive,
                "repo": source.repo,
                "sites": count,
            }
        )
    order = _version_order([(s.distribution, s.version or "unknown") for s in sources])
    # excerpt_lines=0: not even the statement itself, no upstream code in the pack.
    records = build_records(found, lambda v: order.get(v, -1), dropped, excerpts=excerpt_lines > 0)
    mined = _messages(sources, found)
    between = [
        Bound(b.given, b.distribution, b.version or "unknown") for b in map(open_source, bounds)
    ]
    everything = _version_order(
        [(d, v) for d, versions in mined.items() for v in versions]
        + [(b.distribution, b.version) for b in between]
        + [("", v) for v in releases]
    )

    def rank(version: str) -> int:
        return everything.get(version, -1)

    bounded: Counter[str] = Counter()
    if between:
        bounded.update(involved(between, mined, rank))
        seen = presence(between, native=native, workers=workers, cache=bounds_cache)
        bounded.update(refine(records, mined, between, seen, rank))
    kinds = Counter(r["tags"][1] for r in records)
    languages = Counter(r["tags"][2] for r in records)
    skew: Counter[str] = Counter()
    if history and history_from is not None:
        records.extend(history_from[0])
        kinds["skew"] += len(history_from[0])
        skew.update(history_from[1])
    elif history:
        listed = sorted({*releases, *(b.version for b in between), *order}, key=rank)
        with _unpacked(between) as unpacked:
            for made, counts in _histories(sources, order, listed, read or unpacked):
                records.extend(made)
                kinds["skew"] += len(made)
                skew.update(counts)
    if max_classes is not None:
        kept = sized(records, max_classes)
        if len(kept) < len(records):
            skew["left-out-for-size"] += len(records) - len(kept)
            kinds["skew"] -= len(records) - len(kept)
            records = kept
    summary = {
        "schema": SUMMARY_SCHEMA,
        "sources": described,
        "sites": len(found),
        "records": len(records),
        "kinds": dict(sorted(kinds.items())),
        "languages": dict(sorted(languages.items())),
        "dropped": dict(sorted(dropped.items())),
        "history": dict(sorted(skew.items())),
        "bounds": dict(sorted(bounded.items())),
        "releases": {
            dist: release_list(
                releases,
                read=versions,
                mined=[s.version for s in sources if s.distribution == dist and s.version],
                unread=unread or {},
                yanked=yanked,
                version_key=rank,
            )
            for dist, versions in _read_releases(mined, between).items()
        },
        "seconds": round(time.perf_counter() - started, 2),
    }
    return MineResult(records=tuple(records), summary=summary)


def sized(records: list[dict[str, Any]], max_classes: int) -> list[dict[str, Any]]:
    """The records without the skew records that a class list makes large.

    A member removed from (or renamed in) a base class is listed with every class that
    inherited it: up to 1,400 names in transformers, where ``GenerationMixin`` or
    ``PreTrainedModel`` changed. Such a record is kept while it names at most ``max_classes``
    classes; a member added to classes is left out (the added name records cover the common
    case: a class that does not exist yet). Records without a class list are all kept.
    """

    def fits(record: dict[str, Any]) -> bool:
        skew = record.get("skew")
        if not isinstance(skew, dict) or not skew.get("classes"):
            return True
        return skew.get("change") in ("removed", "renamed") and len(skew["classes"]) <= max_classes

    return [r for r in records if fits(r)]


def _messages(
    sources: Sequence[Source], found: Sequence[tuple[Source, Site]]
) -> dict[str, dict[str, Messages]]:
    """Each mined release's messages, with their files: distribution -> release -> messages.

    A release that raises nothing is there too, with no message.
    """
    by_release: dict[tuple[str, str], list[Site]] = {
        (s.distribution, s.version or "unknown"): [] for s in sources
    }
    for source, site in found:
        by_release.setdefault((source.distribution, site.version), []).append(site)
    out: dict[str, dict[str, Messages]] = {}
    for (dist, version), sites in by_release.items():
        out.setdefault(dist, {})[version] = messages_of(sites)
    return out


def _read_releases(
    mined: dict[str, dict[str, Messages]], between: Sequence[Bound]
) -> dict[str, list[str]]:
    """Every release read of each distribution: the mined ones and the bounds."""
    out = {dist: list(releases) for dist, releases in mined.items()}
    for bound in between:
        out.setdefault(bound.distribution, []).append(bound.version)
    return out


def _sites(
    source: Source, excerpt_lines: int, dropped: Counter[str], *, native: bool
) -> Iterator[Site]:
    from errkb.mine._python import read_source

    yield from read_source(source, excerpt_lines=excerpt_lines, dropped=dropped)
    if native:
        from errkb.mine._native import CPP_SUFFIXES, RUST_SUFFIXES, native_sites

        yield from native_sites(
            source.files(CPP_SUFFIXES + RUST_SUFFIXES),
            distribution=source.distribution,
            version=source.version or "unknown",
            excerpt_lines=excerpt_lines,
        )


def _histories(
    sources: Sequence[Source],
    order: dict[str, int],
    releases: Sequence[str] = (),
    read: Callable[[str], Path | None] | None = None,
) -> Iterator[tuple[list[dict[str, Any]], dict[str, int]]]:
    """The skew records of each distribution given in two releases or more.

    ``releases``: every release of the distribution, oldest first; it is meant for one
    distribution mined at a time (the shipped packs are), as each is given the same list.

    Each release's Python files are written into a folder of their own, laid out as
    site-packages would hold them, for griffe to load statically (never imported).
    """
    import tempfile
    from pathlib import Path

    from errkb.mine._history import history_records

    by_dist: dict[str, list[Source]] = {}
    for source in sources:
        if source.version:
            by_dist.setdefault(source.distribution, []).append(source)
    for dist, given in by_dist.items():
        if len(given) < 2:
            continue
        given.sort(key=lambda s: order.get(s.version or "", -1))
        with tempfile.TemporaryDirectory(prefix="errkb-mine-") as tmp:
            folders = []
            for source in given:
                root = Path(tmp) / (source.version or "unknown")
                _unpack(source, root)
                folders.append((source.version or "unknown", root))
            yield history_records(dist, folders, releases, read)


@contextlib.contextmanager
def _unpacked(bounds: Sequence[Bound]) -> Iterator[Callable[[str], Path | None]]:
    """``read(version)``: a bound's Python files, unpacked into a folder when first asked for.

    ``history_records`` asks for the releases between two mined ones to place a change; a
    release not given as a bound is ``None`` (the change is then stated as not exact).
    """
    import tempfile
    from pathlib import Path

    given = {b.version: b.given for b in bounds}
    folders: dict[str, Path] = {}
    with tempfile.TemporaryDirectory(prefix="errkb-bounds-") as tmp:

        def read(version: str) -> Path | None:
            if version not in folders and version in given:
                folders[version] = Path(tmp) / version
                _unpack(open_source(given[version]), folders[version])
            return folders.get(version)

        yield read


def _unpack(source: Source, root: Path) -> None:
    """A release's Python files, laid out as site-packages would hold them, under ``root``."""
    from errkb.mine._write import package_path

    for path, text in source.files((".py",)):
        target = root / package_path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _version_order(pairs: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Each version's rank, oldest first (:func:`errkb.records.release_key`).

    A text that is no release number comes first, in the order given.
    """
    from errkb.records import release_key

    versions = list(dict.fromkeys(v for _, v in pairs))

    def key(item: tuple[int, str]) -> tuple[int, Any, int]:
        index, text = item
        found = release_key(text)
        return (0, index, index) if found is None else (1, found, index)

    ranked = sorted(enumerate(versions), key=key)
    return {v: i for i, (_, v) in enumerate(ranked)}
