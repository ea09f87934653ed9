"""Installed versions as facts, for records that say which releases raise them.

A record with ``versions`` or ``skew`` names a distribution; the diagnosis then states which
release of it this Python has (the ``installed`` probe, from the distribution's metadata, so
``not installed`` is a fact too) and, for an error of version skew, where that release stands
against the change: ``get_max_length = removed in 4.49.0 (last in 4.48.3); the installed
5.24.0 is newer``.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb.findings import Fact
from errkb.probes.installed import compare_versions

if TYPE_CHECKING:
    from errkb._derive import DerivedFix
    from errkb.evidence import Evidence
    from errkb.records import Record, Skew, Versions

__all__ = ["elsewhere_fix", "version_facts"]

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
    pasted = _pasted_releases(evidence)
    reading = evidence.probe("installed") if pasted is None else pasted
    if not isinstance(reading, Mapping):
        return ()
    installed = reading.get(dist)
    if installed is None and pasted is not None:
        return ()  # the paste does not say it; this machine's release is not the reporter's
    if installed is None:
        return (Fact(name=dist, value="not installed", source="installed"),)
    facts = [Fact(name=dist, value=str(installed), source="installed")]
    if skew is not None and skew.changed_in:
        facts.append(_skew_fact(skew, str(installed)))
    elif versions is not None:
        facts.extend(_range_fact(versions, str(installed)))
    if pasted is not None:  # the reporter's release, as their report tool listed it: said once
        return tuple(attrs.evolve(f, source="paste") for f in facts[1:])
    return tuple(facts)


def _pasted_releases(evidence: Evidence) -> dict[str, str] | None:
    """The releases a pasted text's report tools list (collect_env, pip lines), else ``None``.

    A paste with an environment report describes another machine: its releases are the ones
    the error ran with, and this machine's are not shown beside them.
    """
    if evidence.text is None:
        return None
    pasted = evidence.probe("pasted-environment")
    if pasted is None:
        return None
    return {d.name.lower().replace("_", "-"): d.version for d in
            pasted.environment.stack.distributions}  # fmt: skip


def elsewhere_fix(record: Record, evidence: Evidence) -> DerivedFix | None:
    """When the installed release has the name the skew record is about, what to do instead.

    A name added in 4.49.0 that this Python cannot import while its transformers is 5.24.0 (or
    a removed name while it is still an older release that has it) is not version skew: the
    import reached another copy of the package. The fix is then to find that copy, not to pin.
    """
    skew: Skew | None = record.skew
    if skew is None or not skew.changed_in:
        return None
    reading = evidence.probe("installed")
    installed = reading.get(skew.distribution) if isinstance(reading, Mapping) else None
    if installed is None:
        return None
    if skew.change == "added":
        side = compare_versions(str(installed), skew.changed_in)
        has_it = side is not None and side >= 0
    elif skew.change in ("removed", "renamed", "moved") and skew.last_before:
        side = compare_versions(str(installed), skew.last_before)
        has_it = side is not None and side <= 0
    else:
        has_it = False
    if not has_it:
        return None
    from errkb._derive import DerivedFix  # only here: the first screen of a match needs it

    short = skew.name.rsplit(".", 1)[-1]
    module = skew.name.split(".", 1)[0]  # the top-level package the name is imported from
    command = (
        f'python -c "import {module}, sys; print({module}.__version__, {module}.__file__, '
        'sys.executable)"'
    )
    return DerivedFix(
        text=(
            f"The installed {skew.distribution} {installed} has `{short}`, so this import "
            f"reached another copy of {module}: a stale or second install, another environment, "
            f"or a folder or file named {module} beside the script. See which one Python "
            f"imports: {command}"
        ),
        source="installed",
        command=command,
    )


def _skew_fact(skew: Skew, installed: str) -> Fact:
    short = skew.name.rsplit(".", 1)[-1]
    verb = _VERB.get(skew.change, skew.change)
    exact = skew.exact is not False or not skew.last_before
    change = (
        f"{verb} in {skew.changed_in}"
        if exact
        else f"{verb} between {skew.last_before} and {skew.changed_in} (the releases between "
        "were not checked)"
    )
    if skew.last_before and exact:
        change += f" (last in {skew.last_before})" if skew.change != "added" else ""
    side = compare_versions(installed, skew.changed_in or "")
    before = compare_versions(installed, skew.last_before) if skew.last_before else None
    if not exact and side is not None and side < 0 and before is not None and before > 0:
        change += f"; the installed {installed} is one of the releases not checked"
    elif side is not None:
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
    from errkb.registry import shipped_releases

    listed = shipped_releases(versions.distribution) or {}
    releases = [str(v) for v in listed.get("releases", ())]  # type: ignore[attr-defined]
    unread: Mapping[str, str] = listed.get("unread") or {}  # type: ignore[assignment]
    first = _bound(versions.first, releases, unread, oldest=True) if versions.first else "?"
    last = (
        _bound(versions.last, releases, unread, oldest=False)
        if versions.last
        else f"{versions.checked or 'the newest checked'} and on"
    )
    where = _where(versions, installed, releases, unread)
    return (
        Fact(
            name="raised by",
            value=f"{versions.distribution} {first} to {last}; the installed {installed} is {where}",
            source="installed",
            note="the record's release range, against the installed release",
        ),
    )


def _bound(version: str, releases: list[str], unread: Mapping[str, str], *, oldest: bool) -> str:
    """A range's end as the release list qualifies it: the oldest checked, releases not read.

    ``4.40.0 (4.39.0 not checked)``: the releases beyond the bound that errkb could not read
    may raise it too.
    """
    if version not in releases:
        return version
    at = releases.index(version)
    if oldest and at == 0:
        return f"{version} (the oldest release checked)"
    beyond = reversed(releases[:at]) if oldest else iter(releases[at + 1 :])
    gap = list(itertools.takewhile(lambda r: r in unread, beyond))
    if not gap:
        return version
    return f"{version} ({', '.join(sorted(gap, key=releases.index))} not checked)"


def _where(
    versions: Versions, installed: str, releases: list[str], unread: Mapping[str, str]
) -> str:
    """Where the installed release stands against the range, saying what is not known."""
    if installed in unread:
        return f"a release errkb could not read ({unread[installed]})"
    if releases and (compare_versions(installed, releases[0]) or 0) < 0:
        return f"older than every release checked (the oldest is {releases[0]})"
    if releases and versions.last is None and (compare_versions(installed, releases[-1]) or 0) > 0:
        return f"newer than every release checked (the newest is {releases[-1]})"
    inside = (
        versions.first is None or (compare_versions(installed, versions.first) or 0) >= 0
    ) and (versions.last is None or (compare_versions(installed, versions.last) or 0) <= 0)
    return "within" if inside else "outside"
