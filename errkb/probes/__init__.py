"""Probes: measurements of the live environment, each lazy, bounded in time and tagged.

A probe is a callable that returns a reading. Every probe has a name, and there is one path to
each reading: :meth:`errkb.evidence.Evidence.probe` (injected measurements first, then the
probe, run once per diagnosis). The built-in probes are in the static table :data:`BUILTIN`:
``gpu`` measures the visible GPUs (torch), ``engine`` reads an LLM engine's own objects from the
traceback's frames, ``model`` reads the model configuration the user pointed at, ``installed``
reads which release of a distribution is installed (its metadata, never the distribution
itself), ``imports`` where a module name leads in this Python's import system (without
importing it), ``environment`` reads the machine, NVML, the imported torch's build and the installed
set for the environment's verdicts, ``launch`` this process's command line and a free TCP port
(for a rendezvous port that is taken). A built-in probe is called with the evidence and a time
bound. Installed distributions add probes through the entry-point group ``errkb.probes`` (a
name -> a callable without arguments that returns a reading), run in a bounded thread. None of
them imports a heavy library at ``import errkb`` time, and a probe whose library or device is
missing returns an empty reading that says why, instead of raising.

Tests and support tools replace measurements with :class:`errkb.testing.FakeMeasurements`.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from errkb._attrs import attrs

if TYPE_CHECKING:
    from collections.abc import Callable

    from errkb.findings import Source

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "GpuDevice",
    "GpuReading",
    "Measurements",
    "builtin_probe",
    "plugin_probe",
    "run_bounded",
]

ENTRY_POINT_GROUP = "errkb.probes"

#: Built-in probes: name -> "module:attribute" of a callable ``(evidence, timeout) -> reading``,
#: imported on first use. A built-in probe is errkb's own code and runs in the diagnosis'
#: thread: it keeps to ``timeout`` and to ``evidence.options.probes`` itself (the ``gpu`` probe
#: measures in a bounded thread, and nothing when probes are off; ``engine`` and ``model`` read
#: frames and a file the user named, which probes-off does not forbid).
BUILTIN: dict[str, str] = {
    "engine": "errkb.probes.engine:probe",
    "environment": "errkb.probes.environment:probe",
    "gpu": "errkb.probes.gpu:probe",
    "imports": "errkb.probes.imports:probe",
    "installed": "errkb.probes.installed:probe",
    "launch": "errkb.probes.launch:probe",
    "model": "errkb.probes.model:probe",
    "pasted-environment": "errkb.probes.pasted_env:probe",
}

T = TypeVar("T")


@attrs.frozen(kw_only=True)
class GpuDevice:
    """One visible GPU. Byte counts are ``None`` where they could not be measured.

    ``source`` says where the figures came from: ``gpu`` for a live measurement.
    """

    index: int
    name: str
    total_bytes: int
    free_bytes: int | None = None
    allocated_bytes: int | None = None
    reserved_bytes: int | None = None
    #: The most torch's allocator held at once in this process (``max_memory_reserved``).
    peak_reserved_bytes: int | None = None
    capability: tuple[int, int] | None = None
    other_processes_bytes: int | None = None
    #: The other processes holding memory on it, ``(pid, bytes)``, where NVML names them.
    other_processes: tuple[tuple[int, int], ...] = ()
    source: Source = "gpu"

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        out = attrs.asdict(self)
        out["capability"] = ".".join(map(str, self.capability)) if self.capability else None
        return out


@attrs.frozen(kw_only=True)
class GpuReading:
    """The GPUs visible to this process, or why none could be measured (``error``)."""

    devices: tuple[GpuDevice, ...] = ()
    error: str | None = None


def _readings(values: Mapping[str, Any]) -> dict[str, Any]:
    # Not the builtin dict: attrs would read its signature through Python's tokenizer.
    return dict(values)


@attrs.frozen(kw_only=True)
class Measurements:
    """Measurements handed in instead of probed (tests, support tools, other machines).

    A field left ``None`` is probed live as usual (when probes are on). ``readings`` holds the
    readings of plugin probes by name, used instead of running them.
    """

    gpus: GpuReading | None = None
    readings: Mapping[str, Any] = attrs.field(factory=dict, converter=_readings)


def builtin_probe(name: str) -> Callable[[Any, float], Any] | None:
    """The built-in probe called ``name`` (see :data:`BUILTIN`), or None."""
    target = BUILTIN.get(name)
    if target is None:
        return None
    import importlib

    module, _, attr = target.partition(":")
    probe: Callable[[Any, float], Any] = getattr(importlib.import_module(module), attr)
    return probe


_plugin_lock = threading.Lock()
_plugins_loaded: dict[str, Callable[[], Any] | None] = {}


def plugin_probe(name: str) -> Callable[[], Any] | None:
    """The probe called ``name`` in the entry-point group ``errkb.probes``, loaded on first use.

    None when no installed distribution declares it, or when it cannot be loaded or is not
    callable: such a plugin is skipped and reported once, in one line (``errkb._plugins``).
    """
    from errkb import _plugins

    with _plugin_lock:
        if name not in _plugins_loaded:
            probe: Callable[[], Any] | None = None
            ep = _plugins.find(ENTRY_POINT_GROUP, name)
            if ep is not None:
                try:
                    obj = _plugins.load(ENTRY_POINT_GROUP, ep)
                except _plugins.PluginError:
                    obj = None
                else:
                    if callable(obj):
                        probe = obj
                    else:
                        _plugins.report(ENTRY_POINT_GROUP, ep, f"not callable: {obj!r}")
            _plugins_loaded[name] = probe
        return _plugins_loaded[name]


def run_bounded(func: Callable[[], T], timeout: float, what: str) -> tuple[T | None, str | None]:
    """Run ``func`` in a daemon thread; give up after ``timeout`` seconds.

    Returns ``(result, None)``, or ``(None, reason)`` when it raised or did not answer in time:
    a driver that hangs must not hang a process that is exiting.
    """
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["value"] = func()
        except BaseException as exc:
            box["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=work, name=f"errkb-probe-{what}", daemon=True)
    worker.start()
    worker.join(max(timeout, 0.0))
    if worker.is_alive():
        return None, f"{what} did not answer within {timeout:.1f}s"
    if "error" in box:
        return None, f"{what} failed ({box['error']})"
    return box.get("value"), None
