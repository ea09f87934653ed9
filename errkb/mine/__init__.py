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

import time
from collections import Counter
from typing import TYPE_CHECKING, Any

import attrs

from errkb.mine._site import Hole, Site, Template
from errkb.mine._sources import Source, open_source
from errkb.mine._write import FORMATS, build_records, write_pack

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence

__all__ = [
    "FORMATS",
    "Hole",
    "MineResult",
    "Site",
    "Source",
    "Template",
    "mine",
    "open_source",
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


def mine(given: Sequence[str], *, excerpt_lines: int = 10, native: bool = True) -> MineResult:
    """Read every source and make the records; a bad source raises ``UsageError``.

    ``native=False`` reads the Python files only (no C++ or Rust).

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
    records = build_records(found, lambda v: order.get(v, -1), dropped)
    summary = {
        "schema": SUMMARY_SCHEMA,
        "sources": described,
        "sites": len(found),
        "records": len(records),
        "kinds": dict(sorted(Counter(r["tags"][1] for r in records).items())),
        "languages": dict(sorted(Counter(r["tags"][2] for r in records).items())),
        "dropped": dict(sorted(dropped.items())),
        "seconds": round(time.perf_counter() - started, 2),
    }
    return MineResult(records=tuple(records), summary=summary)


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
        )


def _version_order(pairs: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Each version's rank, oldest first (PEP 440 when ``packaging`` is there, else as given)."""
    versions = list(dict.fromkeys(v for _, v in pairs))
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:
        return {v: i for i, v in enumerate(versions)}

    def key(item: tuple[int, str]) -> tuple[int, Any, int]:
        index, text = item
        try:
            return (1, Version(text), index)
        except InvalidVersion:
            return (0, index, index)

    ranked = sorted(enumerate(versions), key=key)
    return {v: i for i, (_, v) in enumerate(ranked)}
