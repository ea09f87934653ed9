r"""Helpers for testing your own records, advisors and plugins against errkb.

Examples:
    >>> from errkb.testing import record_dict, registry_from_dicts
    >>> reg = registry_from_dicts([record_dict(id="acme-boom", messagePattern=r"boom (?P<n>\\d+)")])
    >>> [(m.record.id, m.captures["n"]) for m in reg.matcher.match("boom 42")]
    [('acme-boom', 42)]
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from errkb._attrs import attrs
from errkb.exceptions import RecordError
from errkb.probes import GpuDevice, GpuReading, Measurements
from errkb.records import SCHEMA_VERSION, record_from_dict
from errkb.registry import Registry

__all__ = ["FakeGpu", "FakeMeasurements", "record_dict", "registry_from_dicts"]


def record_dict(**fields: Any) -> dict[str, Any]:
    """A valid record in the dataset's JSON form (camelCase keys), with ``fields`` applied.

    Only the required fields get defaults; pass any other key of the schema as it is in JSON.
    """
    rid = fields.get("id", "test-record")
    base: dict[str, Any] = {
        "schemaVersion": SCHEMA_VERSION,
        "id": rid,
        "slug": fields.get("slug", rid),
        "errorMessage": "Something failed ({x}).",
        "messagePattern": r"Something failed \((?P<x>\d+)\)\.",
    }
    base.update(fields)
    return base


def registry_from_dicts(records: Iterable[dict[str, Any]], *, strict: bool = True) -> Registry:
    """A registry of exactly these records (no built-ins, no plugins).

    With ``strict`` (the default) the first problem found raises :class:`RecordError`.
    """
    loaded = []
    problems: list[RecordError] = []
    for i, data in enumerate(records):
        record, found = record_from_dict(data, source=f"<dict {i}>")
        if strict and found:
            raise found[0]
        problems.extend(found)
        if record is not None:
            loaded.append(record)
    return Registry(loaded, problems)


@attrs.frozen(kw_only=True)
class FakeGpu(GpuDevice):
    """A GPU with the figures you give (bytes), injected instead of measured.

    The figures are reported with the source ``gpu``, as live measurements would be, so a test
    sees what a user sees.

    >>> from errkb.units import GIB
    >>> FakeGpu(total_bytes=80 * GIB, free_bytes=70 * GIB).name
    'Fake GPU'
    """

    index: int = 0
    name: str = "Fake GPU"
    capability: tuple[int, int] | None = (9, 0)


def _reading(value: GpuReading | Iterable[GpuDevice]) -> GpuReading:
    return value if isinstance(value, GpuReading) else GpuReading(devices=tuple(value))


@attrs.frozen(kw_only=True)
class FakeMeasurements(Measurements):
    """Measurements to pass as ``Options(measurements=...)``, so no probe touches the machine.

    >>> from errkb.units import GIB
    >>> from errkb import Options
    >>> options = Options(measurements=FakeMeasurements(gpus=[FakeGpu(total_bytes=80 * GIB)]))
    >>> options.measurements.gpus.devices[0].total_bytes == 80 * GIB
    True

    ``gpus=[]`` mimics a machine without a usable GPU.
    """

    gpus: GpuReading | None = attrs.field(default=GpuReading(), converter=_reading)
