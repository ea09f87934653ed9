"""One options object for every surface: the hook, the CLI and the API pass it along whole."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from errkb._attrs import attrs
from errkb._env import number

if TYPE_CHECKING:
    from typing import TextIO

    from errkb.probes import Measurements

__all__ = ["Given", "Options"]


@attrs.frozen(kw_only=True)
class Given:
    """Values the user supplied instead of measurements; each is reported with the source "flag".

    Attributes:
        gpu_memory_bytes: total memory of one GPU, in bytes.
        gpu_memory_utilization: the fraction of GPU memory the engine was given.
        model: a local model folder or ``config.json`` (never fetched from a hub).
        model_config: the content of a ``config.json`` given as data (a mapping), read as the
            file named by ``model`` would be; it wins over ``model``. ``errkb serve`` takes
            this form only, so that no request can name a file of the server's machine.
        block_size: tokens per KV-cache block.
        kv_cache_dtype: the KV cache's dtype name (``auto``, ``fp8``, ``fp8_e5m2``, ...).
        tensor_parallel_size: GPUs the model is split over.
        dtype: the engine's ``dtype`` (``float32``, ``bfloat16``, ``half``, ...); an ``auto``
            KV cache is stored in it, so ``float32`` means 4 bytes a value.
    """

    gpu_memory_bytes: int | None = None
    gpu_memory_utilization: float | None = None
    model: str | None = None
    # A mapping is not hashable: the config takes no part in the hash (it still does in ==).
    model_config: Mapping[str, Any] | None = attrs.field(default=None, hash=False)
    block_size: int | None = None
    kv_cache_dtype: str | None = None
    tensor_parallel_size: int | None = None
    dtype: str | None = None


def _given(value: Given | Mapping[str, Any] | None) -> Given:
    """A :class:`Given`, from itself or from a mapping of its field names."""
    if value is None:
        return Given()
    if isinstance(value, Given):
        return value
    unknown = sorted(set(value) - set(attrs.fields_dict(Given)))
    if unknown:
        names = ", ".join(attrs.fields_dict(Given))
        raise TypeError(f"Options(given=...): unknown value {unknown[0]!r} (expected {names})")
    return Given(**value)


def _strings(values: Iterable[str]) -> tuple[str, ...]:
    # Not the builtin tuple: attrs would read its signature through Python's tokenizer.
    return tuple(values)


@attrs.frozen(kw_only=True)
class Options:
    """How to diagnose and how to show the result.

    Attributes:
        file: where rendering goes; ``None`` means ``sys.stderr`` at the time of writing.
        width: columns to render at; ``None`` asks the terminal, else ``COLUMNS``, else 100.
        color: force colour on or off; ``None`` decides from the stream and ``NO_COLOR``,
            ``FORCE_COLOR`` and ``TERM=dumb``.
        ascii: draw boxes with ASCII only; ``None`` decides from the stream's encoding.
        probes: whether advisors may measure the live environment (GPU, model files).
        import_torch: whether the GPU probe may import torch to measure, in a program that has
            not imported it (importing it costs over a second and 200 MB). Off by default, so
            the hook never does: such a program's GPUs are read through NVML, or not at all.
            The command line turns it on.
        timeout: seconds the whole diagnosis may take before what is unfinished is left out
            (``ERRKB_TIMEOUT`` sets the default).
        given: values the user supplied instead of measurements, a :class:`Given` (a mapping
            of its field names is accepted too), each reported with the source "flag".
        records: extra record files or folders, on top of the default sources.
        measurements: measurements to use instead of probing (see
            :class:`errkb.testing.FakeMeasurements`); ``None`` probes live.
        detail: how much the rendered diagnosis shows. ``"short"``: the fix first, with its
            numbers, the rewritten call, why in three lines, the facts, the other solutions
            one line each. ``"long"``: all of that and the record's full documentation, its
            history, likely situations, where upstream raises the error, and the other
            records that matched (what ``errkb explain --long`` prints). The JSON form is the
            same either way.
    """

    file: TextIO | None = None
    width: int | None = None
    color: bool | None = None
    ascii: bool | None = None
    probes: bool = True
    import_torch: bool = False
    timeout: float = attrs.field(factory=lambda: number("ERRKB_TIMEOUT", 5.0))
    given: Given = attrs.field(factory=Given, converter=_given)
    records: tuple[str, ...] = attrs.field(default=(), converter=_strings)
    measurements: Measurements | None = None
    detail: Literal["short", "long"] = attrs.field(
        default="short", validator=attrs.validators.in_(("short", "long"))
    )

    def evolve(self, **changes: Any) -> Options:
        """A copy with ``changes`` applied."""
        return attrs.evolve(self, **changes)
