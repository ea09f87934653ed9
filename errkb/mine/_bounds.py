"""Exact release boundaries: the releases between the mined ones, read for their messages only.

A pack is mined from a few releases of a distribution (the pinned ones: they give each
record's sites and its body). Between two of them lie releases nobody read, so a record's
``first`` and ``last`` would be the nearest *mined* releases, not the real ones: transformers
4.45.2 raises a message that a pack mined from 4.44.2 and 4.46.3 says starts in 4.46.3.

Every other release of the list (a *bound*) lies between two mined releases, its neighbours.
A message both neighbours raise is taken to be raised by the releases between them, and one
neither raises to be raised by none; only the messages that one neighbour raises and the
other does not have a boundary in between. For those, the bound's files that the neighbours
raise them from (the files involved) are read with the same readers (Python, C++ and Rust),
and the bound raises a message when one of those files does. Each record's ``first`` is then
the oldest release that raises it, and ``last`` the newest when that is not the newest release
read. A message is known by its text as the user sees it (a hole's expression left out) and the
short name of its class (the module a class is re-exported from may be resolved through a file
not read). Sites stay those of the mined releases.

The list of every release on the package index travels with the pack (:func:`release_list`),
so that a range can be reasoned about at lookup time: a release older than the oldest read,
and the releases that could not be read (no archive of the kind read), are known as such.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from errkb.mine._site import Site

__all__ = [
    "RELEASES_SCHEMA",
    "Bound",
    "involved",
    "message_key",
    "messages_of",
    "presence",
    "refine",
    "release_list",
    "visible",
]

#: The layout of a pack's release list (``PACK.releases``).
RELEASES_SCHEMA = "errkb.releases/1"
#: The modules whose code decides which messages a file gives: a change to any of them makes
#: a cached reading stale.
_READERS = ("_python.py", "_native.py", "_template.py", "_site.py", "_sources.py", "_write.py")

#: One release of a distribution's messages: :func:`message_key` -> the files that raise it.
Messages = dict[str, set[str]]


def message_key(message: str, error_class: str | None) -> str:
    """A message as the bounds know it: its text and its class's short name.

    Two records of one message differ by class (accelerate's gated-repo message was a
    ``GatedRepoError`` until 1.12.0 and an ``OSError`` from 1.13.0), while the module a class
    is named from depends on which files were read.
    """
    return f"{message}\0{(error_class or '').rpartition('.')[2]}"


_HOLE = re.compile(r"\{[^{}]*\}")


def visible(key: str) -> str:
    """A message key as the user sees the message: each hole's expression left out.

    safetensors 0.8.0 renamed a hole (``{invalid_tensors}`` to ``{sparse_tensors}``) in a
    message that prints the same text: it is the same message to whoever meets it.
    """
    return _HOLE.sub("{}", key)


def messages_of(sites: Iterable[Site]) -> Messages:
    """The messages these sites raise (templates the specificity rule keeps), with their files."""
    from errkb.mine._template import error_message, why_too_generic
    from errkb.mine._write import package_path

    out: Messages = {}
    for s in sites:
        if why_too_generic(s.template) is None:
            key = message_key(error_message(s.template), s.error_class)
            out.setdefault(key, set()).add(package_path(s.path))
    return out


class Bound:
    """A release read for the messages whose boundary lies next to it, from its files involved.

    Attributes:
        given: the SOURCE (a wheel or an sdist).
        distribution: its distribution; ``version``: its release.
        files: the package paths to read (see :func:`involved`).
    """

    def __init__(self, given: str, distribution: str, version: str) -> None:
        self.given = given
        self.distribution = distribution
        self.version = version
        self.files: frozenset[str] = frozenset()
        #: The longest literal run of each changing message: a file of the bound that holds
        #: one is read too (the message may live in another file between the neighbours).
        self.anchors: frozenset[str] = frozenset()


def involved(
    bounds: Sequence[Bound],
    mined: Mapping[str, Mapping[str, Messages]],
    version_key: Callable[[str], Any],
) -> Counter[str]:
    """Set each bound's files: those its neighbours raise a message from that only one raises.

    ``mined`` is distribution -> mined release -> its messages. Each bound also gets the
    anchors of those messages (:func:`_anchor`): a file of the bound that holds one is read as
    well, since a message can move to another file and back between two mined releases. A
    bound outside the mined range (no neighbour on one side) reads nothing. Returns counts:
    ``messages`` (messages whose boundary lies between two mined releases), ``files`` (files
    named to read, over all bounds).
    """
    counts: Counter[str] = Counter()
    for dist, releases in mined.items():
        order = sorted(releases, key=version_key)
        gaps: dict[tuple[str, str], tuple[frozenset[str], frozenset[str]]] = {}
        for older, newer in itertools.pairwise(order):
            a, b = releases[older], releases[newer]
            changing = set(a).symmetric_difference(b)
            counts["messages"] += len(changing)
            paths = frozenset(
                path for message in changing for path in (*a.get(message, ()), *b.get(message, ()))
            )
            anchors = frozenset(filter(None, map(_anchor, changing)))
            gaps[(older, newer)] = (paths, anchors)
        for bound in bounds:
            if bound.distribution != dist:
                continue
            key = version_key(bound.version)
            for (older, newer), (paths, anchors) in gaps.items():
                if version_key(older) < key < version_key(newer):
                    bound.files, bound.anchors = paths, anchors
                    counts["files"] += len(paths)
    return counts


#: The shortest literal run that picks a file to read on its own (shorter ones are in many).
_ANCHOR = 12


def _anchor(key: str) -> str | None:
    """The longest literal run of a message key's text, if it is long enough to pick a file."""
    text = key.partition("\0")[0]
    longest = max(_HOLE.split(text), key=len, default="")
    return longest if len(longest) >= _ANCHOR else None


