"""The engine's configurations, as much of them as the KV-cache arithmetic reads.

``ModelConfig`` follows vllm/config.py@v0.6.0: ``_get_and_verify_dtype`` (config.py:1604: a
float32 checkpoint is served in float16 under dtype="auto"), ``get_head_size`` (config.py:460:
``head_dim`` if the config has one, else hidden_size // num_attention_heads),
``get_total_num_kv_heads`` (config.py:473: ``num_key_value_heads``, else the attention heads)
and ``get_num_kv_heads`` (config.py:516: at least one per GPU under tensor parallelism).

DeepSeek's MLA (``use_mla``; ``is_deepseek_mla`` in vllm/config.py@v0.7.1: a
``kv_lora_rank`` in the config) caches one latent per token: a head of ``kv_lora_rank +
qk_rope_head_dim`` (config.py:747-753@v0.7.1), one per GPU whatever the tensor parallelism
(config.py:815-819@v0.7.1); V0 before 0.7.1 padded the heads instead, which the stand-in does not
follow (no V0 test uses an MLA model). Under pipeline parallelism a GPU holds its stage's layers:
``get_num_layers`` (config.py:262-264@v0.2.7) through ``get_pp_indices``
(vllm/distributed/utils.py:84-89@v0.6.6: ``total // pp`` each, the rest to the last stage);
the stand-in sizes the largest stage, the one with the fewest blocks. ``SchedulerConfig``
keeps ``max_num_batched_tokens``, which sizes a V1 sliding-window layer and the profiling run's
batch: when nothing sets it, V1 takes 2048 (``DEFAULT_MAX_NUM_BATCHED_TOKENS``,
vllm/config.py:2162@v0.9.1, the default outside ``LLM()`` on GPUs under 70 GiB), V0 with
chunked prefill 2048 from 0.6.5 and 512 before (vllm/config.py:1344@v0.6.5, :1114@v0.6.4), V0
without it ``max(max_model_len, 2048)`` (config.py:1442@v0.6.6), and V0 refuses a value below
``max_model_len`` without chunked prefill (config.py:1466-1474@v0.6.6, its message word for
word). With chunked prefill on it logs the value (config.py:1457-1460@v0.6.6).
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from vllm import _fake


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

    @property
    def use_mla(self) -> bool:
        return getattr(self.hf_text_config, "kv_lora_rank", None) is not None

    def get_head_size(self) -> int:
        if self.use_mla:
            return int(self.hf_text_config.kv_lora_rank + self.hf_text_config.qk_rope_head_dim)
        head_dim = getattr(self.hf_text_config, "head_dim", None)
        if head_dim is not None:
            return int(head_dim)
        return int(self.hf_text_config.hidden_size // self.hf_text_config.num_attention_heads)

    def get_total_num_kv_heads(self) -> int:
        heads = getattr(self.hf_text_config, "num_key_value_heads", None)
        return int(heads if heads is not None else self.hf_text_config.num_attention_heads)

    def get_num_kv_heads(self, parallel_config: ParallelConfig) -> int:
        if self.use_mla:
            return 1
        return max(1, self.get_total_num_kv_heads() // parallel_config.tensor_parallel_size)

    def get_layers_start_end_indices(self, parallel_config: ParallelConfig) -> tuple[int, int]:
        """The largest stage's layers (the last, under v0.6.6's split)."""
        total = int(self.hf_text_config.num_hidden_layers)
        pp = parallel_config.pipeline_parallel_size
        start = (total // pp) * (pp - 1)
        return start, total

    def get_num_attention_layers(self, parallel_config: ParallelConfig) -> int:
        start, end = self.get_layers_start_end_indices(parallel_config)
        return end - start


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
    def __init__(self, tensor_parallel_size: int, pipeline_parallel_size: int = 1) -> None:
        self.tensor_parallel_size = tensor_parallel_size
        self.pipeline_parallel_size = pipeline_parallel_size


class SchedulerConfig:
    def __init__(
        self,
        max_num_batched_tokens: int | None,
        max_model_len: int | None = None,
        enable_chunked_prefill: bool = True,
    ) -> None:
        v0 = max_model_len is not None and not _fake.use_v1()
        if max_num_batched_tokens is None:
            if not v0 or enable_chunked_prefill:
                max_num_batched_tokens = 2048 if not v0 or _fake.release() >= (0, 6, 5) else 512
            else:
                max_num_batched_tokens = max(max_model_len or 0, 2048)
        self.max_num_batched_tokens = max_num_batched_tokens
        self.chunked_prefill_enabled = enable_chunked_prefill
        short = max_model_len is not None and max_num_batched_tokens < max_model_len
        if v0 and short and not enable_chunked_prefill:
            raise ValueError(
                f"max_num_batched_tokens ({max_num_batched_tokens}) is "
                f"smaller than max_model_len ({max_model_len}). "
                "This effectively limits the maximum sequence length to "
                "max_num_batched_tokens and makes vLLM reject longer "
                "sequences. Please increase max_num_batched_tokens or "
                "decrease max_model_len."
            )
        if enable_chunked_prefill and max_model_len is not None:
            _fake.log(
                "config.py",
                1459,
                "Chunked prefill is enabled with max_num_batched_tokens="
                f"{self.max_num_batched_tokens}.",
            )


class EngineConfig:
    """The configs together (``EngineConfig`` in v0.6.0, ``VllmConfig`` in V1)."""

    def __init__(
        self,
        model_config: ModelConfig,
        cache_config: CacheConfig,
        parallel_config: ParallelConfig,
        scheduler_config: SchedulerConfig | None = None,
    ) -> None:
        self.model_config = model_config
        self.cache_config = cache_config
        self.parallel_config = parallel_config
        self.scheduler_config = scheduler_config or SchedulerConfig(None)


VllmConfig = EngineConfig
