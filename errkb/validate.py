"""Checks over a set of records that no single record can make alone.

:func:`errkb.records.load_paths` validates each record by itself (schema, regex, its own examples
and counterexamples, duplicate ids). Here the records are checked against each other: on each of
a record's examples, raised at the record's own raise site, no other record may rank strictly
higher, or the record could never be the answer for the very message it was written for.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb.exceptions import RecordError
from errkb.match import Matcher

if TYPE_CHECKING:
    from collections.abc import Sequence

    from errkb.records import Record

__all__ = ["check_ranking"]


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
            own = next((m.score for m in matches if m.record.id == record.id), None)
            if own is None:
                continue  # reported by the loader already
            above = [m for m in matches if m.score > own]
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
