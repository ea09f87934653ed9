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
from errkb.probes._plausible import MODEL_RANGES, RANGES, OutOfRange, gpu_memory
from errkb.probes.model import GIVEN_CONFIG, model_shape
from errkb.serve._limits import Problem

__all__ = ["MAX_DEPTH", "MAX_MODEL_CONFIG_BYTES", "WHAT_IF", "explain_body"]

#: The largest model config, as JSON; a config.json is a few kilobytes.
MAX_MODEL_CONFIG_BYTES = 256 * 1024
#: How deep a model config may nest.
_MAX_DEPTH = 16
#: How deep a whole request body may nest (the model config within it, 16 more or less).
MAX_DEPTH = 32
_NAME = re.compile(r"[A-Za-z0-9_.-]{1,40}")

#: The what-if fields, each with what it expects (the OpenAPI document says the same).
WHAT_IF = {
    "gpu_memory": "total memory of one GPU: a size such as '80GiB', or a number of bytes "
    f"({RANGES['gpu_memory'].span})",
    "gpu_memory_utilization": "the fraction of GPU memory the engine was given "
    f"({RANGES['gpu_memory_utilization'].span})",
    "block_size": f"tokens per KV-cache block ({RANGES['block_size'].span})",
    "kv_cache_dtype": "the KV cache's dtype: auto, fp8, fp8_e5m2, ...",
    "tensor_parallel_size": f"GPUs the model is split over ({RANGES['tensor_parallel_size'].span})",
    "dtype": "the engine's dtype: float32, bfloat16, half, ...",
    "model_config": "the content of the model's config.json, a JSON object; each figure in its "
    "plausible range (docs/console.md)",
}


def _name(value: Any, field: str) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        raise Problem(
            422, f"{field}: expected a dtype name such as 'fp8', got {_shown(value)}", field
        )
    return value


def _shown(value: Any) -> str:
    if isinstance(value, (dict, list)):
        return "an object" if isinstance(value, dict) else "a list"
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _depth(value: Any) -> int:
    """How deep ``value`` nests, counted without recursion (a body may nest 900 levels)."""
    deepest, todo = 0, [(value, 0)]
    while todo:
        item, level = todo.pop()
        deepest = max(deepest, level)
        if isinstance(item, dict):
            todo.extend((v, level + 1) for v in item.values())
        elif isinstance(item, list):
            todo.extend((v, level + 1) for v in item)
    return deepest


def _range_problem(exc: OutOfRange, field: str) -> Problem:
    """422 naming ``field`` (a dotted path), with the range the figure is outside."""
    said = str(exc).removeprefix(exc.field).removeprefix(": ")
    return Problem(422, f"{field}: {said}", field)


def _model_config(value: Any) -> dict[str, Any]:
    field = "what_if.model_config"
    if not isinstance(value, dict):
        raise Problem(422, f"{field}: expected a JSON object (a config.json's content)", field)
    if _depth(value) > _MAX_DEPTH:
        raise Problem(422, f"{field}: nested deeper than {_MAX_DEPTH} levels", field)
    size = len(json.dumps(value))
    if size > MAX_MODEL_CONFIG_BYTES:
        raise Problem(
            422, f"{field}: {size:,} bytes of JSON, more than {MAX_MODEL_CONFIG_BYTES:,}", field
        )
    parts = ("text_config", "language_config", "llm_config")
    for part in (value, *(value.get(k) for k in parts)):
        if not isinstance(part, dict):
            continue
        inner = field if part is value else f"{field}.{_which(value, part)}"
        # Every figure a config may give, under any of its names, even one this config's
        # reading would pass over: none is let through out of range.
        for figure in MODEL_RANGES:
            for name in (figure.name, *figure.aliases):
                if part.get(name) is not None:
                    try:
                        figure.check(part[name], name)
                    except OutOfRange as exc:
                        raise _range_problem(exc, f"{inner}.{name}") from None
    _no_defaults(value, field)
    try:
        model_shape(value, origin=GIVEN_CONFIG)
    except UsageError as exc:
        said = str(exc).removeprefix(f"{GIVEN_CONFIG}: ")
        named = re.match(r"field '(\w+)': (.*)", said)
        if named:
            raise Problem(422, f"{field}.{named[1]}: {named[2]}", f"{field}.{named[1]}") from None
        raise Problem(422, f"{field}: {said}", field) from None
    return value


