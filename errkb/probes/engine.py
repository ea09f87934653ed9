"""The engine probe: an LLM engine's own objects, read from the traceback's frames.

Knows the shapes of ChatTTS's vendored engine (``LLMEngine._init_cache``: ``self.cache_config``,
``self.model_config``, local ``num_gpu_blocks``), vLLM's old engine and V0 workers
(``raise_if_cache_size_invalid``, ``Worker.initialize_cache``) and vLLM V1's
``check_enough_kv_cache_memory`` (``vllm_config``, ``kv_cache_spec``, ``available_memory``).
Attributes differ across versions, so every read is defensive, and a setting the engine in the
traceback does not have (ChatTTS's engine has no KV-cache dtype) is recorded as missing.

A V1 ``kv_cache_spec`` is kept layer by layer (:class:`SpecLayer`): a sliding-window layer
needs far less than a full-attention one (``SlidingWindowSpec.max_memory_usage_bytes``,
vllm/v1/kv_cache_interface.py:138-154@v0.9.1), so summing bytes per token would be wrong.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from errkb._attrs import attrs
from errkb._traceback import safe_getattr

if TYPE_CHECKING:
    from errkb.evidence import Evidence

__all__ = ["EngineReading", "SpecLayer", "installed_version", "read_engine"]

_UNSET: Any = object()


@attrs.frozen(kw_only=True)
class SpecLayer:
    """One layer of a V1 ``kv_cache_spec``: its kind, block size and page size in bytes.

    ``kind`` is ``full`` (full attention and MLA), ``sliding`` (a window of
    ``sliding_window`` tokens), ``state`` (Mamba: one page whatever the length) or ``none``
    (encoder-only layers, which cache nothing).
    """

    kind: str
    block_size: int
    page_bytes: int
    sliding_window: int | None = None
    spec: str = ""


@attrs.frozen(kw_only=True)
class EngineReading:
    """What the frames tell of the engine. Every figure here has the source ``frame``."""

    kind: str
    frame: str | None = None
    max_model_len: int | None = None
    block_size: int | None = None
    num_gpu_blocks: int | None = None
    gpu_memory_utilization: float | None = None
    cache_dtype: str | None = None
    has_cache_dtype: bool = False
    tensor_parallel_size: int | None = None
    pipeline_parallel_size: int | None = None
    max_num_batched_tokens: int | None = None
    model_dtype: str | None = None
    use_mla: bool | None = None
    hf_config: Any = attrs.field(default=None, repr=False)
    available_memory: int | None = None
    needed_memory: int | None = None
    weights_memory: int | None = None
    spec_layers: tuple[SpecLayer, ...] | None = None
    spec_block_size: int | None = None


def _number(value: Any, kind: type) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return kind(value)


def _spec_kind(name: str, window: int | None) -> str:
    if "SlidingWindow" in name and window:
        return "sliding"
    if "Mamba" in name:
        return "state"
    if "EncoderOnly" in name:
        return "none"
    return "full"


def _spec_layers(specs: Any) -> tuple[SpecLayer, ...] | None:
    """The layers of a V1 ``kv_cache_spec`` (layer name -> spec), or None if unreadable."""
    if not isinstance(specs, dict) or not specs:
        return None
    out = []
    for spec in specs.values():
        size = _number(safe_getattr(spec, "block_size"), int)
        page = _number(safe_getattr(spec, "page_size_bytes"), int)
        if not size or size <= 0 or page is None or page < 0:
            return None
        name = type(spec).__name__
        window = _number(safe_getattr(spec, "sliding_window"), int)
        out.append(
            SpecLayer(
                kind=_spec_kind(name, window),
                block_size=size,
                page_bytes=page,
                sliding_window=window,
                spec=name,
            )
        )
    return tuple(out)


def _kind(files: list[str]) -> str:
    joined = "\n".join(f.replace("\\", "/") for f in files)
    if "ChatTTS/model/velocity/" in joined:
        return "chattts"
    if "vllm/v1/" in joined:
        return "vllm-v1"
    if "/vllm/" in joined:
        return "vllm-v0"
    return "unknown"


def read_engine(evidence: Evidence) -> EngineReading | None:
    """The engine's settings from the innermost frames that hold them; None if no engine."""
    found: dict[str, Any] = {}
    frame_at = None
    files = []
    for view in evidence.frames():
        files.append(view.file)
        local = view.local
        owner = local("self")
        vllm_config = local("vllm_config")
        if vllm_config is None:
            vllm_config = safe_getattr(owner, "vllm_config")
        for name in ("cache_config", "model_config", "parallel_config", "scheduler_config"):
            if name in found:
                continue
            obj = local(name)
            if obj is None:
                obj = safe_getattr(owner, name)
            if obj is None and vllm_config is not None:
                obj = safe_getattr(vllm_config, name)
            if obj is not None:
                found[name] = obj
                frame_at = frame_at or f"{view.file}:{view.line}"
        for name in (
            "num_gpu_blocks",
            "block_size",
            "max_model_len",
            "available_memory",
            "needed_memory",
        ):
            value = local(name)
            if name not in found and _number(value, int) is not None:
                found[name] = value
        if "weights_memory" not in found:
            # The weights as loaded: model_runner.model_memory_usage (model_runner.py:1098@v0.6.6,
            # v1/worker/gpu_model_runner.py:1548@v0.9.0), on the worker in the frames.
            runner = local("model_runner") or safe_getattr(owner, "model_runner")
            weights = _number(safe_getattr(runner, "model_memory_usage"), int)
            if weights is not None and weights > 0:
                found["weights_memory"] = weights
        if "kv_cache_spec" not in found and isinstance(local("kv_cache_spec"), dict):
            found["kv_cache_spec"] = local("kv_cache_spec")
    cache = found.get("cache_config")
    model = found.get("model_config")
    if cache is None and model is None and "kv_cache_spec" not in found:
        return None
    parallel = found.get("parallel_config")
    scheduler = found.get("scheduler_config")
    cache_dtype = safe_getattr(cache, "cache_dtype", _UNSET) if cache is not None else _UNSET
    layers = _spec_layers(found.get("kv_cache_spec"))
    hf_config = None
    if model is not None:
        hf_config = safe_getattr(model, "hf_text_config") or safe_getattr(model, "hf_config")
    model_dtype = safe_getattr(model, "dtype") if model is not None else None
    use_mla = safe_getattr(model, "use_mla") if model is not None else None
    return EngineReading(
        kind=_kind(files),
        frame=frame_at,
        max_model_len=_number(
            found.get("max_model_len", safe_getattr(model, "max_model_len")), int
        ),
        block_size=_number(found.get("block_size", safe_getattr(cache, "block_size")), int),
        num_gpu_blocks=_number(
            found.get("num_gpu_blocks", safe_getattr(cache, "num_gpu_blocks")), int
        ),
        gpu_memory_utilization=_number(safe_getattr(cache, "gpu_memory_utilization"), float),
        cache_dtype=None if cache_dtype is _UNSET or cache_dtype is None else str(cache_dtype),
        has_cache_dtype=cache_dtype is not _UNSET,
        tensor_parallel_size=_number(safe_getattr(parallel, "tensor_parallel_size"), int),
        pipeline_parallel_size=_number(safe_getattr(parallel, "pipeline_parallel_size"), int),
        max_num_batched_tokens=_number(safe_getattr(scheduler, "max_num_batched_tokens"), int),
        model_dtype=str(model_dtype).removeprefix("torch.") if model_dtype is not None else None,
        use_mla=use_mla if isinstance(use_mla, bool) else None,
        hf_config=hf_config,
        available_memory=_number(found.get("available_memory"), int),
        needed_memory=_number(found.get("needed_memory"), int),
        weights_memory=found.get("weights_memory"),
        spec_layers=layers,
        spec_block_size=layers[0].block_size if layers else None,
    )


def installed_version(distribution: str = "vllm") -> str | None:
    """The version of an installed distribution, or None.

    Reads the distribution's metadata only (:mod:`errkb._dists`); the package itself is not
    imported.
    """
    from errkb._dists import version

    return version(distribution)


def probe(evidence: Evidence, timeout: float) -> EngineReading | None:  # noqa: ARG001 - frames are read at once
    """The ``engine`` probe: :func:`read_engine` (frame locals, read in this thread)."""
    return read_engine(evidence)
