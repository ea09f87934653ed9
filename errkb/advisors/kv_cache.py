"""The KV-cache advisor: computes the fix when an LLM engine's KV cache cannot hold its length.

Covers the whole family: the old engine's "max seq len ... larger than ... KV cache (N)" (vLLM
V0 and ChatTTS's vendored copy), vLLM V1's "KV cache is needed ... available KV cache memory" in
GB or GiB, "No available memory for the cache blocks", the CPU backend's variant, and V1's
"Free memory on device ... less than desired GPU memory utilization". It uses whatever evidence
there is (the message, the engine's objects in the frames, the live GPU, the model config, the
user's flags) and names every number with its source as a fact.

The arithmetic, for a model of L layers with KV heads H (per GPU) of size D, cached in B bytes:

* ``kv_bytes_per_token = 2 x L x H x D x B`` (MLA: one latent per layer, no separate V);
* ``kv_block_bytes = block_size x kv_bytes_per_token``;
* old engine: ``deficit = (ceil(max_model_len / block) - blocks) x kv_block_bytes``;
  V1: ``deficit = needed - available``, recomputed from the spec where the frames have it;
* ``gpu_memory_utilization_needed = utilization + deficit / total GPU memory``, rounded up to
  two decimals; infeasible above 1.0, and for V1 above free-at-start / total.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs

from errkb.advisors import Advice, Contract, Variant, advisor
from errkb.advisors._fix import example_fix
from errkb.exceptions import UsageError
from errkb.findings import Fact, Solution, Source
from errkb.probes.model import (
    ModelShape,
    cache_dtype_bytes,
    dtype_bytes,
    kv_bytes_per_token,
    model_shape,
)
from errkb.units import GIB, format_bytes, to_bytes

if TYPE_CHECKING:
    from errkb.evidence import Evidence
    from errkb.match import Match
    from errkb.probes.engine import EngineReading

__all__ = ["advise", "round_up"]

DEFAULT_BLOCK_SIZE = 16
DEFAULT_UTILIZATION = 0.9
#: Above this, raising the utilization leaves too little for activations and other processes.
COMFORTABLE_UTILIZATION = 0.95


def round_up(x: float, places: int = 2) -> float:
    """Round up to ``places`` decimals, ignoring float noise (0.53125 -> 0.54, 0.5 -> 0.5)."""
    scale = 10**places
    return float(math.ceil(round(x * scale, 9)) / scale)


def round_down(x: float, places: int = 2) -> float:
    """Round down to ``places`` decimals, ignoring float noise."""
    scale = 10**places
    return float(math.floor(round(x * scale, 9)) / scale)


class _Ledger:
    """The facts of one diagnosis, by name, in the order they were established."""

    def __init__(self) -> None:
        self.facts: dict[str, Fact] = {}

    def put(
        self, name: str, value: Any, unit: str | None, source: Source, note: str | None = None
    ) -> Any:
        self.facts[name] = Fact(name=name, value=value, unit=unit, source=source, note=note)
        return value

    def get(self, name: str) -> Any:
        fact = self.facts.get(name)
        return None if fact is None else fact.value


@attrs.define
class _Context:
    variant: str
    engine: EngineReading | None
    shape: ModelShape | None = None
    bpt: int | None = None
    cache_bytes: int = 2
    block: int = DEFAULT_BLOCK_SIZE
    max_model_len: int | None = None
    utilization: float | None = None
    total: int | None = None
    free: int | None = None
    gpu_count: int | None = None
    tp: int = 1
    engine_has_kv_dtype: bool | None = None
    notes: list[str] = attrs.field(factory=list)


#: The forms of the KV-cache message, most specific first (see :class:`errkb.advisors.Contract`).
VARIANTS = (
    # vLLM V1: "Free memory on device (f/t GiB) on startup is less than desired ...".
    Variant(
        name="free-memory",
        requires={"free", "total"},
        reads={"memory_unit", "gpu_memory_utilization", "requested", "requested_unit", "device"},
    ),
    # The CPU and OpenVINO backends: the cache size is an environment variable.
    Variant(name="cpu", requires={"env_var"}, reads={"max_model_len", "max_seq_len"}),
    # vLLM V1: "... (N GiB KV cache is needed, which is larger than the available ...)".
    Variant(
        name="v1",
        requires={"needed"},
        reads={
            "needed_unit",
            "available",
            "available_unit",
            "estimated_max_model_len",
            "max_model_len",
        },
    ),
    # V0 and ChatTTS's engine: "The model's max seq len (N) is larger than ... (M)".
    Variant(name="old", requires={"max_seq_len"}, reads={"max_model_len"}),
    # "No available memory for the cache blocks": no figures in the message.
    Variant(name="no-blocks"),
)
CONTRACT = Contract(name="kv-cache", variants=VARIANTS)


def _variant(captures: dict[str | int, Any]) -> str:
    variant = CONTRACT.variant_for(captures)
    return variant.name if variant is not None else "no-blocks"


def _gib_from_message(value: float, unit: str, led: _Ledger, name: str) -> int:
    """Bytes from a size in the message. vLLM 0.7-0.8.3 printed GiB figures labelled "GB"."""
    note = None
    if unit == "GB":
        unit = "GiB"
        note = "vLLM computes this figure in GiB even where it prints 'GB'"
    led.put(name, value, "GiB", "message", note)
    return to_bytes(value, unit)


def _tokens_that_fit(memory: int, block: int, bytes_per_token: int) -> int:
    """The most tokens, in whole blocks, that ``memory`` bytes of KV cache hold."""
    return memory // (block * bytes_per_token) * block


def _message_bytes(caps: dict[str | int, Any], key: str, led: _Ledger, name: str) -> int:
    """A size captured from the message (``key`` and ``key_unit``) in bytes, as a fact."""
    return _gib_from_message(float(caps[key]), str(caps.get(f"{key}_unit") or "GiB"), led, name)


def _shape(evidence: Evidence, ctx: _Context, led: _Ledger) -> None:
    engine = ctx.engine
    if engine is not None and engine.hf_config is not None:
        try:
            ctx.shape = model_shape(engine.hf_config, origin="the engine's model_config.hf_config")
        except UsageError as exc:
            ctx.notes.append(f"model config in the frames is incomplete: {exc}")
    if ctx.shape is None:
        try:
            ctx.shape = evidence.probe("model")
        except UsageError as exc:
            ctx.notes.append(f"model {exc}")
    if ctx.shape is not None:
        s = ctx.shape
        where = f"read from {s.origin}"
        led.put("attention_layers", s.attention_layers, None, "model-config", where)
        led.put("num_kv_heads", s.num_kv_heads, None, "model-config", where)
        led.put(
            "head_dim",
            s.head_dim,
            None,
            "model-config",
            "explicit head_dim" if s.head_dim_explicit else "hidden_size / num_attention_heads",
        )
        if s.mla_latent_dim is not None:
            led.put(
                "mla_latent_dim",
                s.mla_latent_dim,
                None,
                "model-config",
                "kv_lora_rank + qk_rope_head_dim",
            )


def _cache_dtype(evidence: Evidence, ctx: _Context, led: _Ledger) -> None:
    engine = ctx.engine
    if engine is not None and engine.kind != "unknown":
        ctx.engine_has_kv_dtype = engine.has_cache_dtype
    elif engine is not None and engine.has_cache_dtype:
        ctx.engine_has_kv_dtype = True
    name: str = "auto"
    source: Source = "default"
    if engine is not None and engine.cache_dtype:
        name, source = engine.cache_dtype, "frame"
    elif evidence.given("kv_cache_dtype"):
        name, source = str(evidence.given("kv_cache_dtype")), "flag"
    if name != "auto":
        size = cache_dtype_bytes(name)
        if size is not None:
            ctx.cache_bytes = led.put(
                "kv_cache_dtype_bytes", size, "bytes", source, f"kv_cache_dtype={name}"
            )
            return
    model_dtype: object = None
    dsource: Source = "default"
    if engine is not None and engine.model_dtype:
        model_dtype, dsource = engine.model_dtype, "frame"
    elif ctx.shape is not None and ctx.shape.dtype:
        model_dtype, dsource = ctx.shape.dtype, "model-config"
    size = dtype_bytes(model_dtype) if model_dtype else None
    if size is None:
        ctx.cache_bytes = led.put(
            "kv_cache_dtype_bytes",
            2,
            "bytes",
            "default",
            "assumed 16-bit: the model's dtype is not known",
        )
    elif size == 4:
        ctx.cache_bytes = led.put(
            "kv_cache_dtype_bytes",
            2,
            "bytes",
            dsource,
            f"the model's dtype is {model_dtype}; vLLM's dtype='auto' serves float32 checkpoints in 16 bits",
        )
    else:
        ctx.cache_bytes = led.put(
            "kv_cache_dtype_bytes",
            size,
            "bytes",
            dsource,
            f"cache in the model's dtype ({model_dtype})",
        )


def _gather(match: Match, evidence: Evidence, led: _Ledger) -> _Context:
    caps = dict(match.captures)
    engine = evidence.engine()
    ctx = _Context(variant=_variant(caps), engine=engine)
    # max_model_len: the engine's own value beats the message's.
    if engine is not None and engine.max_model_len:
        ctx.max_model_len = led.put("max_model_len", engine.max_model_len, "tokens", "frame")
    elif isinstance(caps.get("max_model_len"), int):
        ctx.max_model_len = led.put("max_model_len", caps["max_model_len"], "tokens", "message")
    block = engine.spec_block_size or engine.block_size if engine is not None else None
    if block:
        ctx.block = led.put("block_size", block, "tokens", "frame")
    elif evidence.given("block_size"):
        ctx.block = led.put("block_size", int(evidence.given("block_size")), "tokens", "flag")
    else:
        ctx.block = led.put(
            "block_size",
            DEFAULT_BLOCK_SIZE,
            "tokens",
            "default",
            "vLLM's default on CUDA GPUs; pass --block-size if yours differs",
        )
    if engine is not None and engine.tensor_parallel_size:
        ctx.tp = led.put("tensor_parallel_size", engine.tensor_parallel_size, None, "frame")
    elif evidence.given("tensor_parallel_size"):
        ctx.tp = led.put(
            "tensor_parallel_size", int(evidence.given("tensor_parallel_size")), None, "flag"
        )
    _shape(evidence, ctx, led)
    _cache_dtype(evidence, ctx, led)
    if engine is not None and engine.spec_bytes_per_token:
        ctx.bpt = led.put(
            "kv_bytes_per_token",
            engine.spec_bytes_per_token,
            "bytes",
            "frame",
            "summed over the layers of the engine's kv_cache_spec",
        )
    elif ctx.shape is not None:
        ctx.bpt = kv_bytes_per_token(
            ctx.shape, cache_dtype_bytes=ctx.cache_bytes, tensor_parallel_size=ctx.tp
        )
        formula = (
            "attention layers x latent x bytes (MLA)"
            if ctx.shape.mla_latent_dim is not None
            else "2 x attention layers x KV heads per GPU x head size x bytes"
        )
        led.put("kv_bytes_per_token", ctx.bpt, "bytes", "computed", formula)
    if ctx.bpt:
        led.put(
            "kv_block_bytes",
            ctx.block * ctx.bpt,
            "bytes",
            "computed",
            "block_size x kv_bytes_per_token",
        )
    # The GPU: the user's figure, else the live one, else the message's.
    gpus = evidence.gpus()
    device = gpus.devices[0] if gpus.devices else None
    if gpus.devices:
        ctx.gpu_count = led.put("visible_gpus", len(gpus.devices), None, "gpu")
    else:
        ctx.notes.append(f"GPU not measured: {gpus.error or 'no GPU visible'}")
    if evidence.given("gpu_memory_bytes"):
        ctx.total = led.put(
            "gpu_memory_total", int(evidence.given("gpu_memory_bytes")), "bytes", "flag"
        )
    elif device is not None:
        ctx.total = led.put(
            "gpu_memory_total", device.total_bytes, "bytes", device.source, device.name
        )
    if device is not None and device.free_bytes is not None:
        ctx.free = led.put(
            "gpu_memory_free", device.free_bytes, "bytes", device.source, "measured now"
        )
    if engine is not None and engine.gpu_memory_utilization is not None:
        ctx.utilization = led.put(
            "gpu_memory_utilization", engine.gpu_memory_utilization, None, "frame"
        )
    elif evidence.given("gpu_memory_utilization") is not None:
        ctx.utilization = led.put(
            "gpu_memory_utilization", float(evidence.given("gpu_memory_utilization")), None, "flag"
        )
    elif isinstance(util := caps.get("gpu_memory_utilization"), (int, float)):
        ctx.utilization = led.put("gpu_memory_utilization", float(util), None, "message")
    elif ctx.variant in ("old", "v1", "no-blocks"):
        ctx.utilization = led.put(
            "gpu_memory_utilization",
            DEFAULT_UTILIZATION,
            None,
            "default",
            "assumed: the default of vLLM and of ChatTTS's engine; pass --gpu-memory-utilization if you set another",
        )
    return ctx


@advisor(CONTRACT)
def advise(match: Match, evidence: Evidence) -> Advice | None:
    """Compute the KV-cache fix for ``match`` from whatever evidence there is."""
    led = _Ledger()
    ctx = _gather(match, evidence, led)
    caps = dict(match.captures)
    if ctx.variant == "free-memory":
        solutions = _free_memory(caps, ctx, led)
    else:
        solutions = _cache_shortfall(caps, ctx, led)
    settings = next((dict(s.settings) for s in solutions if s.settings), {})
    # What the record's example leaves alone keeps the value this run had.
    current = {"max_model_len": ctx.max_model_len, "gpu_memory_utilization": ctx.utilization}
    fix = example_fix(match, evidence, settings, current)
    return Advice(
        solutions=tuple(solutions),
        facts=tuple(led.facts.values()),
        example_fix=fix,
        notes=tuple(ctx.notes),
    )


def _free_memory(caps: dict[str | int, Any], ctx: _Context, led: _Ledger) -> list[Solution]:
    unit = str(caps.get("memory_unit") or "GiB")
    free = _gib_from_message(float(caps["free"]), unit, led, "free_memory_at_start")
    total = _gib_from_message(float(caps["total"]), unit, led, "total_memory")
    requested_util = float(caps.get("gpu_memory_utilization") or ctx.utilization or 0)
    fits = led.put(
        "gpu_memory_utilization_that_fits",
        round_down(free / total),
        None,
        "computed",
        "free / total, rounded down",
    )
    short = max(0, round(requested_util * total) - free)
    return [
        Solution(
            text=f"Lower gpu_memory_utilization from {requested_util:g} to {fits:g}: the most this GPU's "
            f"free memory at start ({format_bytes(free)} of {format_bytes(total)}) allows.",
            settings={"gpu_memory_utilization": fits},
        ),
        Solution(
            text=f"Or free {format_bytes(short)} on the GPU (other processes hold memory: see nvidia-smi) "
            f"to keep gpu_memory_utilization={requested_util:g}.",
        ),
    ]


def _cache_shortfall(caps: dict[str | int, Any], ctx: _Context, led: _Ledger) -> list[Solution]:
    block, bpt, length = ctx.block, ctx.bpt, ctx.max_model_len
    engine = ctx.engine
    deficit: int | None = None
    cache_mem: int | None = None
    fits: int | None = None
    lower_bound = False
    if ctx.variant in ("old", "cpu", "no-blocks"):
        blocks: int | None = None
        if engine is not None and engine.num_gpu_blocks is not None:
            blocks = max(0, led.put("num_gpu_blocks", engine.num_gpu_blocks, "blocks", "frame"))
        elif isinstance(caps.get("max_seq_len"), int):
            blocks = led.put("kv_cache_capacity", caps["max_seq_len"], "tokens", "message") // block
        elif ctx.variant == "no-blocks":
            blocks, lower_bound = 0, True
        if blocks is not None:
            fits = blocks * block
            if fits > 0:
                led.put(
                    "max_model_len_that_fits",
                    fits,
                    "tokens",
                    "computed",
                    "num_gpu_blocks x block_size",
                )
            if length:
                deficit_tokens = led.put(
                    "kv_cache_deficit_tokens",
                    max(0, math.ceil(length / block) - blocks) * block,
                    "tokens",
                    "computed",
                )
                if bpt:
                    deficit = deficit_tokens * bpt
            if bpt:
                cache_mem = blocks * block * bpt
    else:  # V1: bytes
        available = engine.available_memory if engine is not None else None
        if available is not None:
            led.put("available_kv_cache_memory", available, "bytes", "frame")
        elif "available" in caps:
            available = _message_bytes(caps, "available", led, "available_kv_cache_memory")
        needed = engine.needed_memory if engine is not None else None
        if needed is not None:
            led.put("needed_kv_cache_memory", needed, "bytes", "frame")
        elif bpt and length:
            needed = led.put(
                "needed_kv_cache_memory",
                math.ceil(length / block) * block * bpt,
                "bytes",
                "computed",
                "ceil(max_model_len / block) x kv_block_bytes",
            )
        elif "needed" in caps:
            needed = _message_bytes(caps, "needed", led, "needed_kv_cache_memory")
        if needed is not None and available is not None:
            deficit = max(0, needed - available)
        cache_mem = available
        if isinstance(caps.get("estimated_max_model_len"), int):
            fits = led.put(
                "max_model_len_that_fits",
                caps["estimated_max_model_len"],
                "tokens",
                "message",
                "vLLM's own estimate",
            )
        elif available is not None and bpt:
            fits = led.put(
                "max_model_len_that_fits",
                _tokens_that_fit(available, block, bpt),
                "tokens",
                "computed",
                "available // kv_block_bytes x block_size",
            )
    if deficit is not None:
        note = "at least: the cache had no room at all" if lower_bound else None
        led.put("kv_cache_deficit_bytes", deficit, "bytes", "computed", note)
    return _solutions(ctx, led, deficit, cache_mem, fits, lower_bound)


def _solutions(
    ctx: _Context,
    led: _Ledger,
    deficit: int | None,
    cache_mem: int | None,
    fits: int | None,
    lower_bound: bool,
) -> list[Solution]:
    length, block = ctx.max_model_len, ctx.block
    util_solution: Solution | None = None
    needed_util: float | None = None
    if ctx.variant == "cpu" and ctx.bpt and length:
        env = "VLLM_CPU_KVCACHE_SPACE"
        space = math.ceil(math.ceil(length / block) * block * ctx.bpt / GIB)
        led.put("kv_cache_space_needed", space, "GiB", "computed", f"for {env}")
        util_solution = Solution(
            text=f"Set {env}={space} (GiB) or more in the environment: the cache then holds max_model_len={length}.",
            settings={env: space},
        )
    elif deficit is not None and ctx.total and ctx.utilization is not None:
        raw = ctx.utilization + deficit / ctx.total
        needed_util = round_up(raw)
        why = []
        if needed_util > 1.0:
            why.append("above 1.0: the GPU is too small at this length")
        if ctx.variant == "v1" and ctx.free is not None and needed_util * ctx.total > ctx.free:
            why.append(
                f"above the free memory now ({format_bytes(ctx.free)}), which V1 requires at start"
            )
        note = f"{raw:.5f} rounded up" + (f"; infeasible: {'; '.join(why)}" if why else "")
        if lower_bound:
            note = "at least; " + note
        led.put("gpu_memory_utilization_needed", needed_util, None, "computed", note)
        if not why:
            util_solution = Solution(
                text=f"Raise gpu_memory_utilization from {ctx.utilization:g} to {needed_util:g}"
                + (" or more" if lower_bound else "")
                + f": that gives the cache {format_bytes(deficit)} more, enough for max_model_len={length}.",
                settings={"gpu_memory_utilization": needed_util},
            )
    fit_solution = None
    if fits:
        fit_solution = Solution(
            text=f"Lower max_model_len from {length} to {fits}: the longest block-aligned length the cache holds now."
            if length
            else f"Set max_model_len to {fits} or less: the longest block-aligned length the cache holds now.",
            settings={"max_model_len": fits},
        )
    out: list[Solution] = []
    if util_solution is not None and (
        needed_util is None or needed_util <= COMFORTABLE_UTILIZATION
    ):
        out.append(util_solution)
        if fit_solution:
            out.append(fit_solution)
    else:
        if fit_solution:
            out.append(fit_solution)
        if util_solution is not None:
            out.append(util_solution)
    out.extend(_fp8_and_parallel(ctx, led, cache_mem))
    return out


def _fp8_and_parallel(ctx: _Context, led: _Ledger, cache_mem: int | None) -> list[Solution]:
    out: list[Solution] = []
    bpt, block, length = ctx.bpt, ctx.block, ctx.max_model_len
    if not bpt or not cache_mem or ctx.variant == "cpu":
        return out
    kind = ctx.engine.kind if ctx.engine is not None else None
    if ctx.cache_bytes > 1 and ctx.engine_has_kv_dtype is not False and kind != "chattts":
        bpt8 = bpt // ctx.cache_bytes
        fits8 = led.put(
            "max_model_len_that_fits_fp8",
            _tokens_that_fit(cache_mem, block, bpt8),
            "tokens",
            "computed",
            "estimate: same cache memory at 1 byte per value",
        )
        settings: dict[str, object] = {"kv_cache_dtype": "fp8"}
        if length and fits8 < length:
            settings["max_model_len"] = fits8
        out.append(
            Solution(
                text=f"Keep the KV cache in fp8 (kv_cache_dtype='fp8'): about {fits8} tokens fit in the same memory "
                "(needs a GPU and attention backend with fp8 KV support; may cost a little accuracy).",
                settings=settings,
                estimate=True,
            )
        )
    shape = ctx.shape
    if shape is not None and ctx.gpu_count and ctx.gpu_count > ctx.tp and kind != "chattts":
        candidates = [
            t for t in range(ctx.gpu_count, ctx.tp, -1) if shape.num_attention_heads % t == 0
        ]
        if candidates:
            t = candidates[0]
            bpt_t = kv_bytes_per_token(
                shape, cache_dtype_bytes=ctx.cache_bytes, tensor_parallel_size=t
            )
            fits_t = led.put(
                "max_model_len_that_fits_tp",
                _tokens_that_fit(cache_mem, block, bpt_t),
                "tokens",
                "computed",
                f"estimate with tensor_parallel_size={t}: at least, since the weights are split too",
            )
            out.append(
                Solution(
                    text=f"Shard over {t} of the {ctx.gpu_count} visible GPUs (tensor_parallel_size={t}): each GPU "
                    f"then caches fewer KV heads, so at least {fits_t} tokens fit.",
                    settings={"tensor_parallel_size": t},
                    estimate=True,
                )
            )
    return out
