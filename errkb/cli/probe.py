"""``errkb probe``: the GPUs as errkb measures them, and a model's KV-cache arithmetic."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_OK, options

if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence

    from errkb.options import Given, Options
    from errkb.probes import GpuDevice
    from errkb.probes.model import ModelShape

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Print the GPUs and, with ``--model``, its KV bytes per token and the longest context."""
    return _probe(options(args, sys.stdout), as_json=args.json)


def _probe(options: Options, *, as_json: bool) -> int:
    from errkb._sanitize import clean
    from errkb.evidence import Evidence
    from errkb.units import format_bytes

    given = options.given
    evidence = Evidence(options=options, exceptions=())
    gpus = evidence.gpus()
    out: dict[str, object] = {
        "gpus": [d.to_dict() for d in gpus.devices],
        "gpu_error": gpus.error,
    }
    lines = []
    for d in gpus.devices:
        free = f", {format_bytes(d.free_bytes)} free" if d.free_bytes is not None else ""
        cap = f", compute capability {d.capability[0]}.{d.capability[1]}" if d.capability else ""
        lines.append(f"GPU {d.index}: {d.name}, {format_bytes(d.total_bytes)} total{free}{cap}")
    if gpus.error:
        lines.append(f"GPU: not measured ({gpus.error})")
    if given.model:
        out["model"] = _model_report(given, gpus.devices, lines)
    if as_json:
        print(json.dumps(out, indent=2, ensure_ascii=True))
    else:
        print(clean("\n".join(lines)), file=sys.stdout)
    return EXIT_OK


def _model_report(
    given: Given, devices: Sequence[GpuDevice], lines: list[str]
) -> dict[str, object]:
    """The model's KV-cache arithmetic (the advisor's own), as JSON and as ``lines``."""
    from errkb.advisors.kv_cache import Era, era_of, layout_for_model, longest_length, v0_blocks
    from errkb.probes.engine import installed_version
    from errkb.units import format_bytes

    model = str(given.model)
    shape = _read_model(model)
    tp = int(given.tensor_parallel_size or 1)
    block = int(given.block_size or 16)
    installed = installed_version("vllm")
    era = era_of("v1", None, "vllm-v1", installed)[0] if installed else Era(engine="vllm-v1")
    sized, size = layout_for_model(
        shape,
        era=era,
        block_size=block,
        kv_cache_dtype=given.kv_cache_dtype,
        tensor_parallel_size=tp,
    )
    layout = sized.layout
    bpt = layout.bytes_per_token
    # The installed vLLM's default, else 0.9: the smaller budget, never an overstatement.
    defaults = era.default_utilizations() if installed else (0.9,)
    util = float(given.gpu_memory_utilization or defaults[0])
    total = given.gpu_memory_bytes or (devices[0].total_bytes if devices else None)
    weights = shape.weights_bytes
    entry: dict[str, object] = {
        "config": shape.origin,
        "kv_bytes_per_token": bpt,
        "kv_cache_dtype_bytes": size,
        "tensor_parallel_size": tp,
        "block_size": block,
        "gpu_memory_utilization": util,
    }
    if shape.mla is not None:
        what = f"MLA latent of {sized.head_size} (the same on every GPU)"
    else:
        what = f"{shape.num_kv_heads} KV heads of {shape.head_dim}"
    windows = sum(1 for k in shape.layer_kinds if k == "sliding")
    window = f" ({windows} with a {shape.sliding_window}-token window)" if windows else ""
    lines.append(
        f"model {shape.origin}: {shape.attention_layers} attention layers{window}, "
        f"{what}, {size}-byte cache"
    )
    lines.append(
        f"  KV cache: {bpt:,} bytes per token ({format_bytes(bpt)}) per GPU at tensor_parallel_size={tp}"
    )
    if total and weights is not None:
        budget = max(0, int(util * total) - weights // tp)
        limit = shape.max_position_embeddings or 1 << 24
        if layout.has_windows:
            fits = longest_length(layout, budget, limit=max(limit, 1 << 24), batched=8192)
        else:
            fits = v0_blocks(budget, layout.block_bytes) * block
        entry.update({"weights_bytes": weights, "max_model_len_that_fits": fits, "estimate": True})
        lines.append(
            f"  at gpu_memory_utilization={util:g} of {format_bytes(total)}: about {fits:,} tokens fit "
            f"(estimate: {format_bytes(weights // tp)} of weights per GPU, activations not counted)"
        )
    elif total:
        lines.append("  no weight files beside the config: cannot estimate the longest context")
    return entry


def _read_model(model: str) -> ModelShape:
    """The model's shape; a ``UsageError`` names the ``--model`` flag in front of the path."""
    from errkb.exceptions import UsageError
    from errkb.probes.model import read_model_path

    try:
        return read_model_path(model)
    except UsageError as exc:
        raise UsageError(f"--model {exc}") from None
