"""``errkb probe``: the GPUs as errkb measures them, and a model's KV-cache arithmetic."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_OK, options

if TYPE_CHECKING:
    import argparse

    from errkb.options import Options
    from errkb.probes.model import ModelShape

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Print the GPUs and, with ``--model``, its KV bytes per token and the longest context."""
    return _probe(options(args, sys.stdout), as_json=args.json)


def _probe(options: Options, *, as_json: bool) -> int:
    from errkb._sanitize import clean
    from errkb.evidence import Evidence
    from errkb.probes.model import cache_dtype_bytes, kv_bytes_per_token
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
    model = given.model
    if model:
        shape = _read_model(model)
        tp = int(given.tensor_parallel_size or 1)
        dtype = given.kv_cache_dtype or shape.dtype
        size = cache_dtype_bytes(dtype) if dtype else None
        size = 2 if size in (None, 4) else size
        bpt = kv_bytes_per_token(shape, cache_dtype_bytes=size, tensor_parallel_size=tp)
        block = int(given.block_size or 16)
        util = float(given.gpu_memory_utilization or 0.9)
        total = given.gpu_memory_bytes or (gpus.devices[0].total_bytes if gpus.devices else None)
        weights = _weights_bytes(model)
        entry: dict[str, object] = {
            "config": shape.origin,
            "kv_bytes_per_token": bpt,
            "kv_cache_dtype_bytes": size,
            "tensor_parallel_size": tp,
            "block_size": block,
            "gpu_memory_utilization": util,
        }
        lines.append(
            f"model {shape.origin}: {shape.attention_layers} attention layers, "
            f"{shape.num_kv_heads} KV heads of {shape.head_dim}, {size}-byte cache"
        )
        lines.append(
            f"  KV cache: {bpt:,} bytes per token ({format_bytes(bpt)}) per GPU at tensor_parallel_size={tp}"
        )
        if total and weights is not None:
            budget = int(util * total) - weights // tp
            fits = max(0, budget) // (block * bpt) * block
            entry.update(
                {"weights_bytes": weights, "max_model_len_that_fits": fits, "estimate": True}
            )
            lines.append(
                f"  at gpu_memory_utilization={util:g} of {format_bytes(total)}: about {fits:,} tokens fit "
                f"(estimate: {format_bytes(weights // tp)} of weights per GPU, activations not counted)"
            )
        elif total:
            lines.append("  no weight files beside the config: cannot estimate the longest context")
        out["model"] = entry
    if as_json:
        print(json.dumps(out, indent=2, ensure_ascii=True))
    else:
        print(clean("\n".join(lines)), file=sys.stdout)
    return EXIT_OK


def _read_model(model: str) -> ModelShape:
    """The model's shape; a ``UsageError`` names the ``--model`` flag in front of the path."""
    from errkb.exceptions import UsageError
    from errkb.probes.model import read_model_path

    try:
        return read_model_path(model)
    except UsageError as exc:
        raise UsageError(f"--model {exc}") from None


def _weights_bytes(model: str) -> int | None:
    """The size of a local model's weight files (safetensors, else .bin), or None."""
    folder = Path(model)
    folder = folder if folder.is_dir() else folder.parent
    for pattern in ("*.safetensors", "*.bin"):
        files = list(folder.glob(pattern))
        if files:
            return sum(f.stat().st_size for f in files)
    return None
