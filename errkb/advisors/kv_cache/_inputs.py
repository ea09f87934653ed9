"""Gathering: every input of the KV-cache arithmetic, each a value with the fact that names it.

The message, the engine's objects in the frames, the live GPU, the model config and the
user's flags all offer some of the figures; :func:`gather` takes each from the best source
(the engine's own value beats the message's, a flag beats a measurement where the user gave
one) and freezes them in :class:`Inputs`. Nothing after this reads evidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

from errkb._attrs import attrs
from errkb.advisors import CaptureError, Captures
from errkb.advisors.kv_cache._arithmetic import printed_range
from errkb.advisors.kv_cache._engine_calls import command_flag, pasted_command
from errkb.advisors.kv_cache._eras import Era, era_of, show
from errkb.advisors.kv_cache._profile import Profile, read_batching, read_profile
from errkb.exceptions import UsageError
from errkb.findings import Fact, Source
from errkb.probes.engine import installed_version
from errkb.probes.model import cache_dtype_bytes, dtype_bytes, model_shape
from errkb.units import to_bytes

if TYPE_CHECKING:
    from errkb.evidence import Evidence
    from errkb.match import Match
    from errkb.probes.engine import EngineReading, SpecLayer
    from errkb.probes.model import ModelShape

__all__ = ["DEFAULT_BLOCK_SIZE", "Inputs", "Value", "gather", "given_as", "value"]

T = TypeVar("T")

DEFAULT_BLOCK_SIZE = 16


def given_as(field: str) -> str:
    """Where a user gives errkb a figure it had to assume, named for every surface.

    ``field`` is the :class:`~errkb.options.Given` field; the command line's flag and the
    console's and API's ``what_if`` field take its name (docs/console.md: "what goes in").

    >>> given_as("block_size")
    '--block-size on the command line, what_if.block_size in the console or the API, Given(block_size=...) from Python'
    """
    flag = "--" + field.replace("_", "-")
    return (
        f"{flag} on the command line, what_if.{field} in the console or the API, "
        f"Given({field}=...) from Python"
    )


@attrs.frozen(kw_only=True)
class Value(Generic[T]):
    """An input and the fact that says where it came from."""

    value: T
    fact: Fact


def value(name: str, v: T, unit: str | None, source: Source, note: str | None = None) -> Value[T]:
    """A :class:`Value` and its :class:`Fact` in one call."""
    return Value(value=v, fact=Fact(name=name, value=v, unit=unit, source=source, note=note))


@attrs.frozen(kw_only=True)
class Inputs:
    """What the arithmetic works on, frozen. ``None`` where no source had the figure.

    Sizes printed in the message stay as printed (GiB, two decimals): the arithmetic knows
    what range of bytes such a figure stands for. For zero blocks, ``left_printed`` is what
    vLLM's log says was left for the cache (negative: how far the profile overshot), and
    ``in_use`` what the GPU held when the engine gave up, measured under the hook.
    ``activation`` is the profiling run's activation peak as vLLM's log gives it (the least
    its printed figure stands for), ``chunked_prefill`` whether the run chunked its prefills
    (which lets ``max_num_batched_tokens`` go below ``max_model_len``), ``auto_chunked``
    whether vLLM said it turned that on by itself (V0, above 32K).
    """

    variant: str
    era: Era
    message: str | None = None
    engine_kind: str | None = None
    engine_has_kv_dtype: bool | None = None
    release: Value[str] | None = None
    max_model_len: Value[int] | None = None
    capacity: Value[int] | None = None
    num_gpu_blocks: Value[int] | None = None
    block_size: Value[int]
    tensor_parallel_size: Value[int] | None = None
    pipeline_parallel_size: Value[int] | None = None
    shape: ModelShape | None = None
    shape_facts: tuple[Fact, ...] = ()
    spec_layers: tuple[SpecLayer, ...] | None = None
    cache_dtype: str = "auto"
    cache_bytes: Value[int]
    max_num_batched_tokens: Value[int] | None = None
    visible_gpus: Value[int] | None = None
    total: Value[int] | None = None
    free: Value[int] | None = None
    utilization: Value[float] | None = None
    default_utilizations: tuple[float, ...] = ()
    weights: Value[int] | None = None
    available: Value[int] | None = None
    needed: Value[int] | None = None
    available_printed: Value[float] | None = None
    needed_printed: Value[float] | None = None
    estimate: Value[int] | None = None
    free_at_start: Value[float] | None = None
    total_at_start: Value[float] | None = None
    requested_utilization: Value[float] | None = None
    left_printed: Value[float] | None = None
    in_use: Value[int] | None = None
    activation: Value[int] | None = None
    chunked_prefill: Value[bool] | None = None
    auto_chunked: bool = False
    env_var: str | None = None
    notes: tuple[str, ...] = ()

    def facts(self) -> tuple[Fact, ...]:
        """The facts of every input there is, in the order of the fields."""
        out: list[Fact] = []
        for field in attrs.fields(Inputs):
            item = getattr(self, field.name)
            if isinstance(item, Value):
                out.append(item.fact)
            elif field.name == "shape_facts":
                out.extend(item)
        return tuple(out)


#: A phrase of each form of the message, to find it among the exceptions read.
_PHRASES = {
    "free-memory": "Free memory on device",
    "cpu": "KVCACHE_SPACE",
    "v1": "KV cache is needed",
    "old": "max seq len",
    "no-blocks": "No available memory for the cache blocks",
}


def _message(match: Match, evidence: Evidence, variant: str) -> str | None:
    """The text of the message ``match`` was found in (for its wording), if it can be told."""
    phrase = _PHRASES.get(variant, "")
    numbers = [str(v) for v in match.captures.values() if isinstance(v, int)]
    for info in evidence.infos:
        for text in (info.message, *info.notes):
            if phrase in text and all(n in text for n in numbers):
                return text
    return None


def _printed(raw: float | None, unit: str | None, name: str) -> Value[float] | None:
    """A size the message prints (a number and its unit, GiB if none), in GiB as printed."""
    if raw is None:
        return None
    unit = unit or "GiB"
    note = None
    if unit == "GB":
        note = "vLLM computes this figure in GiB even where it prints 'GB'"
    elif unit != "GiB":
        try:
            return value(name, to_bytes(raw, unit) / (1 << 30), "GiB", "message")
        except (UsageError, OverflowError, ValueError) as exc:
            raise CaptureError(f"capture {name!r} is not a size: {exc}") from None
    return value(name, raw, "GiB", "message", note)


def _shape(
    engine: EngineReading | None, evidence: Evidence, notes: list[str]
) -> tuple[ModelShape | None, tuple[Fact, ...]]:
    shape = None
    if engine is not None and engine.hf_config is not None:
        try:
            shape = model_shape(engine.hf_config, origin="the engine's model_config.hf_config")
        except UsageError as exc:
            notes.append(f"model config in the frames is incomplete: {exc}")
    if shape is None:
        try:
            shape = evidence.probe("model")
        except UsageError as exc:
            notes.append(f"model {exc}")
    if shape is None:
        return None, ()
    where = f"read from {shape.origin}"
    if shape.defaults_from:
        where += f", with {shape.defaults_from}"
    facts = [
        Fact(
            name="attention_layers", value=shape.attention_layers, source="model-config", note=where
        )
    ]
    sliding = sum(1 for k in shape.layer_kinds if k == "sliding")
    if sliding:
        facts.append(
            Fact(
                name="sliding_window_layers",
                value=sliding,
                source="model-config",
                note=f"of the attention layers, those with a window of {shape.sliding_window} tokens",
            )
        )
    if shape.mla is not None:
        facts.append(
            Fact(
                name="mla_latent_dim",
                value=shape.mla_latent_dim,
                source="model-config",
                note="kv_lora_rank + qk_rope_head_dim",
            )
        )
    else:
        facts.append(
            Fact(name="num_kv_heads", value=shape.num_kv_heads, source="model-config", note=where)
        )
        facts.append(
            Fact(
                name="head_dim",
                value=shape.head_dim,
                source="model-config",
                note="explicit head_dim"
                if shape.head_dim_explicit
                else "hidden_size / num_attention_heads",
            )
        )
    return shape, tuple(facts)


def _cache_bytes(
    engine: EngineReading | None, evidence: Evidence, shape: ModelShape | None, notes: list[str]
) -> tuple[str, Value[int]]:
    """The cache dtype's name and its bytes per value, as the engine picks them."""
    name: str = "auto"
    source: Source = "default"
    if engine is not None and engine.cache_dtype:
        name, source = engine.cache_dtype, "frame"
    elif evidence.given("kv_cache_dtype"):
        name, source = str(evidence.given("kv_cache_dtype")), "flag"
    if name != "auto":
        size = cache_dtype_bytes(name)
        if size is not None:
            return name, value(
                "kv_cache_dtype_bytes", size, "bytes", source, f"kv_cache_dtype={name}"
            )
        notes.append(
            f"kv_cache_dtype={name!r} is not a dtype errkb knows: the model's dtype is used"
        )
    if engine is not None and engine.model_dtype and dtype_bytes(engine.model_dtype):
        # The engine's dtype is already resolved (dtype='auto' made float16/bfloat16 of a
        # float32 checkpoint); a float32 here was asked for, and an 'auto' cache follows it.
        size = dtype_bytes(engine.model_dtype) or 2
        note = f"cache in the engine's dtype ({engine.model_dtype})"
        if size == 4:
            note += ": dtype='float32' was given, so the cache is 4 bytes a value"
        return "auto", value("kv_cache_dtype_bytes", size, "bytes", "frame", note)
    given = evidence.given("dtype")
    if given is not None and str(given).lower() != "auto":
        # --dtype: the engine's dtype as the user ran it (a pasted log does not say it).
        size = dtype_bytes(given)
        if size is not None:
            note = f"cache in the engine's dtype (dtype={given})"
            if size == 4:
                note += ": float32 was given, so the cache is 4 bytes a value"
            return "auto", value("kv_cache_dtype_bytes", size, "bytes", "flag", note)
        notes.append(f"dtype={given!r} is not a dtype errkb knows: the model's dtype is used")
    if shape is not None and shape.dtype and dtype_bytes(shape.dtype):
        size = dtype_bytes(shape.dtype) or 2
        if size == 4:
            return "auto", value(
                "kv_cache_dtype_bytes",
                2,
                "bytes",
                "model-config",
                f"the model's dtype is {shape.dtype}; vLLM's dtype='auto' serves float32 "
                "checkpoints in 16 bits (vllm/config.py:423-429@v0.2.7); if the engine ran with "
                f"dtype='float32', its cache is 4 bytes a value: give it ({given_as('dtype')})",
            )
        return "auto", value(
            "kv_cache_dtype_bytes",
            size,
            "bytes",
            "model-config",
            f"cache in the model's dtype ({shape.dtype})",
        )
    return "auto", value(
        "kv_cache_dtype_bytes",
        2,
        "bytes",
        "default",
        "assumed 16-bit: the model's dtype is not known",
    )


