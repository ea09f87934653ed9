"""The KV-cache arithmetic of each engine era, as pure functions on plain numbers.

Nothing here reads evidence or writes words: a :class:`Layout` says what one GPU caches for
one token position, layer group by layer group, and the functions below size it the way the
engine of an era does. The formulas and the sources they follow (file:line@version):

* page of one layer, one block: ``coef x block_size x KV heads per GPU x head size x bytes``,
  ``coef`` 2 (K and V), 1 for MLA's latent (vllm/v1/kv_cache_interface.py:79-83@v0.9.1;
  vllm/worker/cache_engine.py:102-122@v0.7.1); DeepSeek's ``fp8_ds_mla`` is 656 bytes a token
  whatever the dtype (kv_cache_interface.py:331-338@v0.20.0). KV heads per GPU are
  ``max(1, heads // tensor_parallel_size)`` (vllm/config.py:252-260@v0.2.7), one for MLA.
* V0 and ChatTTS: ``blocks = max(0, (total x utilization - peak) // block_bytes)`` with
  ``block_bytes`` the pages of every attention layer of the stage
  (vllm/worker/worker.py:102-110@v0.2.7, worker.py:207-223@v0.6.6); sliding windows do not
  shrink it.
* V1: needed = the sum over layers of ``max_memory_usage_bytes``: full attention
  ``cdiv(max_model_len, block) x page`` (kv_cache_interface.py:103-105@v0.9.1), sliding window
  ``(cdiv(min(window - 1 + max_num_batched_tokens, max_model_len), block) + 1) x page``
  (kv_cache_interface.py:138-154@v0.9.1); from 0.14.0 over KV-cache groups padded to one
  size (vllm/v1/core/kv_cache_utils.py:1318@v0.14.0). The longest length is the largest
  that fits, searched as ``estimate_max_model_len`` does (kv_cache_utils.py:493-535@v0.9.1).
"""

from __future__ import annotations

import math

from errkb._attrs import attrs

__all__ = [
    "LayerGroup",
    "Layout",
    "cdiv",
    "longest_length",
    "needed_bytes",
    "printed_range",
    "round_down",
    "round_up",
    "stage_layers",
    "v0_blocks",
]

GIB = 1 << 30
#: DeepSeek V3.2's fp8_ds_mla layout: 512 fp8 latent values, 4 float32 scales, 64 bf16 rope
#: values: 656 bytes a token (vllm/v1/kv_cache_interface.py:336-338@v0.20.0).
FP8_DS_MLA_TOKEN_BYTES = 656


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


def round_up(x: float, places: int = 2) -> float:
    """Round up to ``places`` decimals, ignoring float noise (0.53125 -> 0.54, 0.5 -> 0.5)."""
    scale = 10**places
    return float(math.ceil(round(x * scale, 9)) / scale)


def round_down(x: float, places: int = 2) -> float:
    """Round down to ``places`` decimals, ignoring float noise."""
    scale = 10**places
    return float(math.floor(round(x * scale, 9)) / scale)


def printed_range(
    value: float, unit_bytes: int = GIB, places: int = 2, *, signed: bool = False
) -> tuple[int, int]:
    """The bytes a size printed with ``places`` decimals can stand for: ``(low, high)``.

    vLLM prints sizes as ``f"{x:.2f}"`` or ``round(x, 2)`` of GiB, so "9.47 GiB" is anything
    from 9.465 GiB to 9.475 GiB (vllm/v1/core/kv_cache_utils.py:547-549@v0.9.0,
    vllm/utils/mem_utils.py:27-28@v0.20.0). A size is never below zero, except with
    ``signed``: what is left for the cache, "-0.30GiB", when the profile overshot.
    """
    half = 0.5 * 10**-places
    low = math.ceil((value - half) * unit_bytes)
    return low if signed else max(0, low), math.floor((value + half) * unit_bytes)


@attrs.frozen(kw_only=True)
class LayerGroup:
    """``count`` layers that cache alike: ``full``, ``sliding`` (a window), or ``state``.

    ``page_bytes`` is one block of one layer; a ``state`` layer (Mamba) holds one page
    whatever the length.
    """

    kind: str
    count: int
    page_bytes: int
    sliding_window: int | None = None


