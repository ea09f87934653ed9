"""Exact release boundaries: the releases between the mined ones, read for their messages only.

A pack is mined from a few releases of a distribution (the pinned ones: they give each
record's sites and its body). Between two of them lie releases nobody read, so a record's
``first`` and ``last`` would be the nearest *mined* releases, not the real ones: transformers
4.45.2 raises a message that a pack mined from 4.44.2 and 4.46.3 says starts in 4.46.3.

Here every other release of the list is read with the same readers (Python, C++ and Rust) for
one thing only: which records it raises, by record id (the distribution, the message and the
class). Each record's ``first`` is then the oldest release read that raises it, and ``last``
the newest when that is not the newest release read. Sites stay those of the mined releases.
The list of every release on the package index travels with the pack (:func:`release_list`),
so that a range can be reasoned about at lookup time: a release older than the oldest read,
and the releases that could not be read (yanked with no archive, no archive of the kind read),
are known as such, not taken as raising or not.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from errkb.mine._site import Site

__all__ = ["RELEASES_SCHEMA", "presence", "refine", "release_list", "site_ids"]

#: The layout of a pack's release list (``PACK.releases``).
RELEASES_SCHEMA = "errkb.releases/1"


def site_ids(sites: Iterable[Site]) -> frozenset[str]:
    """The ids of the records these sites make (templates the specificity rule keeps)."""
    from errkb.mine._template import error_message, why_too_generic
    from errkb.mine._write import record_id

    return frozenset(
        record_id(s.distribution, error_message(s.template), s.error_class)
        for s in sites
        if why_too_generic(s.template) is None
    )


#: The modules whose code decides which record ids a release gives: a change to any of them
#: makes a cached reading stale.
_READERS = ("_python.py", "_native.py", "_template.py", "_site.py", "_sources.py", "_write.py")


def _stamp(given: str, native: bool) -> str:
    """What a cached reading of ``given`` depends on: the file (by size and digest), the code."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in _READERS:
        digest.update((here / name).read_bytes())
    path = Path(given)
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    digest.update(f"{path.stat().st_size}\0{native}".encode())
    return digest.hexdigest()


def _read_one(given: str, native: bool, cache: str | None) -> tuple[str, str, frozenset[str]]:
    """One release's (distribution, version, record ids); a worker process runs this.

    With ``cache`` (a folder), the reading of a file (a wheel or an sdist) is kept there under
    the stamp of the file and of the readers' code, and reused while both are the same.
    """
    from errkb.mine import _sites
    from errkb.mine._sources import open_source

    kept = None
    if cache and Path(given).is_file():  # a folder is read afresh: it has no one digest
        kept = Path(cache) / f"{Path(given).name}.{_stamp(given, native)[:24]}.json"
    if kept is not None and kept.is_file():
        data = json.loads(kept.read_text(encoding="utf-8"))
        return data["distribution"], data["version"], frozenset(data["ids"])
    source = open_source(given)
    ids = site_ids(_sites(source, 0, Counter(), native=native))
    dist, version = source.distribution, source.version or "unknown"
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        body = {"distribution": dist, "version": version, "ids": sorted(ids)}
        kept.write_text(json.dumps(body), encoding="utf-8")
    return dist, version, ids


def presence(
    given: Sequence[str],
    *,
    native: bool = True,
    workers: int | None = None,
    cache: Path | None = None,
) -> dict[str, dict[str, frozenset[str]]]:
    """Which records each release raises: distribution -> version -> record ids.

    The releases are read in ``workers`` processes (default: one per core), each once; with
    ``cache``, a reading made by the same code from the same file is reused.
    """
    if not given:
        return {}
    out: dict[str, dict[str, frozenset[str]]] = {}
    workers = workers or os.cpu_count() or 1
    where = str(cache) if cache is not None else None
    if workers == 1 or len(given) == 1:
        results = [_read_one(g, native, where) for g in given]
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=min(workers, len(given))) as pool:
            n = len(given)
            results = list(pool.map(_read_one, given, [native] * n, [where] * n))
    for dist, version, ids in results:
        out.setdefault(dist, {})[version] = ids
    return out


def refine(
    records: Iterable[dict[str, Any]],
    present: Mapping[str, Mapping[str, frozenset[str]]],
    version_key: Callable[[str], Any],
) -> Counter[str]:
    """Set each mined record's ``first`` and ``last`` from every release read; returns counts.

    ``present`` holds every release read (the mined ones too). Skew records are left alone:
    their boundaries are a name's presence, not a message's (:mod:`errkb.mine._history`).
    Counts: ``first-moved`` and ``last-moved`` (a boundary that the releases in between moved),
    ``records``.
    """
    counts: Counter[str] = Counter()
    order = {
        dist: sorted(versions, key=version_key) for dist, versions in present.items() if versions
    }
    for record in records:
        versions = record.get("versions")
        if not versions or "skew" in record:
            continue
        read = order.get(versions["distribution"])
        if not read or len(read) < 2:
            continue
        table = present[versions["distribution"]]
        raising = [v for v in read if record["id"] in table[v]]
        if not raising:
            continue
        counts["records"] += 1
        first, last = raising[0], raising[-1]
        if versions.get("first") != first:
            counts["first-moved"] += 1
        versions["first"] = first
        if last == read[-1]:
            if "last" in versions:
                counts["last-moved"] += 1
            versions.pop("last", None)
        else:
            if versions.get("last") != last:
                counts["last-moved"] += 1
            versions["last"] = last
    return counts


def release_list(
    releases: Sequence[str],
    read: Iterable[str],
    mined: Iterable[str],
    unread: Mapping[str, str],
    yanked: Iterable[str],
    version_key: Callable[[str], Any],
) -> dict[str, Any]:
    """One distribution's entry in a pack's release list (``PACK.releases``, JSON).

    ``releases`` is every release the package index has in the range (any order); ``read``
    those whose messages were read, ``mined`` those whose sites the records give, and
    ``unread`` says why a release was not read (``"no sdist on the package index"``);
    ``yanked`` are those the index marks yanked (read all the same: users still have them, but
    a pin must not resolve to one).
    """
    read_set = set(read)
    everything = sorted(set(releases) | read_set, key=version_key)
    return {
        "releases": everything,
        "mined": sorted(set(mined), key=version_key),
        "yanked": [v for v in everything if v in set(yanked)],
        "unread": {
            v: unread.get(v, "not given to errkb mine") for v in everything if v not in read_set
        },
    }