def _int_from(
    name: str,
    unit: str | None,
    *candidates: tuple[object, Source],
) -> Value[int] | None:
    for raw, source in candidates:
        if isinstance(raw, int) and not isinstance(raw, bool):
            return value(name, raw, unit, source)
    return None


def _release(era: Era, installed: str | None) -> Value[str] | None:
    """The releases that can have printed the message, as a fact."""
    if era.engine == "unknown" or not (era.low or era.high):
        return None
    if era.engine == "chattts":
        return value(
            "vllm_release", era.describe(), None, "frame", "ChatTTS vendors vLLM 0.2.7's engine"
        )
    source: Source = "message"
    if installed and era.exact and era.low is not None and installed.startswith(show(era.low)):
        source = "probe"
    return value("vllm_release", era.describe(), None, source, era.why or None)


def _sizes(
    caps: Captures,
    e: EngineReading | None,
    evidence: Evidence,
    variant: str,
    shape: ModelShape | None,
) -> dict[str, Any]:
    """The request's length, the block size and the parallelism."""
    max_model_len = _int_from(
        "max_model_len",
        "tokens",
        (e.max_model_len if e else None, "frame"),
        (caps.integer("max_model_len"), "message"),
    )
    positions = shape.max_position_embeddings if shape is not None else None
    if max_model_len is None and variant == "no-blocks" and isinstance(positions, int):
        max_model_len = value(
            "max_model_len",
            positions,
            "tokens",
            "model-config",
            "vLLM's default: the model's max_position_embeddings",
        )
    block = _int_from(
        "block_size",
        "tokens",
        ((e.spec_block_size or e.block_size) if e else None, "frame"),
        (evidence.given("block_size"), "flag"),
    )
    if block is None or block.value <= 0:
        block = value(
            "block_size",
            DEFAULT_BLOCK_SIZE,
            "tokens",
            "default",
            f"vLLM's default on CUDA GPUs; if yours differs, give it: {given_as('block_size')}",
        )
    pp = _int_from(
        "pipeline_parallel_size", None, (e.pipeline_parallel_size if e else None, "frame")
    )
    return {
        "max_model_len": max_model_len,
        "block_size": block,
        "tensor_parallel_size": _int_from(
            "tensor_parallel_size",
            None,
            (e.tensor_parallel_size if e else None, "frame"),
            (evidence.given("tensor_parallel_size"), "flag"),
        ),
        "pipeline_parallel_size": pp if pp is not None and pp.value > 1 else None,
        "max_num_batched_tokens": _int_from(
            "max_num_batched_tokens", "tokens", (e.max_num_batched_tokens if e else None, "frame")
        ),
    }


