"""Advisors: callables that turn a match and its evidence into tailored advice.

An advisor is any callable ``(match, evidence) -> Advice | None``. Records name the advisors
that apply to them (``"advisors": ["kv-cache"]``); the names are looked up in the static table
:data:`BUILTIN` and then in the entry-point group ``errkb.advisors``. Nothing named by a record
is imported unless it is in one of those two places.
"""

from __future__ import annotations

import importlib
import threading
import time
import traceback
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from errkb import _plugins
from errkb.diagnosis import ExampleFix, Fact, Finding, Solution, debug_enabled

if TYPE_CHECKING:
    from errkb.evidence import Evidence
    from errkb.match import Match

__all__ = ["BUILTIN", "ENTRY_POINT_GROUP", "Advice", "Advisor", "load", "run_advisors"]

ENTRY_POINT_GROUP = "errkb.advisors"

#: Built-in advisors: name -> "module:attribute", imported on first use.
BUILTIN: dict[str, str] = {
    "kv-cache": "errkb.advisors.kv_cache:advise",
}


@attrs.frozen(kw_only=True)
class Advice:
    """What an advisor adds: solutions (put before the record's own), facts, an example fix."""

    solutions: tuple[Solution, ...] = ()
    facts: tuple[Fact, ...] = ()
    example_fix: ExampleFix | None = None
    notes: tuple[str, ...] = ()


class Advisor(Protocol):
    """The advisor protocol."""

    def __call__(self, match: Match, evidence: Evidence, /) -> Advice | None:
        """Advice for ``match``, or None when the evidence supports none."""


_cache: dict[str, Advisor] = {}
_lock = threading.Lock()


def load(name: str) -> Advisor:
    """The advisor called ``name``: built-in first, then the ``errkb.advisors`` entry points."""
    with _lock:
        if name in _cache:
            return _cache[name]
        target = BUILTIN.get(name)
        obj: Any
        if target is not None:
            module, _, attr = target.partition(":")
            obj = importlib.import_module(module)
            for part in attr.split(".") if attr else ():
                obj = getattr(obj, part)
        else:
            ep = _plugins.find(ENTRY_POINT_GROUP, name)
            if ep is None:
                raise LookupError(f"no advisor named {name!r}")
            target = ep.value
            obj = _plugins.load(ENTRY_POINT_GROUP, ep)
        if not callable(obj):
            raise TypeError(f"advisor {name!r} ({target}) is not callable")
        _cache[name] = obj
        return obj  # type: ignore[no-any-return]


def run_advisors(
    findings: list[Finding], evidence: Evidence, deadline: float, notes: list[str]
) -> list[Finding]:
    """Apply the advisors of the best finding of each exception, until ``deadline``.

    The other findings of an exception are alternatives, listed but not worked out, so an
    exception costs one advisor run however many records it matched.
    """
    out: list[Finding] = []
    advised: set[int] = set()
    for found in findings:
        finding = found
        if finding.exception in advised:
            out.append(finding)
            continue
        advised.add(finding.exception)
        for name in finding.record.advisors:
            if time.monotonic() >= deadline:
                notes.append(f"advisor {name!r} for {finding.record.id} left out: out of time")
                continue
            try:
                advice = load(name)(finding.match, evidence)
            except _plugins.PluginError:
                continue  # a broken plugin: reported once, in one line, by errkb._plugins
            except Exception as exc:
                notes.append(f"advisor {name!r} failed: {type(exc).__name__}: {exc}")
                if debug_enabled():
                    traceback.print_exc()
                continue
            if advice is not None:
                finding = attrs.evolve(
                    finding,
                    solutions=advice.solutions + finding.solutions,
                    facts=finding.facts + advice.facts,
                    example_fix=advice.example_fix or finding.example_fix,
                )
                notes.extend(n for n in advice.notes if n not in notes)
        out.append(finding)
    return out