def _stamp(bound: Bound, native: bool) -> str:
    """What a cached reading depends on: the file (by digest), the files asked, the code."""
    digest = hashlib.sha256()
    here = Path(__file__).parent
    for name in _READERS:
        digest.update((here / name).read_bytes())
    with Path(bound.given).open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    digest.update("\0".join([str(native), *sorted(bound.files), *sorted(bound.anchors)]).encode())
    return digest.hexdigest()


def _read_one(bound: Bound, native: bool, cache: str | None) -> list[str]:
    """The messages a bound's files involved raise; a worker process runs this.

    With ``cache`` (a folder), the reading of a file (a wheel or an sdist) is kept there under
    the stamp of the file, the files asked and the readers' code, and reused while all are the
    same.
    """
    from errkb.mine._native import CPP_SUFFIXES, RUST_SUFFIXES, native_sites
    from errkb.mine._python import read_python
    from errkb.mine._sources import open_source
    from errkb.mine._write import package_path

    if not bound.files and not bound.anchors:
        return []
    kept = None
    if cache and Path(bound.given).is_file():  # a folder is read afresh: it has no one digest
        kept = Path(cache) / f"{Path(bound.given).name}.{_stamp(bound, native)[:24]}.json"
        if kept.is_file():
            return list(json.loads(kept.read_text(encoding="utf-8")))
    source = open_source(bound.given)
    dist, version = source.distribution, bound.version
    suffixes = (".py", *(CPP_SUFFIXES + RUST_SUFFIXES if native else ()))
    python: list[Site] = []
    others: list[tuple[str, str]] = []
    holds = _finder(bound.anchors)
    for path, text in source.files(suffixes):
        if package_path(path) not in bound.files and not holds(text):
            continue
        if path.endswith(".py"):
            python += read_python(
                text, path, distribution=dist, version=version, excerpt_lines=0, dropped=Counter()
            )
        else:
            others.append((path, text))
    sites = python + list(native_sites(others, distribution=dist, version=version, excerpt_lines=0))
    found = sorted(messages_of(sites))
    if kept is not None:
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_text(json.dumps(found), encoding="utf-8")
    return found


def _finder(anchors: frozenset[str]) -> Callable[[str], bool]:
    """A test of whether a text holds one of the anchors, in one Aho-Corasick pass.

    ``ahocorasick-rs`` comes with the ``mine`` extra; without it no file is picked by its
    anchors (the named files are read all the same).
    """
    if not anchors:
        return lambda _text: False
    try:
        import ahocorasick_rs
    except ImportError:
        return lambda _text: False
    automaton = ahocorasick_rs.AhoCorasick(sorted(anchors))
    return lambda text: bool(automaton.find_matches_as_indexes(text))


