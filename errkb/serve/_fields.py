"""Reading the body of ``POST /v1/explain``: every field checked, every error naming its field.

The what-if values are the CLI's evidence flags under the same names (``errkb explain
--gpu-memory 80GiB`` is ``"what_if": {"gpu_memory": "80GiB"}``) and become the same
:class:`errkb.options.Given`. The model config is data: a JSON object of bounded size whose
counts must be numbers, read as a ``config.json`` is read; never a path, never fetched.
"""

from __future__ import annotations

import json
import re
from typing import Any

from errkb.exceptions import UsageError
from errkb.probes.model import GIVEN_CONFIG, model_shape
from errkb.serve._limits import Problem
from errkb.units import parse_size

__all__ = ["MAX_MODEL_CONFIG_BYTES", "WHAT_IF", "explain_body"]

#: The largest model config, as JSON; a config.json is a few kilobytes.
MAX_MODEL_CONFIG_BYTES = 256 * 1024
#: How deep a model config may nest.
_MAX_DEPTH = 16
#: The config fields that are counts: each, when given, must be an integer.
_COUNTS = (
    "num_hidden_layers",
    "n_layer",
    "num_layers",
    "num_attention_heads",
    "n_head",
    "num_heads",
    "num_key_value_heads",
    "num_kv_heads",
    "n_head_kv",
    "multi_query_group_num",
    "head_dim",
    "hidden_size",
    "n_embd",
    "d_model",
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "kv_lora_rank",
    "qk_rope_head_dim",
    "qk_nope_head_dim",
    "sliding_window_pattern",
    "attn_layer_period",
    "attn_layer_offset",
)
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,40}")

#: The what-if fields, each with what it expects (the OpenAPI document says the same).
WHAT_IF = {
    "gpu_memory": "total memory of one GPU: a size such as '80GiB', or a number of bytes",
    "gpu_memory_utilization": "the fraction of GPU memory the engine was given, above 0, at most 1",
    "block_size": "tokens per KV-cache block, a positive integer",
    "kv_cache_dtype": "the KV cache's dtype: auto, fp8, fp8_e5m2, ...",
    "tensor_parallel_size": "GPUs the model is split over, a positive integer",
    "dtype": "the engine's dtype: float32, bfloat16, half, ...",
    "model_config": "the content of the model's config.json, a JSON object",
}


def _positive_int(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise Problem(422, f"{field}: expected a positive integer, got {_shown(value)}", field)
    return value


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise Problem(
            422, f"{field}: expected a dtype name such as 'fp8', got {_shown(value)}", field
        )
    return value


def _shown(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _depth(value: Any, level: int = 0) -> int:
    if level > _MAX_DEPTH:
        return level
    if isinstance(value, dict):
        return max((_depth(v, level + 1) for v in value.values()), default=level)
    if isinstance(value, list):
        return max((_depth(v, level + 1) for v in value), default=level)
    return level


def _model_config(value: Any) -> dict[str, Any]:
    field = "what_if.model_config"
    if not isinstance(value, dict):
        raise Problem(422, f"{field}: expected a JSON object (a config.json's content)", field)
    size = len(json.dumps(value))
    if size > MAX_MODEL_CONFIG_BYTES:
        raise Problem(
            422, f"{field}: {size:,} bytes of JSON, more than {MAX_MODEL_CONFIG_BYTES:,}", field
        )
    if _depth(value) > _MAX_DEPTH:
        raise Problem(422, f"{field}: nested deeper than {_MAX_DEPTH} levels", field)
    for part in (value, *(value.get(k) for k in ("text_config", "language_config"))):
        if not isinstance(part, dict):
            continue
        inner = field if part is value else f"{field}.{_which(value, part)}"
        for name in _COUNTS:
            count = part.get(name)
            if count is not None and (isinstance(count, bool) or not isinstance(count, int)):
                raise Problem(
                    422,
                    f"{inner}.{name}: expected an integer, got {_shown(count)}",
                    f"{inner}.{name}",
                )
    try:
        model_shape(value, origin=GIVEN_CONFIG)
    except UsageError as exc:
        said = str(exc).removeprefix(f"{GIVEN_CONFIG}: ")
        named = re.match(r"field '(\w+)': (.*)", said)
        if named:
            raise Problem(422, f"{field}.{named[1]}: {named[2]}", f"{field}.{named[1]}") from None
        raise Problem(422, f"{field}: {said}", field) from None
    return value


def _which(config: dict[str, Any], part: dict[str, Any]) -> str:
    return next(k for k, v in config.items() if v is part)


def _what_if(value: Any) -> dict[str, Any]:
    """The :class:`errkb.options.Given` values of a ``what_if`` object."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise Problem(422, "what_if: expected an object", "what_if")
    given: dict[str, Any] = {}
    for key, item in value.items():
        field = f"what_if.{key}"
        if item is None:
            continue
        if key == "model":
            raise Problem(
                422,
                f"{field}: the server reads no file of its own machine; send the config.json "
                "content as what_if.model_config",
                field,
            )
        if key == "gpu_memory":
            given["gpu_memory_bytes"] = _gpu_memory(item, field)
        elif key == "gpu_memory_utilization":
            if isinstance(item, bool) or not isinstance(item, (int, float)) or not 0 < item <= 1:
                raise Problem(
                    422,
                    f"{field}: expected a number above 0 and at most 1, got {_shown(item)}",
                    field,
                )
            given[key] = float(item)
        elif key in ("block_size", "tensor_parallel_size"):
            given[key] = _positive_int(item, field)
        elif key in ("kv_cache_dtype", "dtype"):
            given[key] = _name(item, field)
        elif key == "model_config":
            given[key] = _model_config(item)
        else:
            raise Problem(
                422, f"{field}: unknown field (expected one of {', '.join(WHAT_IF)})", field
            )
    return given


def _gpu_memory(value: Any, field: str) -> int:
    if isinstance(value, str):
        try:
            return parse_size(value)
        except UsageError as exc:
            raise Problem(422, f"{field}: {exc}", field) from None
    return _positive_int(value, field)


def explain_body(raw: bytes) -> tuple[str, dict[str, Any]]:
    """The text to explain and the :class:`~errkb.options.Given` values, from the raw body.

    :class:`~errkb.serve._limits.Problem` 400 when the body is not JSON, 422 naming the field
    when a field is missing, unknown or of the wrong kind.
    """
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Problem(400, f"the body is not valid JSON ({exc})") from None
    if not isinstance(body, dict):
        raise Problem(422, "body: expected a JSON object with 'text'", "body")
    unknown = sorted(set(body) - {"text", "what_if"})
    if unknown:
        raise Problem(
            422, f"{unknown[0]}: unknown field (expected 'text' and 'what_if')", unknown[0]
        )
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise Problem(422, "text: expected the message, traceback or log to explain", "text")
    return text, _what_if(body.get("what_if"))
