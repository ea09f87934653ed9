"""The model-config probe: the shape of a model's KV cache, from a config object or local file.

Reads a live configuration (a transformers ``PretrainedConfig`` found in a frame, or any object
or dict with the same attributes) or a local model folder / ``config.json``. Never downloads:
a path that is not on this machine is an error, not a hub lookup.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from errkb._traceback import safe_getattr
from errkb.exceptions import UsageError

if TYPE_CHECKING:
    from errkb.evidence import Evidence

__all__ = [
    "DTYPE_BYTES",
    "ModelShape",
    "dtype_bytes",
    "kv_bytes_per_token",
    "model_shape",
    "read_model_path",
]

#: Bytes per element of the dtypes a KV cache is kept in, by name.
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "fp32": 4,
    "float16": 2,
    "half": 2,
    "fp16": 2,
    "bfloat16": 2,
    "bf16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    "fp8_inc": 1,
    "fp8_ds_mla": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "int8": 1,
    "uint8": 1,
}


def dtype_bytes(dtype: object) -> int | None:
    """Bytes per element for a dtype given as a torch dtype or a name; None if unknown."""
    if dtype is None:
        return None
    name = str(dtype).removeprefix("torch.").lower()
    return DTYPE_BYTES.get(name)


def cache_dtype_bytes(name: str) -> int | None:
    """Bytes per value of a KV cache whose ``kv_cache_dtype`` is ``name``; None for ``auto``.

    Every ``fp8`` variant (``fp8_e4m3``, ``fp8_e4m3fnuz``, ...) is one byte, known or not.
    """
    if name == "auto":
        return None
    return dtype_bytes(name) or (1 if name.startswith("fp8") else None)


@attrs.frozen(kw_only=True)
class ModelShape:
    """What the KV cache of a model depends on. ``origin`` says where it was read."""

    attention_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    head_dim_explicit: bool
    dtype: str | None
    max_position_embeddings: int | None = None
    sliding_window: int | None = None
    mla_latent_dim: int | None = None
    model_type: str | None = None
    origin: str


def _get(obj: Any, *names: str) -> Any:
    for name in names:
        value = obj.get(name) if isinstance(obj, dict) else safe_getattr(obj, name)
        if value is not None:
            return value
    return None


def _text_config(config: Any) -> Any:
    """The language-model part of a multimodal config, else the config itself."""
    if _get(config, "num_hidden_layers", "n_layer", "num_layers") is not None:
        return config
    inner = _get(config, "text_config", "language_config", "llm_config")
    return inner if inner is not None else config


def _attention_layers(config: Any, layers: int) -> int:
    """How many layers keep a KV cache (hybrid models interleave attention with others)."""
    kinds = _get(config, "layer_types", "layers_block_type")
    if isinstance(kinds, (list, tuple)) and kinds:
        return sum(1 for k in kinds if "attention" in str(k) and "linear" not in str(k))
    return layers


def model_shape(config: Any, *, origin: str) -> ModelShape:
    """Read a :class:`ModelShape` from a config object or dict; ``UsageError`` if incomplete."""
    config = _text_config(config)
    layers = _get(config, "num_hidden_layers", "n_layer", "num_layers")
    heads = _get(config, "num_attention_heads", "n_head", "num_heads")
    if not isinstance(layers, int) or not isinstance(heads, int) or heads <= 0:
        raise UsageError(f"{origin}: the config has no num_hidden_layers/num_attention_heads")
    kv = _get(config, "num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num")
    if kv is None:
        kv = 1 if _get(config, "multi_query") is True else heads
    explicit = _get(config, "head_dim")
    hidden = _get(config, "hidden_size", "n_embd", "d_model")
    if isinstance(explicit, int) and explicit > 0:
        head_dim = explicit
    elif isinstance(hidden, int):
        head_dim = hidden // heads
    else:
        raise UsageError(f"{origin}: the config gives neither head_dim nor hidden_size")
    latent = _get(config, "kv_lora_rank")
    mla = (
        int(latent) + int(_get(config, "qk_rope_head_dim") or 0)
        if isinstance(latent, int)
        else None
    )
    dtype = _get(config, "torch_dtype", "dtype")
    window = _get(config, "sliding_window")
    return ModelShape(
        attention_layers=_attention_layers(config, layers),
        num_attention_heads=heads,
        num_kv_heads=int(kv),
        head_dim=int(head_dim),
        head_dim_explicit=isinstance(explicit, int) and explicit > 0,
        dtype=str(dtype).removeprefix("torch.") if dtype is not None else None,
        max_position_embeddings=_get(
            config, "max_position_embeddings", "n_positions", "max_seq_len"
        ),
        sliding_window=window if isinstance(window, int) else None,
        mla_latent_dim=mla,
        model_type=_get(config, "model_type"),
        origin=origin,
    )


def read_model_path(path: str | Path) -> ModelShape:
    """A local model folder or ``config.json``; never the hub. ``UsageError`` when unreadable."""
    p = Path(path).expanduser()
    file = p / "config.json" if p.is_dir() else p
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"{path}: no such local file or folder (errkb reads local configs only, never the hub)"
        ) from None
    except (OSError, ValueError) as exc:
        raise UsageError(f"{path}: cannot read {file} ({exc})") from None
    if not isinstance(data, dict):
        raise UsageError(f"{path}: {file} does not hold a JSON object")
    return model_shape(data, origin=str(file))


def kv_bytes_per_token(
    shape: ModelShape, *, cache_dtype_bytes: int, tensor_parallel_size: int = 1
) -> int:
    """KV-cache bytes one token takes on one GPU.

    ``2 x attention layers x KV heads per GPU x head size x bytes`` (K and V). With MLA the
    cache holds one compressed latent per layer and no separate V, replicated on every GPU.
    KV heads are split across tensor-parallel ranks, but never below one per rank.
    """
    if shape.mla_latent_dim is not None:
        return shape.attention_layers * shape.mla_latent_dim * cache_dtype_bytes
    heads = max(1, shape.num_kv_heads // max(1, tensor_parallel_size))
    return 2 * shape.attention_layers * heads * shape.head_dim * cache_dtype_bytes


def probe(evidence: Evidence, timeout: float) -> ModelShape | None:  # noqa: ARG001 - a local file
    """The ``model`` probe: the shape of the model the user gave (a local folder or config.json).

    None when none was given; raises :class:`~errkb.exceptions.UsageError` when it cannot be read.
    """
    given = evidence.given("model")
    return read_model_path(given) if given else None