def _gpu(evidence: Evidence, notes: list[str]) -> dict[str, Any]:
    """The GPU: the user's figure, else the live one."""
    gpus = evidence.gpus()
    device = gpus.devices[0] if gpus.devices else None
    if not gpus.devices:
        notes.append(f"GPU not measured: {gpus.error or 'no GPU visible'}")
    total = None
    if evidence.given("gpu_memory_bytes"):
        total = value("gpu_memory_total", int(evidence.given("gpu_memory_bytes")), "bytes", "flag")
    elif device is not None:
        total = value("gpu_memory_total", device.total_bytes, "bytes", device.source, device.name)
    free = None
    if device is not None and device.free_bytes is not None:
        free = value("gpu_memory_free", device.free_bytes, "bytes", device.source, "measured now")
    visible = value("visible_gpus", len(gpus.devices), None, "gpu") if gpus.devices else None
    return {"visible_gpus": visible, "total": total, "free": free}


def _in_use(evidence: Evidence) -> Value[int] | None:
    """What this process's GPU held when the engine gave up: V0's ``peak_memory``, measured.

    The V0 worker takes, after its profiling run, all the memory in use on the GPU as the
    peak (``total - free``, vllm/worker/worker.py:102-110@v0.2.7; ChatTTS's engine too), then
    empties torch's cache. Measured at the failure, the memory in use lacks what torch's cache
    gave back; torch's peak of reserved memory puts it back. Only for a live failure: a GPU
    measured for a pasted text is another moment's, or another machine's.
    """
    if next(iter(evidence.frames()), None) is None:
        return None
    gpus = evidence.gpus()
    device = gpus.devices[0] if gpus.devices else None
    if device is None or device.free_bytes is None:
        return None
    used = device.total_bytes - device.free_bytes
    note = "total - free, measured when the engine gave up"
    if device.reserved_bytes is not None and device.peak_reserved_bytes is not None:
        used += max(0, device.peak_reserved_bytes - device.reserved_bytes)
        note = (
            "total - free when the engine gave up, plus what torch's cache held at its peak "
            "beyond what it holds now (max_memory_reserved - memory_reserved)"
        )
    return value("gpu_memory_in_use", used, "bytes", device.source, note)


