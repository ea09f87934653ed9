"""V1's GPU worker: the memory it may use, and what is left for the KV cache.

vllm/v1/worker/gpu_worker.py@v0.9.1: at start, ``requested_memory = total x
gpu_memory_utilization`` and a GPU with less free memory than that is refused
(gpu_worker.py:136-147); after profiling (one batch of ``max_num_batched_tokens`` tokens),
``available_kv_cache_memory = requested_memory - non_kv_cache_memory`` (gpu_worker.py:218),
returned as an int; the profile's figures are logged at DEBUG level (gpu_worker.py:226). ``kv_cache_spec`` is one spec
per attention layer of this pipeline stage, as the model runner's ``get_kv_cache_spec`` gives
them (vllm/v1/worker/gpu_model_runner.py@v0.9.1; the cache dtype is the model's under "auto"):
a ``SlidingWindowSpec`` where the layer has a window, an ``MLAAttentionSpec`` for DeepSeek's
latent, else a ``FullAttentionSpec``. Which layers slide: Gemma 3's all but every
``sliding_window_pattern``-th (vllm/model_executor/models/gemma3.py:150@v0.9.0:
``is_sliding = (layer_idx + 1) % config.sliding_window_pattern != 0``).
"""

from __future__ import annotations

from vllm import _fake
from vllm._fake import GiB_bytes
from vllm.config import VllmConfig
from vllm.v1.kv_cache_interface import FullAttentionSpec, MLAAttentionSpec, SlidingWindowSpec


class Worker:
    def __init__(self, vllm_config: VllmConfig) -> None:
        self.vllm_config = vllm_config
        self.cache_config = vllm_config.cache_config
        self.model_config = vllm_config.model_config

    def init_device(self) -> None:
        total_memory = _fake.total_gpu_memory()
        free_memory = _fake.free_gpu_memory()
        self.requested_memory = total_memory * self.cache_config.gpu_memory_utilization
        if free_memory < self.requested_memory:

            def gib(b: float) -> float:
                return round(b / GiB_bytes, 2)

            raise ValueError(
                f"Free memory on device "
                f"({gib(free_memory)}/"
                f"{gib(total_memory)} GiB) on startup "
                f"is less than desired GPU memory utilization "
                f"({self.cache_config.gpu_memory_utilization}, "
                f"{gib(self.requested_memory)} GiB). Decrease GPU memory "
                f"utilization or reduce GPU memory used by other processes."
            )

    def determine_available_memory(self) -> int:
        # The profiling run: _dummy_run(max_num_batched_tokens) (gpu_model_runner.py:2012).
        tokens = self.vllm_config.scheduler_config.max_num_batched_tokens
        non_kv_cache_memory = _fake.peak_memory(tokens)
        available_kv_cache_memory = self.requested_memory - non_kv_cache_memory
        if _fake.release() >= (0, 9, 1):
            # MemoryProfilingResult.__repr__ (vllm/utils.py:2330-2338@v0.9.1), logged at DEBUG
            # (gpu_worker.py:226@v0.9.1).
            weights = _fake.weights_memory()
            non_torch = _fake.non_torch_memory()
            _fake.log(
                "gpu_worker.py",
                226,
                "Memory profiling takes 1.27 seconds. Total non KV cache memory: "
                f"{(non_kv_cache_memory / GiB_bytes):.2f}GiB; torch peak memory increase: "
                f"{((non_kv_cache_memory - weights - non_torch) / GiB_bytes):.2f}GiB; "
                f"non-torch forward increase memory: {(non_torch / GiB_bytes):.2f}GiB; "
                f"weights memory: {(weights / GiB_bytes):.2f}GiB.",
                level="DEBUG",
            )
        if _fake.release() >= (0, 9, 1):
            # gpu_worker.py:227@v0.9.1 (not in 0.8.5).
            _fake.log(
                "gpu_worker.py",
                227,
                f"Available KV cache memory: {available_kv_cache_memory / GiB_bytes:.2f} GiB",
            )
        return int(available_kv_cache_memory)

    def get_kv_cache_spec(self) -> dict[str, FullAttentionSpec]:
        model_config = self.model_config
        parallel_config = self.vllm_config.parallel_config
        dtype = self.cache_config.cache_dtype
        if dtype == "auto":
            dtype = model_config.dtype
        common = {
            "block_size": self.cache_config.block_size,
            "num_kv_heads": model_config.get_num_kv_heads(parallel_config),
            "head_size": model_config.get_head_size(),
            "dtype": dtype,
        }
        hf = model_config.hf_text_config
        pattern = getattr(hf, "sliding_window_pattern", None)
        window = getattr(hf, "sliding_window", None)
        specs: dict[str, FullAttentionSpec] = {}
        start, end = model_config.get_layers_start_end_indices(parallel_config)
        for i in range(start, end):
            name = f"model.layers.{i}.self_attn.attn"
            if model_config.use_mla:
                specs[name] = MLAAttentionSpec(
                    **common, cache_dtype_str=self.cache_config.cache_dtype
                )
            elif window and pattern and (i + 1) % pattern != 0:
                specs[name] = SlidingWindowSpec(**common, sliding_window=window)
            else:
                specs[name] = FullAttentionSpec(**common)
        return specs
