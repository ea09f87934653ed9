"""The doctor's data: the environment as read, the verdicts, and the checkup holding both.

Plain frozen values, as a diagnosis is: the renderers (:mod:`errkb.render`) turn a
:class:`Checkup` into text, Markdown or JSON; nothing here prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable

    from errkb.probes.extensions import Extension
    from errkb.probes.gpu import NvmlReading
    from errkb.probes.stack import StackReading
    from errkb.probes.system import SystemReading
    from errkb.probes.torch_build import TorchBuild

__all__ = ["SCHEMA", "Checkup", "Environment", "Severity", "Verdict"]

#: The version of the JSON form (``errkb doctor --json``).
SCHEMA = "errkb.doctor/1"

#: ``broken``: something fails now (exit status 1); ``warning``: it works with a limit or may
#: fail under load; ``note``: a fact worth saying (no GPU, no torch).
Severity = Literal["broken", "warning", "note"]
_ORDER = {"broken": 0, "warning": 1, "note": 2}


@attrs.frozen(kw_only=True)
class Environment:
    """Every fact the doctor read, each probe's reading with its source.

    ``nvml`` is ``None`` when NVML could not be read, ``nvml_error`` says why. ``timings``
    holds each probe's name and the seconds it took.
    """

    system: SystemReading
    nvml: NvmlReading | None
    nvml_error: str | None
    torch: TorchBuild
    stack: StackReading
    extensions: tuple[Extension, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()


@attrs.frozen(kw_only=True)
class Verdict:
    """One finding: what is wrong, why (with the facts and table rows it rests on), the fix.

    ``commands`` are shown, never run. ``sources`` cite the table rows the verdict used.
    """

    code: str
    severity: Severity
    title: str
    why: str
    fix: str = ""
    commands: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()


def _most_serious_first(verdicts: Iterable[Verdict]) -> tuple[Verdict, ...]:
    return tuple(sorted(verdicts, key=lambda v: _ORDER[v.severity]))


@attrs.frozen(kw_only=True)
class Checkup:
    """The environment and the verdicts on it, the most serious first."""

    environment: Environment
    verdicts: tuple[Verdict, ...] = attrs.field(converter=_most_serious_first)
    seconds: float = 0.0

    @property
    def broken(self) -> bool:
        """True when any verdict says something is broken."""
        return any(v.severity == "broken" for v in self.verdicts)

    def to_dict(self) -> dict[str, object]:
        """The JSON form: ``schema``, ``broken``, ``verdicts``, ``environment``, ``seconds``."""
        return {
            "schema": SCHEMA,
            "broken": self.broken,
            "verdicts": [attrs.asdict(v) for v in self.verdicts],
            "environment": attrs.asdict(self.environment),
            "seconds": round(self.seconds, 2),
        }
