"""``LLMEngine``: builds the engine and sizes its KV cache (vllm/engine/llm_engine.py@v0.6.0).

``from_engine_args`` (llm_engine.py:527) creates the configs and the engine; the engine's
``_initialize_kv_caches`` (llm_engine.py:441) asks the worker how many blocks fit and hands them
to ``initialize_cache``, which raises when they are too few. With ``VLLM_USE_V1=1`` the V1
engine core sizes the cache instead (:mod:`vllm.v1.engine.core`).
"""

from __future__ import annotations

from vllm import _fake
from vllm.config import (
    CacheConfig,
    EngineConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from vllm.engine.arg_utils import EngineArgs
from vllm.usage.usage_lib import UsageContext
from vllm.worker.worker import Worker


class LLMEngine:
    def __init__(
        self,
        model_config: ModelConfig,
        cache_config: CacheConfig,
        parallel_config: ParallelConfig,
        usage_context: UsageContext = UsageContext.ENGINE_CONTEXT,
        scheduler_config: SchedulerConfig | None = None,
    ) -> None:
        self.model_config = model_config
        self.cache_config = cache_config
        self.parallel_config = parallel_config
        self.usage_context = usage_context
        if _fake.use_v1():
            from vllm.v1.engine.core import EngineCore

            config = EngineConfig(model_config, cache_config, parallel_config, scheduler_config)
            self.engine_core = EngineCore(config)
        else:
            self.driver_worker = Worker(
                model_config, cache_config, parallel_config, scheduler_config
            )
            self._initialize_kv_caches()
        _fake.started(f"max_model_len={model_config.max_model_len}")

    def _initialize_kv_caches(self) -> None:
        num_gpu_blocks, num_cpu_blocks = self.driver_worker.determine_num_available_blocks()
        self.cache_config.num_gpu_blocks = num_gpu_blocks
        self.driver_worker.initialize_cache(num_gpu_blocks, num_cpu_blocks)

    @classmethod
    def from_engine_args(
        cls,
        engine_args: EngineArgs,
        usage_context: UsageContext = UsageContext.ENGINE_CONTEXT,
    ) -> LLMEngine:
        engine_config = engine_args.create_engine_config()
        return cls(
            engine_config.model_config,
            engine_config.cache_config,
            engine_config.parallel_config,
            usage_context=usage_context,
            scheduler_config=engine_config.scheduler_config,
        )
