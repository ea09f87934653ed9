"""V1's engine core: profiles, then checks that the KV cache holds one full request.

As vllm/v1/engine/core.py@v0.9.1 (``EngineCore._initialize_kv_caches``), through
``get_kv_cache_config`` (vllm/v1/core/kv_cache_utils.py:924), which calls
``check_enough_kv_cache_memory`` first (kv_cache_utils.py:940). In process, as vLLM runs with
``VLLM_ENABLE_V1_MULTIPROCESSING=0``, so the error reaches the caller itself.
"""

from __future__ import annotations

from vllm.config import VllmConfig
from vllm.v1.core.kv_cache_utils import get_kv_cache_config
from vllm.v1.worker.gpu_worker import Worker


class EngineCore:
    def __init__(self, vllm_config: VllmConfig) -> None:
        self.vllm_config = vllm_config
        self.worker = Worker(vllm_config)
        self.worker.init_device()
        self._initialize_kv_caches(vllm_config)

    def _initialize_kv_caches(self, vllm_config: VllmConfig) -> None:
        kv_cache_spec = self.worker.get_kv_cache_spec()
        available_gpu_memory = self.worker.determine_available_memory()
        get_kv_cache_config(vllm_config, kv_cache_spec, available_gpu_memory)
