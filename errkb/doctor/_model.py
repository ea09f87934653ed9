"""The doctor's data: the checkup, holding the environment as read and the verdicts on it.

Plain frozen values, as a diagnosis is: the renderers (:mod:`errkb.render`) turn a
:class:`Checkup` into text, Markdown or JSON; nothing here prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb.advisors.environment._model import SEVERITY_ORDER, Severity, Verdict
from errkb.probes.environment import Environment

if TYPE_CHECKING:
    from collections.abc import Iterable

    from errkb.probes.pasted_env import PastedEnvironment

__all__ = ["SCHEMA", "Checkup", "Environment", "Severity", "Verdict"]

#: The version of the JSON form (``errkb doctor --json``).
SCHEMA = "errkb.doctor/1"


def _most_serious_first(verdicts: Iterable[Verdict]) -> tuple[Verdict, ...]:
    return tuple(sorted(verdicts, key=lambda v: SEVERITY_ORDER[v.severity]))


@attrs.frozen(kw_only=True)
class Checkup:
    """The environment and the verdicts on it, the most serious first.

    ``pasted`` is set when the environment is one a paste describes (``errkb doctor
    --from-paste``): its facts are the report tools' lines, and nothing is this machine's.
    """

    environment: Environment
    verdicts: tuple[Verdict, ...] = attrs.field(converter=_most_serious_first)
    seconds: float = 0.0
    pasted: PastedEnvironment | None = None

    @property
    def broken(self) -> bool:
        """True when any verdict says something is broken."""
        return any(v.severity == "broken" for v in self.verdicts)

    def to_dict(self) -> dict[str, object]:
        """The JSON form: ``schema``, ``broken``, ``verdicts``, ``environment``, ``seconds``.

        A pasted environment adds ``pasted``: the tools found, the facts with their lines, the
        notes.
        """
        data: dict[str, object] = {
            "schema": SCHEMA,
            "broken": self.broken,
            "verdicts": [attrs.asdict(v) for v in self.verdicts],
            "environment": attrs.asdict(self.environment),
            "seconds": round(self.seconds, 2),
        }
        if self.pasted is not None:
            data["pasted"] = {
                "tools": list(self.pasted.tools),
                "facts": [attrs.asdict(f) for f in self.pasted.facts],
                "notes": list(self.pasted.notes),
            }
        return data
