"""Plugins: what installed distributions declare in errkb's entry-point groups.

Three groups: ``errkb.records`` (record packs), ``errkb.probes`` (a name -> a callable that
returns readings) and ``errkb.advisors`` (a name -> an advisor). They are read on first use,
never at ``import errkb``. A plugin that cannot be loaded is skipped and reported once, as one
line (:func:`problems`); every diagnosis carries those lines as notes.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from errkb._dists import EntryPoint

__all__ = ["GROUPS", "PluginError", "entry_points", "find", "load", "problems", "report"]

#: The entry-point groups errkb reads.
GROUPS = ("errkb.records", "errkb.probes", "errkb.advisors")

_lock = threading.Lock()
_problems: list[str] = []


class PluginError(LookupError):
    """A plugin could not be loaded; the message is the line already reported.

    ``problem`` is what went wrong, without the plugin's name.
    """

    def __init__(self, line: str, problem: str) -> None:
        super().__init__(line)
        self.problem = problem


def entry_points(group: str) -> list[EntryPoint]:
    """Every entry point of ``group``, as the installed distributions declare them.

    Read from their metadata folders (:mod:`errkb._dists`): importing ``importlib.metadata``
    would cost more than the whole of a diagnosis.
    """
    from errkb._dists import entry_points as installed

    return installed(group)


def find(group: str, name: str) -> EntryPoint | None:
    """The entry point called ``name`` in ``group`` (the first one declared), or None."""
    return next((ep for ep in entry_points(group) if ep.name == name), None)


def report(group: str, ep: EntryPoint, problem: str) -> str:
    """Record that the plugin ``ep`` of ``group`` was skipped; returns the one-line report."""
    first = problem.strip().splitlines()[0] if problem.strip() else "unknown problem"
    line = f"plugin {ep.name!r} ({group} = {ep.value}) skipped: {first[:300]}"
    with _lock:
        if line not in _problems:
            _problems.append(line)
    return line


def load(group: str, ep: EntryPoint, *, call: bool = False) -> Any:
    """Import what ``ep`` names (and with ``call``, call it when it is a function).

    Raises :class:`PluginError`, already reported, when that fails.
    """
    try:
        obj = ep.load()
        if call and callable(obj) and not isinstance(obj, type):
            obj = obj()
    except Exception as exc:
        problem = f"could not be loaded ({type(exc).__name__}: {exc})"
        raise PluginError(report(group, ep, problem), problem) from exc
    return obj


def problems() -> tuple[str, ...]:
    """The one-line reports of every plugin skipped so far in this process."""
    with _lock:
        return tuple(_problems)
