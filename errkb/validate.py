"""Checks over a set of records that no single record can make alone.

:func:`errkb.records.load_paths` validates each record by itself (schema, regex, its own examples
and counterexamples, duplicate ids). Here the records are checked against each other: on each of
a record's examples, raised at the record's own raise site, no other record may rank strictly
higher, or the record could never be the answer for the very message it was written for; and
against the code they name: each advisor a record names must exist and be able to read the
record's pattern (:func:`check_advisors`); and a variant record is never looser than its
original (:func:`check_variants`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from errkb.exceptions import RecordError
from errkb.match import Matcher

if TYPE_CHECKING:
    from collections.abc import Sequence

    from errkb.records import Record

__all__ = ["check_advisors", "check_published", "check_ranking", "check_variants"]


def check_variants(records: Sequence[Record]) -> list[RecordError]:
    """One problem per variant record looser than its original, or whose original is missing.

    A variant (``variantOf``: a vendored copy of another record's error, such as ChatTTS's
    copy of vLLM's engine) must never be looser than its original: the original must match
    every example of the variant, whole or cut, so that without traceback evidence of the copy
    the original (the more widely used library) is found too and wins.
    """
    by_id = {r.id: r for r in records}
    problems: list[RecordError] = []
    for record in records:
        if record.variant_of is None or record.retired:
            continue
        original = by_id.get(record.variant_of)
        if original is None:
            problems.append(
                RecordError(
                    record.source,
                    f"variantOf names {record.variant_of!r}, which is not among these records",
                    record_id=record.id,
                    field="variantOf",
                )
            )
            continue
        matcher = Matcher([original])
        for i, example in enumerate(record.examples):
            if not matcher.match(example):
                problems.append(
                    RecordError(
                        record.source,
                        f"item {i}: looser than its original {original.id!r}, which does not "
                        "match this example",
                        record_id=record.id,
                        field="examples",
                    )
                )
    return problems


def check_advisors(records: Sequence[Record]) -> list[RecordError]:
    """One problem per advisor a record names that does not exist or cannot read its pattern.

    See :func:`errkb.advisors.check`: the advisor must be built in or installed, and the
    record's pattern must have the capture groups of one of the advisor's variants.
    """
    from errkb import advisors
    from errkb._patterns import compile_pattern

    problems: list[RecordError] = []
    for record in records:
        if not record.advisors:
            continue
        groups = set(compile_pattern(record.message_pattern).groupindex)
        for name in record.advisors:
            problem = advisors.check(name, groups)
            if problem is not None:
                problems.append(
                    RecordError(record.source, problem, record_id=record.id, field="advisors")
                )
    return problems


def check_ranking(records: Sequence[Record], matcher: Matcher | None = None) -> list[RecordError]:
    """One problem per example on which another record outranks the example's own record."""
    matcher = matcher or Matcher(records)
    problems: list[RecordError] = []
    for record in records:
        if record.retired:
            continue
        for i, example in enumerate(record.examples):
            site = (record.file_path,) if record.file_path else ()
            matches = matcher.match(example, record.error_class, files=site)
            ids = [m.record.id for m in matches]
            if record.id not in ids:
                continue  # reported by the loader already
            # Ranked before it (the matcher's one order: a mined record stays below a
            # hand-written one whatever its score), and by more than a tie.
            own = matches[ids.index(record.id)].score
            above = [m for m in matches[: ids.index(record.id)] if m.score > own]
            if above:
                rivals = ", ".join(f"{m.record.id} ({m.score})" for m in above[:3])
                problems.append(
                    RecordError(
                        record.source,
                        f"item {i}: outranked on its own example by {rivals}; own score {own}",
                        record_id=record.id,
                        field="examples",
                    )
                )
    return problems


def check_published(
    records: Sequence[Record], published: str | os.PathLike[str]
) -> list[RecordError]:
    """One problem per published id that no record carries any more.

    Published records are never deleted: one that no longer applies stays, marked
    ``"retired": true``, so that its id keeps its meaning for everyone who stored it.
    """
    try:
        lines = Path(published).read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        return [
            RecordError(
                os.fspath(published), f"cannot read the list of published ids ({exc.strerror})"
            )
        ]
    present = {r.id for r in records}
    return [
        RecordError(
            os.fspath(published),
            "published record is gone: mark it retired instead of deleting it",
            record_id=rid,
        )
        for rid in (line.strip() for line in lines)
        if rid and not rid.startswith("#") and rid not in present
    ]
