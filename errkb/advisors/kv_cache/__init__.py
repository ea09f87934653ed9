"""The KV-cache advisor: computes the fix when an LLM engine's KV cache cannot hold its length.

Covers the whole family: the old engine's "max seq len ... larger than ... KV cache (N)" (vLLM
V0 and ChatTTS's vendored copy), vLLM V1's "KV cache is needed ... available KV cache memory" in
GB or GiB, "No available memory for the cache blocks", the CPU backend's variant, and V1's
"Free memory on device ... less than desired GPU memory utilization". It uses whatever evidence
there is (the message and its wording, the engine's objects in the frames, the live GPU, the
model config, the user's flags, an installed vLLM) and names every number with its source as a
fact.

The work is done in these rooms, each a module:

* :mod:`~errkb.advisors.kv_cache._inputs` gathers every input into a frozen
  :class:`~errkb.advisors.kv_cache._inputs.Inputs`, each value with its fact;
* :mod:`~errkb.advisors.kv_cache._eras` tells which vLLM releases printed the message, and
  so which arithmetic and which default ``gpu_memory_utilization`` (0.9, 0.92 from 0.20.0);
* :mod:`~errkb.advisors.kv_cache._arithmetic` and :mod:`~errkb.advisors.kv_cache._layouts`
  hold the formulas of each era (V0 blocks, V1 spec pages with sliding windows and MLA, the
  CPU backend), and :mod:`~errkb.advisors.kv_cache._outcome` applies them to the inputs;
* :mod:`~errkb.advisors.kv_cache._wording` words the outcome as solutions;
* :mod:`~errkb.advisors.kv_cache._example` shows the fix in the user's own call or command,
  found and rewritten with vLLM's specifics (:mod:`~errkb.advisors.kv_cache._engine_calls`)
  by the general rewriter (:mod:`errkb.advisors._callsite`).

``errkb probe`` uses the same arithmetic (:func:`layout_for_model`). docs/kv-cache.md gives
each formula with the vLLM source line it follows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb.advisors import Advice, Contract, Variant, advisor
from errkb.advisors.kv_cache._arithmetic import (
    Layout,
    longest_length,
    needed_bytes,
    round_down,
    round_up,
    v0_blocks,
)
from errkb.advisors.kv_cache._eras import Era, era_of
from errkb.advisors.kv_cache._example import example_fix
from errkb.advisors.kv_cache._inputs import gather
from errkb.advisors.kv_cache._layouts import Sized, layout_from_shape, sizing_for
from errkb.advisors.kv_cache._outcome import compute
from errkb.advisors.kv_cache._wording import solutions

if TYPE_CHECKING:
    from errkb.evidence import Evidence
    from errkb.match import Match
    from errkb.probes.model import ModelShape

__all__ = [
    "CONTRACT",
    "VARIANTS",
    "Era",
    "Layout",
    "Sized",
    "advise",
    "era_of",
    "layout_for_model",
    "longest_length",
    "needed_bytes",
    "round_down",
    "round_up",
    "v0_blocks",
]

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


def layout_for_model(
    shape: ModelShape,
    *,
    era: Era | None = None,
    block_size: int = 16,
    kv_cache_dtype: str | None = None,
    tensor_parallel_size: int = 1,
    pipeline_parallel_size: int = 1,
) -> tuple[Sized, int]:
    """The cache layout of ``shape`` on one GPU, and the bytes per cached value it assumed.

    The one arithmetic of the advisor and of ``errkb probe``. ``kv_cache_dtype`` ``None`` or
    ``auto`` caches in the model's dtype, 16 bits for a float32 checkpoint as vLLM's
    ``dtype='auto'`` serves it; ``era`` defaults to the newest vLLM.

    >>> from errkb.probes.model import model_shape
    >>> llama = model_shape({"num_hidden_layers": 32, "num_attention_heads": 32,
    ...     "num_key_value_heads": 8, "hidden_size": 4096, "torch_dtype": "bfloat16"}, origin="x")
    >>> sized, size = layout_for_model(llama)
    >>> (sized.layout.bytes_per_token, size)
    (131072, 2)
    """
    from errkb.probes.model import cache_dtype_bytes, dtype_bytes

    name = kv_cache_dtype or "auto"
    size = cache_dtype_bytes(name) if name != "auto" else None
    if size is None:
        model = dtype_bytes(shape.dtype) if shape.dtype else None
        size = 2 if model in (None, 4) else model
    sized = layout_from_shape(
        shape,
        sizing=sizing_for(era or Era(engine="vllm-v1")),
        block_size=block_size,
        cache_bytes=size,
        cache_dtype=name,
        tp=tensor_parallel_size,
        pp=pipeline_parallel_size,
    )
    return sized, size


@advisor(CONTRACT)
def advise(match: Match, evidence: Evidence) -> Advice | None:
    """Compute the KV-cache fix for ``match`` from whatever evidence there is."""
    variant = CONTRACT.variant_for(match.captures)
    inputs = gather(match, evidence, variant.name if variant is not None else "no-blocks")
    outcome = compute(inputs)
    found = solutions(inputs, outcome)
    settings = next((dict(s.settings) for s in found if s.settings), {})
    # What the record's example leaves alone keeps the value this run had.
    util = inputs.utilization.value if inputs.utilization else None
    current = {
        "max_model_len": inputs.max_model_len.value if inputs.max_model_len else None,
        "gpu_memory_utilization": util if util is not None and 0 < util <= 1 else None,
    }
    fix = example_fix(match, evidence, settings, current)
    return Advice(
        solutions=tuple(found),
        facts=inputs.facts() + outcome.facts,
        example_fix=fix,
        notes=inputs.notes + outcome.notes,
        withhold_example=outcome.contradiction,
    )