def _utilization(
    caps: Captures,
    e: EngineReading | None,
    evidence: Evidence,
    variant: str,
    era: Era,
) -> dict[str, Any]:
    """The run's utilization: the engine's, the user's, the message's, else the era's default.

    For V1's free-memory form, the message's utilization is the one requested.
    """
    utilization = None
    if e is not None and e.gpu_memory_utilization is not None:
        utilization = value("gpu_memory_utilization", e.gpu_memory_utilization, None, "frame")
    elif evidence.given("gpu_memory_utilization") is not None:
        utilization = value(
            "gpu_memory_utilization", float(evidence.given("gpu_memory_utilization")), None, "flag"
        )
    message = caps.number("gpu_memory_utilization")
    if message is not None and (utilization is None or variant == "free-memory"):
        utilization = value("gpu_memory_utilization", message, None, "message")
    if variant == "free-memory":
        return {"requested_utilization": utilization}
    defaults = era.default_utilizations()
    if utilization is None and variant in ("old", "v1", "no-blocks"):
        if len(defaults) == 1:
            note = f"assumed: the default of {era.describe()}"
        else:
            note = (
                "assumed: the default is 0.9 before vLLM 0.20.0 and 0.92 from it "
                f"(vllm/config/cache.py:66@v0.20.0), and {era.describe()} covers both: the "
                "higher is taken, so that no proposal is below what the run used"
            )
        utilization = value(
            "gpu_memory_utilization",
            max(defaults),
            None,
            "default",
            note + "; if you set another, give it: " + given_as("gpu_memory_utilization"),
        )
        return {"utilization": utilization, "default_utilizations": defaults}
    return {"utilization": utilization}