def _no_defaults(config: dict[str, Any], field: str) -> None:
    """422 for a multimodal config whose text model gives no layer count.

    ``errkb explain --model`` fills those from transformers' classes; the server does not:
    importing transformers (and torch) for one request would cost every later one 280 MB
    of memory and seconds of CPU. The figures are asked for instead.
    """
    layers = RANGES["num_hidden_layers"]
    names = (layers.name, *layers.aliases)
    if any(config.get(n) is not None for n in names):
        return
    for part in ("text_config", "language_config", "llm_config"):
        inner = config.get(part)
        if isinstance(inner, dict) and not any(inner.get(n) is not None for n in names):
            raise Problem(
                422,
                f"{field}.{part}: gives no num_hidden_layers; the server fills no defaults "
                "from transformers: send the text model's figures (num_hidden_layers, "
                "num_attention_heads, hidden_size, ...)",
                f"{field}.{part}",
            )


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
        try:
            if key == "gpu_memory":
                given["gpu_memory_bytes"] = gpu_memory(item, field)
            elif key in ("gpu_memory_utilization", "block_size", "tensor_parallel_size"):
                given[key] = RANGES[key].check(item, field)
            elif key in ("kv_cache_dtype", "dtype"):
                given[key] = _name(item, field)
            elif key == "model_config":
                given[key] = _model_config(item)
            else:
                shown = key if len(key) <= 40 else key[:37] + "..."
                raise Problem(
                    422,
                    f"what_if.{shown}: unknown field (expected one of {', '.join(WHAT_IF)})",
                    f"what_if.{shown}",
                )
        except OutOfRange as exc:
            raise _range_problem(exc, field) from None
        except UsageError as exc:  # a gpu_memory that is no size: the message names the field
            raise Problem(422, str(exc), field) from None
    if "gpu_memory_utilization" in given:
        given["gpu_memory_utilization"] = float(given["gpu_memory_utilization"])
    return given


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


def explain_body(raw: bytes) -> tuple[str, dict[str, Any]]:
    """The text to explain and the :class:`~errkb.options.Given` values, from the raw body.

    :class:`~errkb.serve._limits.Problem` 400 when the body is not JSON (``NaN`` and
    ``Infinity`` are not), 422 naming the field when a field is missing, unknown, of the wrong
    kind or outside its plausible range (:mod:`errkb.probes._plausible`), or when the body
    nests deeper than :data:`MAX_DEPTH`. Runs in a worker thread: parsing 10 MiB is work.
    """
    try:
        body = json.loads(raw, parse_constant=_refuse_constant)
    except RecursionError:
        raise Problem(422, f"body: nested deeper than {MAX_DEPTH} levels", "body") from None
    except (ValueError, UnicodeDecodeError) as exc:
        said = str(exc) if len(str(exc)) <= 200 else str(exc)[:197] + "..."
        raise Problem(400, f"the body is not valid JSON ({said})") from None
    if not isinstance(body, dict):
        raise Problem(422, "body: expected a JSON object with 'text'", "body")
    if _depth(body) > MAX_DEPTH:
        raise Problem(422, f"body: nested deeper than {MAX_DEPTH} levels", "body")
    unknown = sorted(set(body) - {"text", "what_if"})
    if unknown:
        shown = unknown[0] if len(unknown[0]) <= 40 else unknown[0][:37] + "..."
        raise Problem(422, f"{shown}: unknown field (expected 'text' and 'what_if')", shown)
    text = body.get("text")
    if not isinstance(text, str) or not text.strip():
        raise Problem(422, "text: expected the message, traceback or log to explain", "text")
    return text, _what_if(body.get("what_if"))
