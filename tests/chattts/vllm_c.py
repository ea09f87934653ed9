"""A stand-in for ``vllm._C``, vLLM 0.2.7's compiled CUDA kernels, which CPU torch cannot load.

vLLM imports three of its names at module level: ``ops`` (vllm/model_executor/layers/
activation.py:9, attention.py:10, layernorm.py:7, rotary_embedding.py:30 and the quantization
layers), ``cache_ops`` (vllm/worker/cache_engine.py:6, attention.py:11) and ``cuda_utils``
(vllm/utils.py:11), all at v0.2.7. The engine's start-up path up to the KV-cache check calls
none of them; a kernel that is called anyway says so instead of returning something wrong.
"""

from __future__ import annotations

from typing import Any, NoReturn


class _Kernels:
    """One compiled extension: every attribute is a kernel that cannot run here."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, kernel: str) -> Any:
        def unavailable(*args: object, **kwargs: object) -> NoReturn:
            del args, kwargs
            raise RuntimeError(f"vllm._C.{self._name}.{kernel} is a CUDA kernel: not on CPU torch")

        return unavailable


ops = _Kernels("ops")
cache_ops = _Kernels("cache_ops")
cuda_utils = _Kernels("cuda_utils")
