"""A stand-in for vLLM, for errkb's tests: imported as ``vllm``, it fails as vLLM fails.

It builds no model and touches no GPU. What it keeps of vLLM is the part that decides whether
the KV cache holds ``max_model_len``: the settings a user passes (``LLM(...)``, ``EngineArgs``,
``vllm serve`` flags), the model's shape read from the ``config.json`` in the model folder, the
block arithmetic and the messages, each written after vLLM's source at the version cited beside
it. What a real run would measure comes from the environment (see :mod:`vllm._fake`).

It imports nothing from errkb, so it cannot share errkb's mistakes. On success the engine prints
``engine started`` and does nothing more.

``VLLM_USE_V1=1`` runs the V1 engine's check; ``FAKE_VLLM_VERSION`` picks the wording of the
release it stands for (V0: 0.6.0; V1: 0.7.3, 0.8.3, 0.8.4, 0.9.1 (the default), 0.13.0, 0.20.0 or
0.22.0; from 0.20.0 the default `gpu_memory_utilization` is 0.92).
"""

from vllm.engine.arg_utils import AsyncEngineArgs, EngineArgs
from vllm.engine.async_llm_engine import AsyncLLMEngine
from vllm.engine.llm_engine import LLMEngine
from vllm.entrypoints.llm import LLM

__all__ = ["LLM", "AsyncEngineArgs", "AsyncLLMEngine", "EngineArgs", "LLMEngine"]
