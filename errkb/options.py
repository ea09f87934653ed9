"""One options object for every surface: the hook, the CLI and the API pass it along whole."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    from typing import TextIO

    from errkb.probes import Measurements

__all__ = ["Options"]


def _env_float(name: str, default: float) -> float:
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return default


@attrs.frozen(kw_only=True)
class Options:
    """How to diagnose and how to show the result.

    Attributes:
        file: where rendering goes; ``None`` means ``sys.stderr`` at the time of writing.
        width: columns to render at; ``None`` asks the terminal, else ``COLUMNS``, else 100.
        color: force colour on or off; ``None`` decides from the stream and ``NO_COLOR``,
            ``FORCE_COLOR`` and ``TERM=dumb``.
        ascii: draw boxes with ASCII only; ``None`` decides from the stream's encoding.
        probes: whether advisors may measure the live environment (GPU, model files).
        timeout: seconds the whole diagnosis may take before what is unfinished is left out
            (``ERRKB_TIMEOUT`` sets the default).
        given: values the user supplied instead of measurements (``gpu_memory_bytes``,
            ``gpu_memory_utilization``, ``model``, ``block_size``, ``kv_cache_dtype``), each
            reported with the source "flag".
        records: extra record files or folders, on top of the default sources.
        measurements: measurements to use instead of probing (see
            :class:`errkb.testing.FakeMeasurements`); ``None`` probes live.
    """

    file: TextIO | None = None
    width: int | None = None
    color: bool | None = None
    ascii: bool | None = None
    probes: bool = True
    timeout: float = attrs.field(factory=lambda: _env_float("ERRKB_TIMEOUT", 5.0))
    given: dict[str, Any] = attrs.field(factory=dict, converter=dict)
    records: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    measurements: Measurements | None = None

    def evolve(self, **changes: Any) -> Options:
        """A copy with ``changes`` applied."""
        return attrs.evolve(self, **changes)
