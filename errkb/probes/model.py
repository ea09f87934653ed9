"""The model-config probe: the shape of a model's KV cache, from a config object or local file.

Reads a live configuration (a transformers ``PretrainedConfig`` found in a frame, or any object
or dict with the same attributes) or a local model folder / ``config.json``. Never downloads:
a path that is not on this machine is an error, not a hub lookup.

The shape says, layer by layer, what vLLM caches: ``full`` attention, ``sliding`` window
attention, or nothing (``none``: Mamba, linear attention, MLP-only layers of hybrid models),
counted as vLLM counts them (``ModelConfig.get_num_layers_by_block_type``,
vllm/config/model.py:1224-1290@v0.11.0; the per-layer sliding pattern of Gemma 2 and 3,
vllm/model_executor/models/gemma2.py:149@v0.9.0, gemma3.py:150@v0.9.0). The arithmetic on the
shape is the KV-cache advisor's (:mod:`errkb.advisors.kv_cache`), for every engine era.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb._attrs import attrs
from errkb._traceback import safe_getattr
from errkb.exceptions import UsageError
from errkb.probes._plausible import RANGES

if TYPE_CHECKING:
    from errkb.evidence import Evidence

__all__ = [
    "DTYPE_BYTES",
    "GIVEN_CONFIG",
    "ModelShape",
    "cache_dtype_bytes",
    "dtype_bytes",
    "model_shape",
    "read_model_path",
    "weights_bytes",
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

#: Layer kinds: what vLLM caches for one layer.
FULL, SLIDING, NONE = "full", "sliding", "none"


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
    """What the KV cache of a model depends on. ``origin`` says where it was read.

    Attributes:
        layer_kinds: one entry per hidden layer: ``full``, ``sliding`` or ``none``.
        attention_layers: the layers that keep a KV cache (``full`` or ``sliding``).
        num_kv_heads: KV heads of the whole model (before tensor parallelism).
        head_dim: the size of one head, as the config gives it.
        head_dim_explicit: whether the config says ``head_dim`` (else hidden / heads).
        hidden_size: for engines that ignore ``head_dim`` (vLLM 0.2, ChatTTS's engine).
        mla: DeepSeek's multi-head latent attention: ``(kv_lora_rank, qk_rope_head_dim,
            qk_nope_head_dim)``, or None.
        weights_bytes: the size of the weight files beside a local ``config.json``.
        defaults_from: set when transformers' defaults filled what the config leaves out.
    """

    layer_kinds: tuple[str, ...]
    attention_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    head_dim_explicit: bool
    hidden_size: int | None = None
    dtype: str | None
    max_position_embeddings: int | None = None
    sliding_window: int | None = None
    mla: tuple[int, int, int] | None = None
    model_type: str | None = None
    weights_bytes: int | None = None
    defaults_from: str | None = None
    origin: str

    @property
    def num_hidden_layers(self) -> int:
        """All layers, with and without a KV cache."""
        return len(self.layer_kinds)

    @property
    def mla_latent_dim(self) -> int | None:
        """What one MLA layer caches per token: ``kv_lora_rank + qk_rope_head_dim``."""
        return None if self.mla is None else self.mla[0] + self.mla[1]


def _get(obj: Any, *names: str) -> Any:
    for name in names:
        value = obj.get(name) if isinstance(obj, dict) else safe_getattr(obj, name)
        if value is not None:
            return value
    return None


_LAYER_COUNT = ("num_hidden_layers", "n_layer", "num_layers")
_TEXT_PARTS = ("text_config", "language_config", "llm_config")


def _text_config(config: Any, origin: str) -> tuple[Any, str | None]:
    """The language-model part of a multimodal config, else the config itself.

    A saved multimodal ``config.json`` (llava's) often gives ``text_config`` without the
    figures its text model's class defaults to; transformers fills them from that class, and
    so does this (``AutoConfig.for_model``, never a download). Returns the config and, when
    defaults were filled, the class they came from.
    """
    if _get(config, *_LAYER_COUNT) is not None:
        return config, None
    inner = _get(config, *_TEXT_PARTS)
    if inner is None:
        return config, None
    model_type = config.get("model_type") if isinstance(config, dict) else None
    if _get(inner, *_LAYER_COUNT) is not None or not isinstance(model_type, str):
        return inner, None
    try:
        import transformers
    except ImportError:
        raise UsageError(
            f"{origin}: text_config gives no layer counts and relies on transformers' "
            "defaults: install transformers to read them"
        ) from None
    try:
        rest = {k: v for k, v in config.items() if k != "model_type"}
        full = transformers.AutoConfig.for_model(model_type, **rest)
    except Exception as exc:  # an unknown model type, a value the class rejects
        raise UsageError(
            f"{origin}: text_config gives no layer counts, and transformers cannot fill "
            f"them for model_type {model_type!r} ({type(exc).__name__}: {exc})"
        ) from None
    text = _get(full, *_TEXT_PARTS)
    if text is None or _get(text, *_LAYER_COUNT) is None:
        return inner, None
    return text, f"transformers' {type(text).__name__} defaults"


def _figure(config: Any, origin: str, name: str) -> Any:
    """The figure ``name`` of ``config`` (under its name or an alias), in its plausible range.

    None when the config does not give it; ``OutOfRange`` (a ``UsageError``) naming the
    field as the config spells it when the value is of the wrong kind or out of range
    (:mod:`errkb.probes._plausible`): nothing downstream ever loops over 10^8 layers.
    """
    figure = RANGES[name]
    for key in (figure.name, *figure.aliases):
        value = _get(config, key)
        if value is not None:
            return figure.check(value, f"{origin}: field {key!r}")
    return None


def _layer_kinds(config: Any, layers: int, window: int | None) -> tuple[str, ...]:
    """What each layer caches, read the way vLLM reads the config's hybrid markers."""
    kinds = _get(config, "layer_types")
    if isinstance(kinds, (list, tuple)) and len(kinds) == layers:
        # Qwen3-Next, Gemma 3, gpt-oss: full_attention / sliding_attention / linear_attention.
        return tuple(
            SLIDING
            if "sliding" in str(k)
            else FULL
            if str(k) in ("full_attention", "attention", "chunked_attention")
            else NONE
            for k in kinds
        )
    interval = _get(config, "full_attention_interval")
    if interval is None and str(_get(config, "model_type") or "").startswith("qwen3_next"):
        interval = 4  # Qwen3NextConfig's default when the config.json names neither
    if isinstance(interval, int) and not isinstance(interval, bool) and interval > 0:
        # Qwen3-Next's config.json: every interval-th layer is full attention, the others linear
        # (transformers' Qwen3NextConfig builds layer_types so, which vLLM reads).
        return tuple(FULL if (i + 1) % interval == 0 else NONE for i in range(layers))
    blocks = _get(config, "layers_block_type")
    if isinstance(blocks, (list, tuple)) and len(blocks) == layers:
        # Jamba: "attention"; Zamba2: "hybrid" layers hold the shared attention.
        return tuple(FULL if str(b) in ("attention", "hybrid") else NONE for b in blocks)
    pattern = _get(config, "hybrid_override_pattern")
    if isinstance(pattern, str) and len(pattern) == layers:
        # NemotronH: "*" is an attention layer, "M" Mamba, "-" an MLP.
        return tuple(FULL if c == "*" else NONE for c in pattern)
    period = _get(config, "attn_layer_period")
    if isinstance(period, int) and period > 0:
        # Jamba's saved config: attention where i % period == offset (JambaConfig defaults 4).
        offset = _get(config, "attn_layer_offset")
        offset = offset if isinstance(offset, int) else 4
        return tuple(FULL if i % period == offset else NONE for i in range(layers))
    attn_types = _get(config, "attn_type_list")
    if isinstance(attn_types, (list, tuple)) and len(attn_types) == layers:
        # MiniMax: 1 is softmax attention, 0 lightning (linear) attention.
        return tuple(FULL if t == 1 else NONE for t in attn_types)
    block_configs = _get(config, "block_configs")
    if isinstance(block_configs, (list, tuple)) and len(block_configs) == layers:
        # Nemotron-NAS (DeciLM): a block whose attention is a no-op caches nothing.
        return tuple(
            NONE if _get(_get(b, "attention") or {}, "no_op") else FULL for b in block_configs
        )
    model_type = str(_get(config, "model_type") or "")
    if window is not None and model_type.startswith("gemma2"):
        # Gemma 2: even layers slide (gemma2.py:149@v0.9.0).
        return tuple(SLIDING if i % 2 == 0 else FULL for i in range(layers))
    if window is not None and model_type.startswith("gemma3"):
        # Gemma 3: every sliding_window_pattern-th layer is global (gemma3.py:150@v0.9.0).
        every = _get(config, "sliding_window_pattern")
        every = every if isinstance(every, int) and every > 0 else 6
        return tuple(FULL if (i + 1) % every == 0 else SLIDING for i in range(layers))
    if window is not None:
        # Mistral and others with one window for every layer.
        return (SLIDING,) * layers
    return (FULL,) * layers


def _window(config: Any) -> int | None:
    """The sliding window the engine uses, or None (Qwen2 sets one but turns it off)."""
    window = _get(config, "sliding_window")
    if isinstance(window, bool) or not isinstance(window, int) or window <= 0:
        return None
    if _get(config, "use_sliding_window") is False:
        return None
    return window


def model_shape(config: Any, *, origin: str) -> ModelShape:
    """Read a :class:`ModelShape` from a config object or dict; ``UsageError`` if incomplete.

    Every figure must be in its plausible range (:mod:`errkb.probes._plausible`, printed in
    docs/console.md); a zero, negative, fractional or absurd count is an error that names the
    field, never a shape to compute with. The layer count sizes :attr:`ModelShape.layer_kinds`,
    one entry per layer: its range (at most 1,024) keeps that tuple small.
    """
    config, defaults_from = _text_config(config, origin)
    layers = _figure(config, origin, "num_hidden_layers")
    heads = _figure(config, origin, "num_attention_heads")
    if layers is None or heads is None:
        raise UsageError(f"{origin}: the config has no num_hidden_layers/num_attention_heads")
    kv = _figure(config, origin, "num_key_value_heads")
    if kv is None:
        kv = 1 if _get(config, "multi_query") is True else heads
    if kv > heads and isinstance(config, dict):
        # Refused in a config given as data or read from a file; a live config object is what
        # the process ran with (transformers' Qwen2Config defaults to 32 KV heads whatever
        # the heads), and its diagnosis still reads it as it is.
        raise UsageError(
            f"{origin}: field 'num_key_value_heads': expected at most num_attention_heads "
            f"({heads}), got {kv}"
        )
    explicit = _figure(config, origin, "head_dim")
    hidden = _figure(config, origin, "hidden_size")
    _figure(config, origin, "vocab_size")
    if explicit is not None:
        head_dim = explicit
    elif hidden is not None:
        head_dim = hidden // heads
        if head_dim <= 0:
            raise UsageError(
                f"{origin}: field 'hidden_size': expected at least num_attention_heads "
                f"({heads}), got {hidden}"
            )
    else:
        raise UsageError(f"{origin}: the config gives neither head_dim nor hidden_size")
    latent = _figure(config, origin, "kv_lora_rank")
    mla = None
    if latent is not None:
        mla = (
            latent,
            _figure(config, origin, "qk_rope_head_dim") or 0,
            _figure(config, origin, "qk_nope_head_dim") or 0,
        )
    dtype = _get(config, "torch_dtype", "dtype")
    window = _window(config)
    if window is not None:
        _figure(config, origin, "sliding_window")
    for name in ("sliding_window_pattern", "attn_layer_period", "attn_layer_offset"):
        _figure(config, origin, name)
    kinds = _layer_kinds(config, layers, window)
    return ModelShape(
        layer_kinds=kinds,
        attention_layers=sum(1 for k in kinds if k != NONE),
        num_attention_heads=heads,
        num_kv_heads=kv,
        head_dim=head_dim,
        head_dim_explicit=explicit is not None,
        hidden_size=hidden,
        dtype=str(dtype).removeprefix("torch.") if dtype is not None else None,
        max_position_embeddings=_figure(config, origin, "max_position_embeddings"),
        sliding_window=window,
        mla=mla,
        model_type=_get(config, "model_type"),
        defaults_from=defaults_from,
        origin=origin,
    )


def weights_bytes(folder: Path) -> int | None:
    """The size of a local model's weight files (safetensors, else .bin), or None."""
    for pattern in ("*.safetensors", "*.bin"):
        files = list(folder.glob(pattern))
        if files:
            return sum(f.stat().st_size for f in files)
    return None


def read_model_path(path: str | Path) -> ModelShape:
    """A local model folder or ``config.json``; never the hub. ``UsageError`` when unreadable.

    The size of the weight files beside the config comes along (``weights_bytes``).
    """
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
    shape = model_shape(data, origin=str(file))
    return attrs.evolve(shape, weights_bytes=weights_bytes(file.parent))


#: Where a shape read from a config given as data (``Given.model_config``) says it came from.
GIVEN_CONFIG = "the model config given"


def probe(evidence: Evidence, timeout: float) -> ModelShape | None:  # noqa: ARG001 - a local file
    """The ``model`` probe: the shape of the model the user gave (a local folder or config.json).

    A config given as data (``Given.model_config``) is read the same way, and wins. None when
    neither was given; raises :class:`~errkb.exceptions.UsageError` when it cannot be read.
    """
    config = evidence.given("model_config")
    if config is not None:
        if not isinstance(config, Mapping):
            raise UsageError(f"{GIVEN_CONFIG}: expected a JSON object")
        return model_shape(dict(config), origin=GIVEN_CONFIG)
    given = evidence.given("model")
    return read_model_path(given) if given else None
