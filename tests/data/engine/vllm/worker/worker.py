"""The V0 GPU worker: how many KV-cache blocks fit, and the check that raises.

``determine_num_available_blocks`` is vllm/worker/worker.py:204@v0.6.0: after the profiling
run, ``num_gpu_blocks = int((total_gpu_memory * gpu_memory_utilization - peak_memory) //
cache_block_size)`` (worker.py:238), then ``max(num_gpu_blocks, 0)`` (worker.py:243), so a
profile that leaves nothing gives zero blocks, never a negative count. The GPU's total and the
profiled peak come from :mod:`vllm._fake`. ``raise_if_cache_size_invalid`` is worker.py:468,
its two messages word for word. The profiling run is one batch of the scheduler's
``max_num_batched_tokens`` tokens (model_runner.py:1231-1236@v0.6.6), so its peak depends on it
(:func:`vllm._fake.peak_memory`). From 0.6.5 the worker logs the profile's figures
(worker.py:225-240@v0.6.6), and the model runner what the weights took
(model_runner.py:1099@v0.6.6, :1203@v0.9.1), as :func:`vllm._fake.log` prints them. The
worker's ``model_runner`` has loaded the weights first and kept what that took in ``model_memory_usage`` (vllm/worker/model_runner.py:1098@v0.6.6),
also from :mod:`vllm._fake`.
"""

from __future__ import annotations

from vllm import _fake
from vllm.config import CacheConfig, ModelConfig, ParallelConfig, SchedulerConfig
from vllm.worker.cache_engine import CacheEngine


class ModelRunner:
    def __init__(self) -> None:
        self.model_memory_usage = 0

    def load_model(self) -> None:
        self.model_memory_usage = _fake.weights_memory()
        if _fake.release() >= (0, 8, 5):
            _fake.log(
                "model_runner.py",
                1203,
                f"Model loading took {self.model_memory_usage / _fake.GiB_bytes:.4f} GiB and "
                "3.141593 seconds",
            )
        else:
            _fake.log(
                "model_runner.py",
                1099,
                f"Loading model weights took {self.model_memory_usage / float(2**30):.4f} GB",
            )


class Worker:
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
        self.model_runner = ModelRunner()
        self.model_runner.load_model()

    def get_cache_block_size_bytes(self) -> int:
        return CacheEngine.get_cache_block_size(
            self.cache_config, self.model_config, self.parallel_config
        )

    def determine_num_available_blocks(self) -> tuple[int, int]:
        total_gpu_memory = _fake.total_gpu_memory()
        # The profiling run: one batch of max_num_batched_tokens tokens (model_runner.py:1231).
        peak_memory = _fake.peak_memory(self.scheduler_config.max_num_batched_tokens)
        cache_block_size = self.get_cache_block_size_bytes()
        num_gpu_blocks = int(
            (total_gpu_memory * self.cache_config.gpu_memory_utilization - peak_memory)
            // cache_block_size
        )
        if _fake.release() >= (0, 6, 5):
            self._log_profile(total_gpu_memory, peak_memory)
        num_cpu_blocks = int(self.cache_config.swap_space_bytes // cache_block_size)
        num_gpu_blocks = max(num_gpu_blocks, 0)
        num_cpu_blocks = max(num_cpu_blocks, 0)
        return num_gpu_blocks, num_cpu_blocks

    def _log_profile(self, total_gpu_memory: int, peak_memory: int) -> None:
        """The profile's figures as worker.py:225-240@v0.6.6 logs them (0.6.5 on)."""
        gib = _fake.GiB_bytes
        util = self.cache_config.gpu_memory_utilization
        memory_for_current_instance = total_gpu_memory * util
        weights = self.model_runner.model_memory_usage
        non_torch = _fake.non_torch_memory()
        activation = peak_memory - weights - non_torch
        available_kv_cache_memory = memory_for_current_instance - peak_memory
        _fake.log(
            "worker.py",
            241,
            "Memory profiling takes 1.27 seconds\n"
            "the current vLLM instance can use total_gpu_memory "
            f"({(total_gpu_memory / gib):.2f}GiB) x gpu_memory_utilization ({util:.2f})"
            f" = {(memory_for_current_instance / gib):.2f}GiB\n"
            f"model weights take {(weights / gib):.2f}GiB;"
            f" non_torch_memory takes {(non_torch / gib):.2f}GiB;"
            f" PyTorch activation peak memory takes {(activation / gib):.2f}GiB;"
            " the rest of the memory reserved for KV Cache is "
            f"{(available_kv_cache_memory / gib):.2f}GiB.",
        )

    def initialize_cache(self, num_gpu_blocks: int, num_cpu_blocks: int) -> None:
        del num_cpu_blocks
        raise_if_cache_size_invalid(
            num_gpu_blocks, self.cache_config.block_size, self.model_config.max_model_len
        )


def raise_if_cache_size_invalid(num_gpu_blocks: int, block_size: int, max_model_len: int) -> None:
    if num_gpu_blocks <= 0:
        raise ValueError(
            "No available memory for the cache blocks. "
            "Try increasing `gpu_memory_utilization` when "
            "initializing the engine."
        )
    max_seq_len = block_size * num_gpu_blocks
    if max_model_len > max_seq_len:
        raise ValueError(
            f"The model's max seq len ({max_model_len}) "
            "is larger than the maximum number of tokens that can be "
            f"stored in KV cache ({max_seq_len}). Try increasing "
            "`gpu_memory_utilization` or decreasing `max_model_len` when "
            "initializing the engine."
        )