def _memory(caps: Captures, e: EngineReading | None, variant: str) -> dict[str, Any]:
    """The cache's memory as the frames have it exactly and the message prints it."""
    out: dict[str, Any] = {
        "available_printed": _printed(
            caps.number("available"),
            caps.text("available_unit"),
            "available_kv_cache_memory_printed",
        ),
        "needed_printed": _printed(
            caps.number("needed"), caps.text("needed_unit"), "needed_kv_cache_memory_printed"
        ),
        "estimate": _int_from(
            "estimated_max_model_len",
            "tokens",
            (caps.integer("estimated_max_model_len"), "message"),
        ),
        "capacity": _int_from(
            "kv_cache_capacity", "tokens", (caps.integer("max_seq_len"), "message")
        ),
    }
    if e is not None and e.available_memory is not None:
        out["available"] = value("available_kv_cache_memory", e.available_memory, "bytes", "frame")
    if e is not None and e.needed_memory is not None:
        out["needed"] = value("needed_kv_cache_memory", e.needed_memory, "bytes", "frame")
    if e is not None and e.num_gpu_blocks is not None:
        out["num_gpu_blocks"] = value("num_gpu_blocks", e.num_gpu_blocks, "blocks", "frame")
    if variant == "free-memory":
        unit = caps.text("memory_unit")
        out["free_at_start"] = _printed(caps.number("free"), unit, "free_memory_at_start")
        out["total_at_start"] = _printed(caps.number("total"), unit, "total_memory")
    return out


def _least(name: str, gib: float, note: str) -> Value[int]:
    """A size vLLM's log prints in GiB with two decimals, as the least bytes it stands for."""
    return value(name, printed_range(gib)[0], "bytes", "message", note)


def _from_command(evidence: Evidence, sizes: dict[str, Any], utilization: dict[str, Any]) -> None:
    """The pasted command line's length and utilization, for a message that carries neither.

    "No available memory for the cache blocks" names no length: ``--max-model-len`` of the
    command that started the server beats the model's default, and its
    ``--gpu-memory-utilization`` beats an assumed default.
    """
    if evidence.text is None or next(iter(evidence.frames()), None) is not None:
        return
    command = pasted_command(evidence.text)
    if command is None:
        return
    note = "the pasted command line's flag"
    length = sizes.get("max_model_len")
    given = command_flag(command, "max_model_len")
    if given is not None and given.isdigit() and (length is None or length.fact.source != "frame"):
        sizes["max_model_len"] = value("max_model_len", int(given), "tokens", "message", note)
    current = utilization.get("utilization")
    given = command_flag(command, "gpu_memory_utilization")
    if given is not None and (current is None or current.fact.source == "default"):
        try:
            util = float(given)
        except ValueError:
            return
        utilization["utilization"] = value("gpu_memory_utilization", util, None, "message", note)
        utilization["default_utilizations"] = ()


