"""The ``errkb.scan/1`` object of a scan, each group with its Fix line (docs/json.md).

One road for ``errkb scan`` (one file or a fleet) and the console's ``POST /v1/scan``: the map
step's merged :class:`errkb.scan.ScanPart`, each group's example explained as ``errkb explain``
explains it for its Fix line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from errkb.records import Record
    from errkb.registry import Registry
    from errkb.scan import ScanPart


def fix_line() -> Callable[[Record, str], str | None]:
    """A group's Fix line: the diagnosis' of its example, as ``errkb explain`` gives it."""
    from errkb.diagnosis import explain
    from errkb.options import Options
    from errkb.registry import Registry

    options = Options(probes=False)

    def fix(record: Record, example: str) -> str | None:
        # The record alone: its finding is the one wanted, and searching every other record's
        # pattern (2,400 compiled for a 134 MB log's 133 groups) tripled a scan's time.
        diagnosis = explain(example, options=options, registry=Registry([record]))
        finding = (
            next((f for f in diagnosis.findings if f.record.id == record.id), None)
            if diagnosis is not None
            else None
        )
        if finding is None:
            return record.solutions[0] if record.solutions else None
        if finding.fix is not None:
            return finding.fix.text
        return finding.solutions[0].text if finding.solutions else None

    return fix


def report(part: ScanPart, registry: Registry) -> dict[str, Any]:
    """The ``errkb.scan/1`` object of ``part`` (docs/json.md)."""
    return part.to_dict(registry, fix=fix_line())
