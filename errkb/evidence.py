"""Evidence for advisors: the live exception chain's frames and the values the user gave.

Evidence lives only while :func:`errkb.diagnose` runs. Advisors read frame locals through it,
never from the frames directly, and :meth:`Evidence.close` drops every reference, so nothing
of the traceback (GPU tensors included) outlives the diagnosis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from types import FrameType

    from errkb.diagnosis import ExceptionInfo
    from errkb.options import Options
    from errkb.probes import GpuReading
    from errkb.probes.engine import EngineReading

__all__ = ["Evidence", "FrameView", "safe_getattr"]

_MISSING = object()


def safe_getattr(obj: object, name: str, default: Any = None) -> Any:
    """Read ``obj.name`` without running anything that could hang or raise out.

    Plain attributes are read from the instance dictionary first, so no property runs for them;
    other attributes fall back to ``getattr``, whose errors become ``default``.
    """
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except Exception:
        namespace = None
    if isinstance(namespace, dict) and name in namespace:
        return namespace[name]
    try:
        return getattr(obj, name, default)
    except Exception:
        return default


class FrameView:
    """A read-only view of one live frame: where it is, and its local variables."""

    def __init__(self, frame: FrameType, lineno: int) -> None:
        self._frame: FrameType | None = frame
        self.file = frame.f_code.co_filename
        self.function = frame.f_code.co_name
        self.line = lineno

    def local(self, name: str, default: Any = None) -> Any:
        """The local variable ``name`` (``self`` included), or ``default``."""
        if self._frame is None:
            return default
        try:
            return self._frame.f_locals.get(name, default)
        except Exception:
            return default

    def close(self) -> None:
        """Drop the frame."""
        self._frame = None


class Evidence:
    """What advisors may look at, besides the match: frames, the user's values, the options."""

    def __init__(self, *, options: Options, exceptions: Sequence[BaseException]) -> None:
        self.options = options
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
        """A value the user supplied (a CLI flag or an option), or ``default``."""
        return self.options.given.get(name, default)

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
        """The visible GPUs: injected measurements, else a live probe (once), else nothing."""
        timeout = self.probe_timeout() if timeout is None else timeout
        if "gpus" not in self._cache:
            from errkb.probes import GpuReading

            injected = self.options.measurements
            if injected is not None and injected.gpus is not None:
                self._cache["gpus"] = injected.gpus
            elif not self.options.probes:
                self._cache["gpus"] = GpuReading(error="probes are off (--no-probes)")
            else:
                from errkb.probes.gpu import probe_gpus

                self._cache["gpus"] = probe_gpus(timeout)
        reading: GpuReading = self._cache["gpus"]
        return reading

    def probe(self, name: str, timeout: float | None = None) -> Any:
        """The reading of the plugin probe ``name`` (entry-point group ``errkb.probes``), once.

        Injected readings (``Options(measurements=Measurements(readings={name: ...}))``) come
        first. ``None`` when probes are off, when no installed plugin declares ``name``, or when
        the probe raised or ran past ``timeout`` seconds; :attr:`notes` then says why.
        """
        timeout = self.probe_timeout() if timeout is None else timeout
        key = f"probe:{name}"
        if key not in self._cache:
            self._cache[key] = self._read_probe(name, timeout)
        return self._cache[key]

    def _read_probe(self, name: str, timeout: float) -> Any:
        from errkb.probes import plugin_probe, run_bounded

        injected = self.options.measurements
        if injected is not None and name in injected.readings:
            return injected.readings[name]
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

    def engine(self) -> EngineReading | None:
        """The engine objects found in the frames (read once)."""
        if "engine" not in self._cache:
            from errkb.probes.engine import read_engine

            self._cache["engine"] = read_engine(self)
        reading: EngineReading | None = self._cache["engine"]
        return reading

    def close(self) -> None:
        """Drop every frame reference (and whatever was read from the frames)."""
        for view in self._views:
            view.close()
        self._views.clear()
        self._cache.clear()