def _from_profile(
    profile: Profile,
    era: Era,
    gpu: dict[str, Any],
    utilization: dict[str, Any],
    weights: Value[int] | None,
    out: dict[str, Any],
) -> tuple[Era, Value[int] | None]:
    """What vLLM's log lines add for zero blocks: the left-over, and what the run lacks.

    The left-over goes into ``out``; the GPU's total and the run's utilization, where the
    line prints them, go into ``gpu`` and ``utilization`` when no better source had them.
    Returns the era (the worker that printed the lines, when the message could not tell) and
    the weights (vLLM's own figure beats the files beside the config).
    """
    if profile.cache is not None:
        out["left_printed"] = value(
            "kv_cache_memory_left_printed", profile.cache, "GiB", "message", profile.line
        )
    if gpu["total"] is None and profile.total is not None:
        gpu["total"] = _least(
            "gpu_memory_total",
            profile.total,
            f"the least vLLM's printed total_gpu_memory ({profile.total:.2f}GiB) can stand for",
        )
    current = utilization.get("utilization")
    if profile.utilization is not None and (current is None or current.fact.source == "default"):
        utilization["utilization"] = value(
            "gpu_memory_utilization",
            profile.utilization,
            None,
            "message",
            "vLLM's log line: total_gpu_memory x gpu_memory_utilization",
        )
        utilization["default_utilizations"] = ()
    if profile.weights is not None and (weights is None or weights.fact.source != "frame"):
        weights = _least(
            "weights_bytes",
            profile.weights,
            f"the least vLLM's printed {profile.weights:.2f} GiB of weights can stand for",
        )
    if era.engine == "unknown" and profile.engine is not None:
        era = attrs.evolve(
            era,
            engine=profile.engine,
            why="; ".join(w for w in (era.why, f"the log's lines: {profile.line}") if w),
        )
    return era, weights


