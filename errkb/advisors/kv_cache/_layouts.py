"""From a model's shape, or an engine's ``kv_cache_spec``, to the :class:`Layout` of one GPU.

Which heads and head size a release caches differs (DeepSeek's MLA above all), and so does
how it treats sliding windows and pipeline stages; :class:`Sizing` says which rules apply
(from the :class:`~errkb.advisors.kv_cache._eras.Era`), and the functions here apply them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb.advisors.kv_cache._arithmetic import (
    FP8_DS_MLA_TOKEN_BYTES,
    LayerGroup,
    Layout,
    stage_layers,
)
from errkb.advisors.kv_cache._eras import (
    V_GROUPED_NEEDED,
    V_MLA_CACHE,
    V_MLA_UNPADDED,
    V_PP_BALANCED,
    V_SLIDING_SPEC,
    Era,
)

if TYPE_CHECKING:
    from errkb.probes.engine import SpecLayer
    from errkb.probes.model import ModelShape

__all__ = ["Sized", "Sizing", "layout_from_shape", "layout_from_spec", "sizing_for"]


@attrs.frozen(kw_only=True)
class Sizing:
    """The rules of an era that change the arithmetic.

    Attributes:
        windows: sliding-window layers are sized by their window (V1 from 0.8.3).
        grouped: V1 sizes hybrid models over padded KV-cache groups (0.14.0 on); None when
            the releases in range differ.
        mla: how DeepSeek's MLA is cached: ``latent``, ``heads`` (qk_nope + qk_rope, 0.7.0)
            or ``padded`` (heads of 256, before 0.7.0).
        pp_balanced: pipeline stages get the leftover layers one each (0.8.0 on).
        head_dim_from_hidden: the head size is hidden / heads, never ``head_dim`` (vLLM 0.2,
            ChatTTS's engine: vllm/config.py:214-216@v0.2.7).
    """

    windows: bool
    grouped: bool | None
    mla: str
    pp_balanced: bool | None
    head_dim_from_hidden: bool = False


def sizing_for(era: Era) -> Sizing:
    """The rules of ``era``; where its releases differ, the newer rule (and ``grouped`` None)."""
    v1 = era.engine == "vllm-v1"
    old = era.engine == "chattts" or (era.high is not None and era.high < (0, 3, 0))
    grouped = None
    if v1:
        before = era.before(V_GROUPED_NEEDED)
        grouped = None if before is None else not before
    mla = "latent"
    if not v1 and era.before(V_MLA_CACHE):
        mla = "heads" if era.before(V_MLA_UNPADDED) is False else "padded"
    pp_before = era.before(V_PP_BALANCED)
    return Sizing(
        windows=v1 and era.before(V_SLIDING_SPEC) is not True,
        grouped=grouped,
        mla=mla,
        pp_balanced=None if pp_before is None else not pp_before,
        head_dim_from_hidden=old,
    )


@attrs.frozen(kw_only=True)
class Sized:
    """A layout and how it was worked out, for the facts."""

    layout: Layout
    heads_per_gpu: int
    head_size: int
    values_per_head: int
    stage_layers: int
    formula: str
    notes: tuple[str, ...] = ()


def layout_from_shape(
    shape: ModelShape,
    *,
    sizing: Sizing,
    block_size: int,
    cache_bytes: int,
    cache_dtype: str = "auto",
    tp: int = 1,
    pp: int = 1,
) -> Sized:
    """The layout of the largest pipeline stage of ``shape`` on one GPU."""
    notes: list[str] = []
    tp, pp = max(1, tp), max(1, pp)
    if shape.mla is not None and sizing.mla == "latent":
        rank, rope, _ = shape.mla
        heads, head, coef = 1, rank + rope, 1
        token_bytes = head * cache_bytes
        if cache_dtype == "fp8_ds_mla":
            token_bytes = FP8_DS_MLA_TOKEN_BYTES
        formula = (
            f"attention layers x (kv_lora_rank + qk_rope_head_dim = {head}) x {cache_bytes} "
            "bytes: one latent a token, the same on every GPU"
        )
        if cache_dtype == "fp8_ds_mla":
            formula = "attention layers x 656 bytes (fp8_ds_mla): one latent a token"
    else:
        if shape.mla is not None:
            rank, rope, nope = shape.mla
            head = 256 if sizing.mla == "padded" else nope + rope
            why = "padded to 256" if sizing.mla == "padded" else "qk_nope + qk_rope"
            notes.append(f"this release caches DeepSeek's heads whole ({why}), not the MLA latent")
        elif sizing.head_dim_from_hidden and shape.hidden_size:
            head = shape.hidden_size // shape.num_attention_heads
        else:
            head = shape.head_dim
        heads, coef = max(1, shape.num_kv_heads // tp), 2
        token_bytes = coef * heads * head * cache_bytes
        formula = "2 x attention layers x KV heads per GPU x head size x bytes"
    ranges = stage_layers(shape.num_hidden_layers, pp, balanced=sizing.pp_balanced)
    kinds_per_stage = [[shape.layer_kinds[i] for i in r] for r in ranges]
    stage = max(kinds_per_stage, key=lambda ks: sum(1 for k in ks if k != "none"))
    full = sum(1 for k in stage if k == "full")
    sliding = sum(1 for k in stage if k == "sliding")
    if not sizing.windows:
        full, sliding = full + sliding, 0
    page = block_size * token_bytes
    groups = [LayerGroup(kind="full", count=full, page_bytes=page)]
    if sliding:
        groups.append(
            LayerGroup(
                kind="sliding", count=sliding, page_bytes=page, sliding_window=shape.sliding_window
            )
        )
    if pp > 1:
        formula += f"; the largest of {pp} pipeline stages"
    return Sized(
        layout=Layout(groups=tuple(g for g in groups if g.count), block_size=block_size),
        heads_per_gpu=heads,
        head_size=head,
        values_per_head=coef,
        stage_layers=full + sliding,
        formula=formula,
        notes=tuple(notes),
    )


def layout_from_spec(layers: tuple[SpecLayer, ...]) -> Layout:
    """The layout of an engine's own ``kv_cache_spec`` (page sizes as the engine has them)."""
    counts: dict[tuple[str, int, int | None], int] = {}
    for layer in layers:
        key = (
            layer.kind,
            layer.page_bytes,
            layer.sliding_window if layer.kind == "sliding" else None,
        )
        counts[key] = counts.get(key, 0) + 1
    groups = tuple(
        LayerGroup(kind=kind, count=n, page_bytes=page, sliding_window=window)
        for (kind, page, window), n in counts.items()
    )
    return Layout(groups=groups, block_size=layers[0].block_size)
