"""V1's per-layer KV-cache specs (vllm/v1/kv_cache_interface.py).

* ``FullAttentionSpec.page_size_bytes`` is kv_cache_interface.py:79@v0.9.1: ``2 x block_size x
  num_kv_heads x head_size x dtype size`` (a key and a value per token); its
  ``max_memory_usage_bytes`` is kv_cache_interface.py:103-105@v0.9.1: ``cdiv(max_model_len,
  block_size) x page_size_bytes``.
* ``SlidingWindowSpec.max_memory_usage_bytes`` is kv_cache_interface.py:138-154@v0.9.1: a window
  layer keeps ``sliding_window - 1`` computed tokens plus the newly scheduled ones, never more
  than ``max_model_len``, and one block more, since the window need not start at a block's
  beginning: ``(cdiv(min(sliding_window - 1 + max_num_batched_tokens, max_model_len),
  block_size) + 1) x page_size_bytes``. Its page is the full-attention page.
* ``MLAAttentionSpec`` (DeepSeek's latent): one latent per token, no separate value
  (kv_cache_interface.py:79-83@v0.9.1, ``coef = 1 if use_mla``); with
  ``cache_dtype_str="fp8_ds_mla"`` a page is ``block_size x 656`` bytes
  (kv_cache_interface.py:331-338@v0.20.0). Sized like full attention.
"""

from __future__ import annotations

import dataclasses

from vllm import _fake
from vllm.config import VllmConfig


def cdiv(a: int, b: int) -> int:
    return -(a // -b)


@dataclasses.dataclass
class FullAttentionSpec:
    block_size: int
    num_kv_heads: int
    head_size: int
    dtype: str

    @property
    def page_size_bytes(self) -> int:
        return (
            2 * self.block_size * self.num_kv_heads * self.head_size * _fake.DTYPE_SIZE[self.dtype]
        )

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        max_model_len = vllm_config.model_config.max_model_len
        return cdiv(max_model_len, self.block_size) * self.page_size_bytes


@dataclasses.dataclass
class SlidingWindowSpec(FullAttentionSpec):
    sliding_window: int = 0

    def max_memory_usage_bytes(self, vllm_config: VllmConfig) -> int:
        max_model_len = vllm_config.model_config.max_model_len
        max_num_batched_tokens = vllm_config.scheduler_config.max_num_batched_tokens
        num_tokens = min(self.sliding_window - 1 + max_num_batched_tokens, max_model_len)
        return (cdiv(num_tokens, self.block_size) + 1) * self.page_size_bytes


@dataclasses.dataclass
class MLAAttentionSpec(FullAttentionSpec):
    cache_dtype_str: str | None = None

    @property
    def page_size_bytes(self) -> int:
        if self.cache_dtype_str == "fp8_ds_mla":
            return self.block_size * 656
        return self.block_size * self.num_kv_heads * self.head_size * _fake.DTYPE_SIZE[self.dtype]
