"""V1's per-layer KV-cache spec, full attention only (vllm/v1/kv_cache_interface.py@v0.9.1).

``page_size_bytes`` is kv_cache_interface.py:79: ``2 x block_size x num_kv_heads x head_size x
dtype size`` (a key and a value per token); ``max_memory_usage_bytes`` of full attention is
kv_cache_interface.py:103: ``cdiv(max_model_len, block_size) x page_size_bytes``.
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
