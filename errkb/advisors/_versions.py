"""Installed versions as facts, for records that say which releases raise them.

A record with ``versions`` or ``skew`` names a distribution; the diagnosis then states which
release of it this Python has (the ``installed`` probe, from the distribution's metadata, so
``not installed`` is a fact too) and, for an error of version skew, where that release stands
against the change: ``get_max_length = removed in 4.49.0 (last in 4.48.3); the installed
5.24.0 is newer``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from errkb.findings import Fact
from errkb.probes.installed import compare_versions

if TYPE_CHECKING:
    from errkb.evidence import Evidence
    from errkb.records import Record, Skew, Versions

__all__ = ["version_facts"]

_SIDE = {-1: "older", 0: "the same release", 1: "newer"}
_VERB = {
    "removed": "removed",
    "renamed": "renamed",
    "moved": "moved",
    "added": "added",
    "required": "made required",
}


def version_facts(record: Record, evidence: Evidence) -> tuple[Fact, ...]:
    """The installed release of the record's distribution, and how it compares, as facts."""
    skew: Skew | None = record.skew
    versions: Versions | None = record.versions
    dist = skew.distribution if skew is not None else versions.distribution if versions else None
    if not dist:
        return ()
    reading = evidence.probe("installed")
    if not isinstance(reading, Mapping):
        return ()
    installed = reading.get(dist)
    if installed is None:
        return (Fact(name=dist, value="not installed", source="installed"),)
    facts = [Fact(name=dist, value=str(installed), source="installed")]
    if skew is not None and skew.changed_in:
        facts.append(_skew_fact(skew, str(installed)))
    elif versions is not None:
        facts.extend(_range_fact(versions, str(installed)))
    return tuple(facts)


def _skew_fact(skew: Skew, installed: str) -> Fact:
    short = skew.name.rsplit(".", 1)[-1]
    change = f"{_VERB.get(skew.change, skew.change)} in {skew.changed_in}"
    if skew.last_before:
        change += f" (last in {skew.last_before})" if skew.change != "added" else ""
    side = compare_versions(installed, skew.changed_in or "")
    if side is not None:
        where = _SIDE[side] if side else "the release of the change"
        change += f"; the installed {installed} is {where}"
    return Fact(
        name=f"`{short}`",
        value=change,
        source="installed",
        note="the change as the record states it, against the installed release",
    )


def _range_fact(versions: Versions, installed: str) -> tuple[Fact, ...]:
    if versions.first is None and versions.last is None:
        return ()
    first = versions.first or "?"
    last = versions.last or f"{versions.checked or 'the newest checked'} and on"
    inside = (
        versions.first is None or (compare_versions(installed, versions.first) or 0) >= 0
    ) and (versions.last is None or (compare_versions(installed, versions.last) or 0) <= 0)
    where = "within" if inside else "outside"
    return (
        Fact(
            name="raised by",
            value=f"{versions.distribution} {first} to {last}; the installed {installed} is {where}",
            source="installed",
            note="the record's release range, against the installed release",
        ),
    )
