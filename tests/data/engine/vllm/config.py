"""The engine's configurations, as much of them as the KV-cache arithmetic reads.

``ModelConfig`` follows vllm/config.py@v0.6.0: ``_get_and_verify_dtype`` (config.py:1604: a
float32 checkpoint is served in float16 under dtype="auto"), ``get_head_size`` (config.py:460:
``head_dim`` if the config has one, else hidden_size // num_attention_heads),
``get_total_num_kv_heads`` (config.py:473: ``num_key_value_heads``, else the attention heads)
and ``get_num_kv_heads`` (config.py:516: at least one per GPU under tensor parallelism).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace


class ModelConfig:
    def __init__(self, model: str, dtype: str, max_model_len: int | None) -> None:
        self.model = model
        path = Path(model) / "config.json"
        if not path.is_file():
            raise OSError(f"the stand-in engine reads only local models: no {path}")
        self.hf_config = SimpleNamespace(**json.loads(path.read_text()))
        self.hf_text_config = self.hf_config
        self.dtype = _dtype(getattr(self.hf_config, "torch_dtype", None), dtype)
        derived = getattr(self.hf_config, "max_position_embeddings", 2048)
        if max_model_len is not None and max_model_len > derived:
            # vllm/config.py:1656@v0.6.0 (_get_and_verify_max_len), wording shortened.
            raise ValueError(
                f"User-specified max_model_len ({max_model_len}) is greater than the derived "
                f"max_model_len (max_position_embeddings={derived} in model's config.json)."
            )
        self.max_model_len = derived if max_model_len is None else max_model_len

    def get_head_size(self) -> int:
        head_dim = getattr(self.hf_text_config, "head_dim", None)
        if head_dim is not None:
            return int(head_dim)
        return int(self.hf_text_config.hidden_size // self.hf_text_config.num_attention_heads)

    def get_total_num_kv_heads(self) -> int:
        heads = getattr(self.hf_text_config, "num_key_value_heads", None)
        return int(heads if heads is not None else self.hf_text_config.num_attention_heads)

    def get_num_kv_heads(self, parallel_config: ParallelConfig) -> int:
        return max(1, self.get_total_num_kv_heads() // parallel_config.tensor_parallel_size)

    def get_num_attention_layers(self, parallel_config: ParallelConfig) -> int:
        del parallel_config  # one pipeline stage: every layer is here
        return int(self.hf_text_config.num_hidden_layers)


def _dtype(config_dtype: str | None, dtype: str) -> str:
    config_dtype = config_dtype or "float32"
    dtype = dtype.lower()
    if dtype != "auto":
        return {"half": "float16", "float": "float32"}.get(dtype, dtype)
    return "float16" if config_dtype == "float32" else config_dtype


class CacheConfig:
    def __init__(
        self, block_size: int, gpu_memory_utilization: float, cache_dtype: str, swap_space: float
    ) -> None:
        # vllm/config.py:638@v0.6.0 (CacheConfig._verify_args): a fraction, at most 1.
        if gpu_memory_utilization > 1.0:
            raise ValueError(
                f"GPU memory utilization must be less than 1.0. Got {gpu_memory_utilization}."
            )
        self.block_size = block_size
        self.gpu_memory_utilization = gpu_memory_utilization
        self.cache_dtype = cache_dtype
        self.swap_space_bytes = int(swap_space * (1 << 30))
        self.num_gpu_blocks: int | None = None


class ParallelConfig:
    def __init__(self, tensor_parallel_size: int) -> None:
        self.tensor_parallel_size = tensor_parallel_size
        self.pipeline_parallel_size = 1


class EngineConfig:
    """The configs together (``EngineConfig`` in v0.6.0, ``VllmConfig`` in V1)."""

    def __init__(
        self, model_config: ModelConfig, cache_config: CacheConfig, parallel_config: ParallelConfig
    ) -> None:
        self.model_config = model_config
        self.cache_config = cache_config
        self.parallel_config = parallel_config


VllmConfig = EngineConfig
