"""``CacheEngine.get_cache_block_size``: the bytes of one KV-cache block, over all layers.

vllm/worker/cache_engine.py:105@v0.6.0: a key block and a value block of
``block_size x num_kv_heads (per GPU) x head_size`` elements per attention layer, in the
cache's dtype (the model's under ``cache_dtype="auto"``).
"""

from __future__ import annotations

from vllm import _fake
from vllm.config import CacheConfig, ModelConfig, ParallelConfig


class CacheEngine:
    @staticmethod
    def get_cache_block_size(
        cache_config: CacheConfig, model_config: ModelConfig, parallel_config: ParallelConfig
    ) -> int:
        head_size = model_config.get_head_size()
        num_heads = model_config.get_num_kv_heads(parallel_config)
        num_attention_layers = model_config.get_num_attention_layers(parallel_config)
        key_cache_block = cache_config.block_size * num_heads * head_size
        value_cache_block = key_cache_block
        total = num_attention_layers * (key_cache_block + value_cache_block)
        if cache_config.cache_dtype == "auto":
            dtype = model_config.dtype
        else:
            dtype = cache_config.cache_dtype
        return _fake.DTYPE_SIZE[dtype] * total