@attrs.frozen(kw_only=True)
class Layout:
    """What one GPU caches, by layer group, in blocks of ``block_size`` tokens."""

    groups: tuple[LayerGroup, ...]
    block_size: int

    @property
    def attention_layers(self) -> int:
        """Layers with a KV cache (full or sliding)."""
        return sum(g.count for g in self.groups if g.kind in ("full", "sliding"))

    @property
    def block_bytes(self) -> int:
        """One block of every attention layer: what the V0 engine allocates per block."""
        return sum(g.count * g.page_bytes for g in self.groups if g.kind in ("full", "sliding"))

    @property
    def bytes_per_token(self) -> int:
        """Bytes one token takes in every attention layer (inside the windows)."""
        return self.block_bytes // self.block_size

    @property
    def has_windows(self) -> bool:
        """Whether some layer is sized by a sliding window rather than the length."""
        return any(g.kind in ("sliding", "state") for g in self.groups)


def stage_layers(count: int, pp: int, *, balanced: bool | None) -> list[range]:
    """The layer ranges of each pipeline stage, as vLLM splits ``count`` layers over ``pp``.

    ``balanced`` (0.8.0 on): the layers left over go one each to the stages just before the
    last (vllm/distributed/utils.py:118-124@v0.9.0); older releases give them all to the last
    stage (utils.py:84-89@v0.6.6), and so does None (release not known), whose largest stage
    is never the smaller.
    """
    pp = max(1, pp)
    base, extra = divmod(count, pp)
    sizes = [base] * pp
    if balanced:
        for i in range(2, extra + 2):
            sizes[-i] += 1
    else:
        sizes[-1] += extra
    out, start = [], 0
    for size in sizes:
        out.append(range(start, start + size))
        start += size
    return out


def layer_usage(group: LayerGroup, length: int, block: int, batched: int) -> int:
    """``max_memory_usage_bytes`` of one layer of ``group`` at ``max_model_len=length``."""
    if group.kind == "full":
        return cdiv(length, block) * group.page_bytes
    if group.kind == "sliding" and group.sliding_window:
        tokens = min(group.sliding_window - 1 + batched, length)
        return (cdiv(tokens, block) + 1) * group.page_bytes
    if group.kind == "state":
        return group.page_bytes
    return 0


def needed_bytes(layout: Layout, length: int, *, batched: int, grouped: bool = False) -> int:
    """The KV cache V1 needs for one request of ``length`` tokens (``check_enough...``).

    ``grouped``: from vLLM 0.14.0, hybrid models are sized over KV-cache groups of equal size
    (the fewest layers of one kind, or the most when within 1.5x), the last group of each kind
    padded (kv_cache_utils.py:1101-1141,1773-1784@v0.20.0).
    """
    block = layout.block_size
    groups = [g for g in layout.groups if g.count > 0 and g.kind != "none"]
    pages = {g.page_bytes for g in groups}
    kinds = {(g.kind, g.sliding_window) for g in groups}
    if not grouped or len(kinds) < 2 or len(pages) != 1:
        return sum(g.count * layer_usage(g, length, block, batched) for g in groups)
    counts: dict[tuple[str, int | None], int] = {}
    for g in groups:
        counts[g.kind, g.sliding_window] = counts.get((g.kind, g.sliding_window), 0) + g.count
    size = min(counts.values())
    if max(counts.values()) < size * 1.5:
        size = max(counts.values())
    page = pages.pop()
    blocks = 0
    for (kind, window), n in counts.items():
        one = LayerGroup(kind=kind, count=1, page_bytes=page, sliding_window=window)
        blocks += cdiv(n, size) * cdiv(layer_usage(one, length, block, batched), page)
    return size * page * blocks


def longest_length(
    layout: Layout, available: int, *, limit: int, batched: int, grouped: bool = False
) -> int:
    """The largest ``max_model_len`` up to ``limit`` whose cache fits ``available`` bytes.

    Searched as vLLM's ``estimate_max_model_len`` searches (kv_cache_utils.py:493-535@v0.9.1),
    so it is a length vLLM accepts; 0 when not even one token fits.
    """
    lo, hi, best = 1, max(1, limit), 0
    while lo <= hi:
        mid = (lo + hi) // 2
        if needed_bytes(layout, mid, batched=batched, grouped=grouped) <= available:
            best, lo = mid, mid + 1
        else:
            hi = mid - 1
    return best


def v0_blocks(available: int, block_bytes: int) -> int:
    """Blocks the V0 worker allocates in ``available`` bytes, clamped at zero as vLLM clamps."""
    return max(0, available // block_bytes)