def _batching(evidence: Evidence, variant: str, era: Era, sizes: dict[str, Any]) -> dict[str, Any]:
    """What the profiling run batched, and the activation peak it took, where they are told.

    vLLM's log lines in a pasted text (:func:`read_batching`) and the pasted command's
    ``--max-num-batched-tokens`` and ``--enable-chunked-prefill``; the frames'
    ``max_num_batched_tokens`` comes first. V1 always chunks its prefills
    (vllm/engine/arg_utils.py:1523@v0.9.1).
    """
    out: dict[str, Any] = {}
    if variant not in ("old", "v1", "no-blocks") or era.engine == "chattts":
        return out
    if era.engine == "vllm-v1":
        out["chunked_prefill"] = value(
            "chunked_prefill",
            v=True,
            unit=None,
            source="computed",
            note="V1 always chunks prefills (vllm/engine/arg_utils.py:1523@v0.9.1)",
        )
    if evidence.text is None or next(iter(evidence.frames()), None) is not None:
        return out
    read = read_batching(evidence.text)
    command = pasted_command(evidence.text)
    tokens = command_flag(command, "max_num_batched_tokens") if command else None
    chunked = command_flag(command, "enable_chunked_prefill") if command else None
    bare = chunked is None or chunked.lower() not in ("true", "false")
    if command is not None and bare and "--enable-chunked-prefill" in command:
        chunked = "true"  # the bare flag: vLLM's StoreBoolean takes const="True"
    if sizes.get("max_num_batched_tokens") is None:
        if read is not None and read.tokens is not None:
            sizes["max_num_batched_tokens"] = value(
                "max_num_batched_tokens",
                read.tokens,
                "tokens",
                "message",
                "vLLM's log: 'Chunked prefill is enabled with max_num_batched_tokens=<N>'",
            )
        elif tokens is not None and tokens.isdigit():
            sizes["max_num_batched_tokens"] = value(
                "max_num_batched_tokens",
                int(tokens),
                "tokens",
                "message",
                "the pasted command line's flag",
            )
    if "chunked_prefill" not in out:
        if read is not None and (read.tokens is not None or read.auto):
            why = "vLLM's log says chunked prefill is enabled"
            if read.auto:
                why += " (by default, for max_model_len > 32K)"
            out["chunked_prefill"] = value(
                "chunked_prefill", v=True, unit=None, source="message", note=why
            )
        elif read is not None and read.unchunked:
            out["chunked_prefill"] = value(
                "chunked_prefill",
                v=False,
                unit=None,
                source="message",
                note="vLLM's log: 'The model has a long context length', printed with chunked "
                "prefill off (vllm/engine/arg_utils.py:1112-1117@v0.6.6)",
            )
        elif chunked is not None and chunked.lower() in ("true", "false"):
            out["chunked_prefill"] = value(
                "chunked_prefill",
                chunked.lower() == "true",
                None,
                "message",
                "the pasted command line's --enable-chunked-prefill",
            )
    if read is not None:
        out["auto_chunked"] = read.auto
        if read.activation is not None:
            out["activation"] = _least(
                "activation_peak_bytes",
                read.activation,
                f"the least the printed {read.activation:.2f} GiB can stand for; {read.line}",
            )
    return out


def gather(match: Match, evidence: Evidence, variant: str) -> Inputs:
    """Every input there is for ``match`` (of the form ``variant``), frozen."""
    caps = Captures(match.captures)
    notes: list[str] = []
    engine = evidence.engine()
    message = _message(match, evidence, variant)
    kind = engine.kind if engine is not None else None
    installed = installed_version("vllm") if kind != "chattts" else None
    era, era_note = era_of(variant, message, kind, installed)
    if era_note:
        notes.append(era_note)
    shape, shape_facts = _shape(engine, evidence, notes)
    cache_dtype, cache_bytes = _cache_bytes(engine, evidence, shape, notes)
    weights = None
    if engine is not None and engine.weights_memory:
        weights = value(
            "weights_bytes",
            engine.weights_memory,
            "bytes",
            "frame",
            "the weights as loaded: model_runner.model_memory_usage",
        )
    elif shape is not None and shape.weights_bytes:
        weights = value(
            "weights_bytes",
            shape.weights_bytes,
            "bytes",
            "model-config",
            "the weight files beside the config",
        )
    has_kv_dtype = None
    if engine is not None and (engine.kind != "unknown" or engine.has_cache_dtype):
        has_kv_dtype = engine.has_cache_dtype
    gpu = _gpu(evidence, notes)
    utilization = _utilization(caps, engine, evidence, variant, era)
    sizes = _sizes(caps, engine, evidence, variant, shape)
    profiled: dict[str, Any] = _batching(evidence, variant, era, sizes)
    if variant == "no-blocks":
        _from_command(evidence, sizes, utilization)
        profiled["in_use"] = _in_use(evidence)
        profile = read_profile(evidence.text)
        if profile is not None:
            era, weights = _from_profile(profile, era, gpu, utilization, weights, profiled)
    return Inputs(
        variant=variant,
        era=era,
        message=message,
        engine_kind=kind,
        engine_has_kv_dtype=has_kv_dtype,
        release=_release(era, installed),
        shape=shape,
        shape_facts=shape_facts,
        spec_layers=engine.spec_layers if engine is not None else None,
        cache_dtype=cache_dtype,
        cache_bytes=cache_bytes,
        weights=weights,
        env_var=caps.text("env_var"),
        **sizes,
        **gpu,
        **utilization,
        **profiled,
        **_memory(caps, engine, variant),
        notes=tuple(notes),
    )
