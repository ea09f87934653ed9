"""Evidence for advisors: the live exception chain's frames and the values the user gave.

Evidence lives only while :func:`errkb.diagnose` runs. Advisors read frame locals through it,
never from the frames directly, and :meth:`Evidence.close` drops every reference, so nothing
of the traceback (GPU tensors included) outlives the diagnosis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from errkb._traceback import FrameView, safe_getattr

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from errkb.findings import ExceptionInfo
    from errkb.options import Options
    from errkb.probes import GpuReading
    from errkb.probes.engine import EngineReading

__all__ = ["Evidence", "FrameView", "safe_getattr"]

_MISSING = object()


class Evidence:
    """What advisors may look at, besides the match: frames, the user's values, the options."""

    def __init__(
        self,
        *,
        options: Options,
        exceptions: Sequence[BaseException],
        text: str | None = None,
    ) -> None:
        self.options = options
        #: The pasted text the exceptions were read from, when it was read whole (``explain``
        #: of a text that fits one window); ``None`` for a live exception. Advisors look in it
        #: for what a traceback does not carry, such as the command line that started vLLM.
        self.text = text
        self.infos: tuple[ExceptionInfo, ...] = ()
        #: What was left out while gathering evidence, and why; the diagnosis shows these.
        self.notes: list[str] = []
        self._cache: dict[str, Any] = {}
        self._views: list[FrameView] = []
        for exc in exceptions:
            tb = exc.__traceback__
            while tb is not None and len(self._views) < 500:
                self._views.append(FrameView(tb.tb_frame, tb.tb_lineno))
                tb = tb.tb_next

    def given(self, name: str, default: Any = None) -> Any:
        """A value the user supplied (a CLI flag or an option; see :class:`errkb.options.Given`).

        ``default`` when the user gave none.
        """
        value = getattr(self.options.given, name)
        return default if value is None else value

    def frames(self) -> Iterator[FrameView]:
        """The live frames of the chain, innermost first."""
        return reversed(self._views)

    def find_local(self, name: str, accept: Callable[[Any], bool] = lambda _: True) -> Any:
        """The innermost frame-local ``name`` that ``accept`` takes, or ``None``."""
        for view in self.frames():
            value = view.local(name, _MISSING)
            if value is not _MISSING and accept(value):
                return value
        return None

    def probe_timeout(self) -> float:
        """How long one probe may take: half the diagnosis' bound, 5 s at most.

        Half, so that a probe that hangs still leaves time to finish and show the diagnosis.
        """
        return max(0.1, min(5.0, self.options.timeout / 2))

    def gpus(self, timeout: float | None = None) -> GpuReading:
        """The visible GPUs (the ``gpu`` probe), or why none could be measured."""
        reading: GpuReading = self.probe("gpu", timeout)
        return reading

    def engine(self) -> EngineReading | None:
        """The engine objects found in the frames (the ``engine`` probe)."""
        reading: EngineReading | None = self.probe("engine")
        return reading

    def probe(self, name: str, timeout: float | None = None) -> Any:
        """The reading of the probe ``name``, once per diagnosis: the one path to a measurement.

        Injected readings come first (``Options(measurements=Measurements(gpus=...,
        readings={name: ...}))``), then the built-in probe of that name
        (:data:`errkb.probes.BUILTIN`: ``gpu``, ``engine``, ``model``), then a plugin probe
        (entry-point group ``errkb.probes``). ``None`` for a plugin probe when probes are off,
        when no installed plugin declares ``name``, or when it raised or ran past ``timeout``
        seconds; :attr:`notes` then says why.
        """
        timeout = self.probe_timeout() if timeout is None else timeout
        key = f"probe:{name}"
        if key not in self._cache:
            self._cache[key] = self._read_probe(name, timeout)
        return self._cache[key]

    def _read_probe(self, name: str, timeout: float) -> Any:
        from errkb.probes import builtin_probe, plugin_probe, run_bounded

        injected = self.options.measurements
        if injected is not None:
            if name == "gpu" and injected.gpus is not None:
                return injected.gpus
            if name in injected.readings:
                return injected.readings[name]
        builtin = builtin_probe(name)
        if builtin is not None:
            return builtin(self, timeout)
        if not self.options.probes:
            self._note(f"probe {name!r} not run: probes are off")
            return None
        probe = plugin_probe(name)
        if probe is None:
            self._note(f"probe {name!r} is not installed or could not be loaded")
            return None
        value, reason = run_bounded(probe, timeout, f"probe {name!r}")
        if reason is not None:
            self._note(reason)
        return value

    def _note(self, text: str) -> None:
        if text not in self.notes:
            self.notes.append(text)

    def close(self) -> None:
        """Drop every frame reference (and whatever was read from the frames)."""
        for view in self._views:
            view.close()
        self._views.clear()
        self._cache.clear()
        self.text = None