def presence(
    bounds: Sequence[Bound],
    *,
    native: bool = True,
    workers: int | None = None,
    cache: Path | None = None,
) -> dict[tuple[str, str], frozenset[str]]:
    """The messages each bound's files involved raise: (distribution, version) -> messages.

    The bounds are read in ``workers`` processes (default: one per core), each once; with
    ``cache``, a reading made by the same code from the same file is reused.
    """
    todo = [b for b in bounds if b.files or b.anchors]
    workers = min(workers or os.cpu_count() or 1, max(len(todo), 1))
    where = str(cache) if cache is not None else None
    if workers == 1:
        results = [_read_one(b, native, where) for b in todo]
    else:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=workers) as pool:
            n = len(todo)
            results = list(pool.map(_read_one, todo, [native] * n, [where] * n))
    return {(b.distribution, b.version): frozenset(r) for b, r in zip(todo, results, strict=True)}


def refine(
    records: Iterable[dict[str, Any]],
    mined: Mapping[str, Mapping[str, Messages]],
    bounds: Sequence[Bound],
    read: Mapping[tuple[str, str], frozenset[str]],
    version_key: Callable[[str], Any],
) -> Counter[str]:
    """Set each mined record's ``first`` and ``last`` from every release; returns counts.

    A bound raises a message when its files involved do (``read``), or, for a message both its
    neighbours agree on, when they do. Messages are compared as the user sees them
    (:func:`visible`): two records of one text whose holes the code named differently share
    their releases. Skew records are left alone: their boundaries are a
    name's presence, not a message's. Counts: ``first-moved`` and ``last-moved`` (a boundary
    that the releases in between moved), ``records``.
    """
    counts: Counter[str] = Counter()
    releases: dict[str, list[str]] = {}
    seen = {
        dist: {version: {visible(k) for k in keys} for version, keys in found.items()}
        for dist, found in mined.items()
    }
    seen_read = {where: {visible(k) for k in keys} for where, keys in read.items()}
    for dist, found in mined.items():
        releases[dist] = sorted(
            {*found, *(b.version for b in bounds if b.distribution == dist)}, key=version_key
        )
    for record in records:
        versions = record.get("versions")
        if not versions or "skew" in record:
            continue
        dist = versions["distribution"]
        order = releases.get(dist, [])
        if len(order) < 2:  # one release says nothing of a range
            continue
        message = visible(message_key(record["errorMessage"], record.get("errorClass")))
        raising = [
            v for v in order if _raises(message, dist, v, seen[dist], seen_read, version_key)
        ]
        if not raising:
            continue
        counts["records"] += 1
        first, last = raising[0], raising[-1]
        if versions.get("first") != first:
            counts["first-moved"] += 1
        versions["first"] = first
        if last == order[-1]:
            counts["last-moved"] += "last" in versions
            versions.pop("last", None)
        else:
            counts["last-moved"] += versions.get("last") != last
            versions["last"] = last
    return counts


def _raises(
    message: str,
    dist: str,
    version: str,
    mined: Mapping[str, set[str]],
    read: Mapping[tuple[str, str], set[str]],
    version_key: Callable[[str], Any],
) -> bool:
    if version in mined:
        return message in mined[version]
    key = version_key(version)
    older = max((v for v in mined if version_key(v) < key), key=version_key, default=None)
    newer = min((v for v in mined if version_key(v) > key), key=version_key, default=None)
    if older is None or newer is None:
        return False
    in_older, in_newer = message in mined[older], message in mined[newer]
    if in_older == in_newer:
        return in_older
    return message in read.get((dist, version), set())


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
    yanked_set = set(yanked)
    return {
        "releases": everything,
        "mined": sorted(set(mined), key=version_key),
        "yanked": [v for v in everything if v in yanked_set],
        "unread": {
            v: unread.get(v, "not given to errkb mine") for v in everything if v not in read_set
        },
    }
