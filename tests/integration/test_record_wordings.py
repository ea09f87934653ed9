"""Hand-written records cover every wording of the releases they claim (issue 24).

A hand-written record's ``versions`` say which releases raise its error and where
(``sites``: release -> ``path:line``). The mined pack of that distribution (``records/mined/``)
holds what each raise statement printed, release by release. A mined record raised at the same
file and line at a release both list is the same raise statement, so its wording is one the
hand-written record claims: the record's pattern must match it. Before this test, vLLM's V0
record required backticks its pattern was written with, and nothing checked the other wordings.

A wording is covered when the record's pattern matches a message made from it (each
placeholder filled with what the record's own examples captured under that name, with the
worded text the source puts there, else a number), or when one of the record's examples is a
message of that wording (a generic frame, ``Error while deserializing header: {}``, whose
placeholder carries the record's cause). A wording another hand-written record matches is that
record's error, raised from the same statement (vLLM's "failed to be inspected" and "are not
supported" share one ``raise``).
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from errkb._patterns import compile_pattern, search
from errkb.records import Record, Versions, load_paths

ROOT = Path(__file__).resolve().parents[2]
RECORDS = ROOT / "records"
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
#: Placeholders whose value the source words itself, filled with that text: vLLM's bfloat16
#: check sets ``compute_str`` to "has compute capability X.Y" (vllm/platforms/cuda.py, 0.33.0;
#: vllm/v1/worker/gpu_worker.py, 0.8.0).
_WORDED = {"compute_str": "has compute capability 6.1"}


@functools.cache
def _written() -> tuple[Record, ...]:
    folders = sorted(str(p) for p in RECORDS.iterdir() if p.is_dir() and p.name != "mined")
    return tuple(r for r in load_paths(folders).records if not r.retired)


@functools.cache
def _mined(distribution: str) -> tuple[dict[str, Any], ...]:
    pack = RECORDS / "mined" / f"{distribution.replace('-', '_').lower()}.jsonl"
    if not pack.exists():
        return ()
    with pack.open(encoding="utf-8") as f:
        return tuple(json.loads(line) for line in f if line.strip())


def _files(versions: Versions) -> set[str]:
    """The files a ``versions.sites`` names (``":line"`` is the file listed before it)."""
    files, path = set(), ""
    for _, where in versions.sites:
        path = where.rpartition(":")[0] or path
        files.add(path)
    return files


@functools.cache
def _by_file(distribution: str) -> dict[str, list[tuple[dict[str, Any], Versions]]]:
    """The mined records of a pack with versions, by each file their sites name."""
    found: dict[str, list[tuple[dict[str, Any], Versions]]] = {}
    for mined in _mined(distribution):
        if "versions" in mined:
            versions = _versions(mined)
            for file in _files(versions):
                found.setdefault(file, []).append((mined, versions))
    return found


def _versions(data: dict[str, Any]) -> Versions:
    v = data["versions"]
    return Versions(
        distribution=v["distribution"],
        first=v.get("first"),
        last=v.get("last"),
        sites=tuple(v.get("sites", {}).items()),
    )


def _same_statement(record: Record, mined: Versions) -> bool:
    """Whether both say the same file and line raise it, at a release both list."""
    assert record.versions is not None
    both = {r for r, _ in record.versions.sites} & {r for r, _ in mined.sites}
    return any(
        (site := record.versions.site_at(release)) is not None and site == mined.site_at(release)
        for release in both
    )


def _message(record: Record, mined: dict[str, Any]) -> str:
    """A message of the mined wording, filled from what the record's examples captured."""
    own = compile_pattern(record.message_pattern)
    captured: dict[str, str] = dict(_WORDED)
    for example in record.examples:
        hit = search(own, example)
        if hit is not None:
            captured.update({k: v for k, v in hit.groupdict().items() if v})
    groups = compile_pattern(mined["messagePattern"]).groupindex
    names = {index: name for name, index in groups.items()}
    count = 0

    def fill(_: re.Match[str]) -> str:
        nonlocal count
        count += 1
        return captured.get(names.get(count, ""), "4096")

    text = mined["errorMessage"].replace("{{", "\0").replace("}}", "\1")
    return _PLACEHOLDER.sub(fill, text).replace("\0", "{").replace("\1", "}")


def _claimed_elsewhere(record: Record, message: str) -> bool:
    return any(
        other.id != record.id and search(compile_pattern(other.message_pattern), message)
        for other in _written()
    )


def _uncovered() -> list[str]:
    problems = []
    for record in _written():
        if record.versions is None:
            continue
        own = compile_pattern(record.message_pattern)
        by_file = _by_file(record.versions.distribution)
        near = {m["id"]: (m, v) for f in _files(record.versions) for m, v in by_file.get(f, ())}
        for mined, versions in near.values():
            if not _same_statement(record, versions):
                continue
            message = _message(record, mined)
            if search(own, message) is not None:
                continue
            wording = compile_pattern(mined["messagePattern"])
            if any(search(wording, e) is not None for e in record.examples):
                continue
            if _claimed_elsewhere(record, message):
                continue
            v = mined["versions"]
            problems.append(
                f"{record.id} misses {mined['id']} ({v.get('first')} to {v.get('last') or 'now'}):"
                f" {message[:160]!r}"
            )
    return problems


def test_hand_written_patterns_cover_the_mined_wordings_of_their_releases():
    """Every wording a record's raise sites printed, per the mined packs, matches its pattern."""
    assert [] == _uncovered()


def test_the_check_finds_a_wording_a_record_misses():
    """The check can fail: vLLM's V0 record is found at the raise statement its mined twin
    names, and a pattern narrowed to a word vLLM never printed misses that wording."""
    kv = next(r for r in _written() if r.id == "vllm-kv-cache-max-seq-len")
    mined = next(m for m in _mined("vllm") if m["id"] == "mined-vllm-b0be92bce2f3")
    assert _same_statement(kv, _versions(mined))
    narrowed = kv.message_pattern.replace("`gpu_memory_utilization`", "`gpu_memory_util`")
    assert search(compile_pattern(narrowed), _message(kv, mined)) is None
