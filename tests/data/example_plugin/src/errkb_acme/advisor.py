"""The advisor: a tailored solution from the match's captures and the probe's reading."""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb.advisors import Advice, Contract, Variant, advisor
from errkb.findings import Fact, Solution

if TYPE_CHECKING:
    from errkb.evidence import Evidence
    from errkb.match import Match


#: The name records use, and the capture groups it needs: errkb validate checks records by it.
CONTRACT = Contract(
    name="acme-widget", variants=(Variant(name="jammed", requires={"speed"}, reads={"name"}),)
)


@advisor(CONTRACT)
def advise(match: Match, evidence: Evidence) -> Advice | None:
    """Halve the speed, and say how many spares the acme-widgets probe counted."""
    speed = match.captures.get("speed")
    if not isinstance(speed, int):
        return None
    reading = evidence.probe("acme-widgets") or {}
    spares = reading.get("spare_widgets")
    facts = [Fact(name="widget_speed", value=speed, unit="rpm", source="message")]
    text = f"Run widget {match.captures.get('name')} at {speed // 2} rpm or less."
    if spares is not None:
        facts.append(Fact(name="spare_widgets", value=spares, source="probe"))
        text += f" {spares} spare widgets are on this machine if it stays jammed."
    return Advice(
        solutions=(Solution(text=text, settings={"max_rpm": speed // 2}),),
        facts=tuple(facts),
    )
