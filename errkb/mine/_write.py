"""From sites to schema-v2 records, and the ``.jsonl`` pack that holds them.

One record per message per distribution: the id hashes the distribution, the ``errorMessage``
and the class, so the same message raised by several releases is one record whose ``versions``
says where each release raises it. Its body (file, line, excerpt, link) is the newest release's.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from errkb.mine._template import error_message, message_pattern, why_too_generic
from errkb.records import MAX_PATTERN, MAX_TEXT, SCHEMA_VERSION, record_from_dict
from errkb.records._repos import REPOS, mined_link

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from pathlib import Path

    from errkb.mine._site import Site
    from errkb.mine._sources import Source

__all__ = ["FORMATS", "build_records", "record_id", "write_pack"]

#: The pack formats ``--format`` takes.
FORMATS = ("jsonl", "jsonl.gz")

_SOURCE_MARKERS = ("src", "py_src", "lib")
_VERBS = {
    "raise": "Raised",
    "check": "Raised",
    "warn": "Warned",
    "log": "Logged",
    "native": "Raised",
}
#: The longest condition a documentation sentence shows; a longer one is left out, not cut.
_MAX_CONDITION = 120
#: The version of a source whose metadata gives none.
UNKNOWN = "unknown"


def record_id(distribution: str, message: str, error_class: str | None) -> str:
    """``mined-{distribution}-{12 hex}``: the same for a message in every release."""
    digest = hashlib.sha1(  # noqa: S324 - a name, not a security boundary
        f"{distribution}\0{message}\0{error_class or ''}".encode()
    ).hexdigest()
    return f"mined-{distribution}-{digest[:12]}"


def package_path(path: str) -> str:
    """The file's path under site-packages: a source tree's ``src/pkg/x.py`` is ``pkg/x.py``.

    Only a Python file is installed there; a C++ or Rust file keeps its path in the source, as
    its crate's ``src/`` is no package folder (``bindings/python/src/lib.rs`` and
    ``safetensors/src/lib.rs`` are two files).
    """
    if not path.endswith(".py"):
        return path
    parts = path.split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in _SOURCE_MARKERS:
            return "/".join(parts[i + 1 :])
    return path


def build_records(
    sites: Iterable[tuple[Source, Site]],
    version_key: Callable[[str], Any],
    dropped: Counter[str],
    *,
    excerpts: bool = True,
) -> list[dict[str, Any]]:
    """The records of these sites, one per message per distribution, in a stable order.

    ``version_key`` orders the releases; templates the specificity rule refuses, and records
    the loader would refuse, are counted in ``dropped`` by reason. ``excerpts=False`` keeps no
    source at all, not even the raising statement (no upstream code in the pack), and leaves
    out what :data:`~errkb.records._repos.REPOS` says (:func:`_slim`).
    """
    groups: dict[str, list[tuple[Source, Site, str, str]]] = {}
    newest: dict[str, str] = {}
    mined: dict[str, set[str]] = {}
    for source, site in sites:
        version = site.version
        dist = site.distribution
        mined.setdefault(dist, set()).add(version)
        if dist not in newest or version_key(version) > version_key(newest[dist]):
            newest[dist] = version
        reason = why_too_generic(site.template)
        if reason is not None:
            dropped[reason] += 1
            continue
        message = error_message(site.template)
        pattern = message_pattern(site.template)
        if len(pattern) > MAX_PATTERN or len(message) > MAX_TEXT:
            dropped["too-long"] += 1
            continue
        rid = record_id(dist, message, site.error_class)
        groups.setdefault(rid, []).append((source, site, message, pattern))
    out: list[dict[str, Any]] = []
    for rid, found in groups.items():
        found.sort(key=lambda item: (version_key(item[1].version), item[1].path, item[1].line))
        per_version: dict[str, tuple[Source, Site, str, str]] = {}
        for item in found:
            if item[1].version in per_version:
                dropped["same-message-again"] += 1
            else:
                per_version[item[1].version] = item
        dist = found[0][1].distribution
        data = _record(rid, list(per_version.values()), newest[dist], len(mined[dist]) > 1)
        if not excerpts:
            for key in ("sourceCode", "sourceCodeStart", "sourceCodeEnd"):
                data.pop(key, None)
            if "sites" in data["versions"]:
                _slim(data, list(per_version.values()))
        record, problems = record_from_dict(data, source=rid)
        if record is None or problems:
            dropped["invalid-record"] += 1
            continue
        out.append(data)
    out.sort(key=lambda r: (r["versions"]["distribution"], r["filePath"], r["lineNumber"], r["id"]))
    return out


def _record(
    rid: str, found: Sequence[tuple[Source, Site, str, str]], newest: str, several: bool
) -> dict[str, Any]:
    source, site, message, pattern = found[-1]
    path = package_path(site.path)
    lines = site.excerpt.split("\n")
    excerpt = site.excerpt
    while len(excerpt) > MAX_TEXT and len(lines) > 1:
        lines = lines[1:-1] if len(lines) > 2 else lines[:1]
        excerpt = "\n".join(lines)
    start = site.excerpt_start + (len(site.excerpt.split("\n")) - len(lines)) // 2
    end = start + len(lines) - 1
    versions: dict[str, Any] = {"distribution": site.distribution}
    known = [s.version for _, s, _, _ in found]
    if several:
        versions["first"] = known[0]
        if known[-1] != newest:
            versions["last"] = known[-1]
    if newest != UNKNOWN:
        versions["checked"] = newest
        # Each site once, at the first release of each run of releases that raise it there
        # (the site holds until the next release listed), and ":line" when only the line moved
        # in the same file: a pack of 16 releases stays small.
        sites: dict[str, str] = {}
        last_path, last_line = "", 0
        for _, s, _, _ in found:
            path = package_path(s.path)
            if (path, s.line) == (last_path, last_line):
                continue
            sites[s.version] = f":{s.line}" if path == last_path else f"{path}:{s.line}"
            last_path, last_line = path, s.line
        versions["sites"] = sites
    words = re.sub(r"[^a-z0-9]+", "-", message.lower()).strip("-")[:40].rstrip("-") or "message"
    data: dict[str, Any] = {
        "schemaVersion": 2,
        "id": rid,
        "slug": f"{words}-{rid[-6:]}",
        "repo": source.repo,
        "errorMessage": message,
        "messagePattern": pattern,
        "errorClass": site.error_class,
        "severity": _severity(site),
        "filePath": path,
        "lineNumber": site.line,
        "sourceCode": excerpt or None,
        "sourceCodeStart": start if excerpt else None,
        "sourceCodeEnd": end if excerpt else None,
        "githubUrl": (
            source.github_url(site.path, start, end)
            if excerpt
            else source.github_url(site.path, site.line, site.line)
        ),
        "documentation": _documentation(site, path),
        "tags": ["mined", site.kind, site.language],
        "analyzedSha": None,
        "versions": versions,
    }
    return {k: v for k, v in data.items() if v is not None}


def _slim(data: dict[str, Any], found: Sequence[tuple[Source, Site, str, str]]) -> None:
    """Leave out what :data:`~errkb.records._repos.REPOS` says: the repository, and the link.

    Without an excerpt the link is the line at the tag of the newest site's release (the first
    release of the newest run of releases that raise it there: the same file and line); the
    loader makes it again from the table (:func:`~errkb.records._repos.mined_link`), so a
    record keeps it only when the table cannot say it.
    """
    dist = data["versions"]["distribution"]
    release = list(data["versions"]["sites"])[-1]
    source, site = next((src, s) for src, s, _, _ in found if s.version == release)
    link = source.github_url(site.path, site.line, site.line)
    data["githubUrl"] = link
    if link is None or link == mined_link(dist, release, data["filePath"], data["lineNumber"]):
        del data["githubUrl"]
    if "repo" in data and REPOS.get(dist, (None,))[0] == data["repo"]:
        del data["repo"]


def _severity(site: Site) -> str:
    if site.kind == "warn":
        return "warning"
    if site.kind == "log":
        return site.level or "warning"
    return "error"


def _documentation(site: Site, path: str) -> str:
    """One plain sentence of fact: which function emits the message, and when.

    "When" is :attr:`Site.condition`, what holds as the message is emitted (a failed check's
    condition is already turned round by its reader); longer than ``_MAX_CONDITION``
    characters, it is left out rather than cut.
    """
    # The file, line and releases are the record's own fields (filePath, lineNumber, versions).
    verb = _VERBS.get(site.kind, "Raised")
    how = " through torch._check" if site.kind == "check" else ""
    where = f"by {site.function}" if site.function else f"at module level in {path}"
    text = f"{verb}{how} {where}"
    # A condition is shown whole or not at all: a cut expression would say something false.
    if site.condition and len(site.condition) <= _MAX_CONDITION:
        text += f" when {site.condition}"
    return text + "."


def write_pack(records: Sequence[dict[str, Any]], path: Path, fmt: str) -> int:
    """Write the records as JSON lines (gzip-compressed for ``jsonl.gz``); returns the bytes.

    A line leaves out ``"schemaVersion": 2``, which a pack's reader understands
    (:func:`errkb.records.pack_value`).
    """
    body = "".join(
        json.dumps(_unstamped(r), ensure_ascii=False, separators=(",", ":")) + "\n" for r in records
    ).encode()
    if fmt == "jsonl.gz":
        # mtime=0: the same records give the same bytes, so a rebuilt pack diffs clean.
        body = gzip.compress(body, mtime=0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(body)
    return len(body)


def _unstamped(record: dict[str, Any]) -> dict[str, Any]:
    """The record without the schema version a pack's line need not say."""
    if record.get("schemaVersion") == SCHEMA_VERSION:
        return {k: v for k, v in record.items() if k != "schemaVersion"}
    return record
