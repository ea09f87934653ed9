"""ChatTTS 0.2.5's vendored engine on CPU torch, up to and including its KV-cache check.

Run in the user's process before their code (the tests put it in a ``sitecustomize``). It
changes nothing in site-packages; it

* registers :mod:`vllm_c` as ``vllm._C`` (vLLM 0.2.7's compiled kernels);
* registers the packages ``ChatTTS`` and ``ChatTTS.model`` as empty modules whose ``__path__``
  is the installed folder, so ``ChatTTS.model.gpt`` and ``ChatTTS/model/velocity/`` import
  without ``ChatTTS/__init__.py`` and ``ChatTTS/model/__init__.py`` (which import the audio
  stack: the DVAE, vocos, vector_quantize_pytorch, torchaudio);
* gives the engine the GPU that ``FAKE_GPU_TOTAL_BYTES`` and ``FAKE_PEAK_BYTES`` describe.

The GPU, in the fewest places: ``Worker.profile_num_available_blocks``
(ChatTTS/model/velocity/worker.py:91-123) runs as it is, with only its measurements replaced:
the forward pass (``ModelRunner.profile_run``) does nothing, ``torch.cuda.synchronize`` waits
for nothing and ``torch.cuda.mem_get_info`` reports the injected total, of which the peak is
in use. So the block count is the engine's own ``(total x utilization - peak) //
CacheEngine.get_cache_block_size(...)``, clamped at zero, and ``LLMEngine._init_cache``
(llm_engine.py:262-305) raises its own message. The worker's other steps that need a GPU are
skipped: ``init_model`` (a CUDA device, NCCL), ``load_model`` (weights on the GPU),
``init_cache_engine`` (the cache's tensors) and ``warm_up_model`` (CUDA graphs).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import types
from pathlib import Path


def _register_vllm_c() -> None:
    here = Path(__file__).with_name("vllm_c.py")
    spec = importlib.util.spec_from_file_location("vllm._C", here)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {here}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules["vllm._C"] = module


def _register_chattts() -> None:
    spec = importlib.util.find_spec("ChatTTS")  # finds the folder; runs no __init__
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("ChatTTS is not installed")
    root = Path(next(iter(spec.submodule_search_locations)))
    for name, folder in (("ChatTTS", root), ("ChatTTS.model", root / "model")):
        package = types.ModuleType(name)
        package.__path__ = [str(folder)]
        package.__file__ = str(folder / "__init__.py")
        sys.modules[name] = package
    sys.modules["ChatTTS"].model = sys.modules["ChatTTS.model"]  # type: ignore[attr-defined]


def _pretend_gpu() -> None:
    import torch
    from ChatTTS.model.velocity.model_runner import ModelRunner
    from ChatTTS.model.velocity.worker import Worker

    total = int(os.environ["FAKE_GPU_TOTAL_BYTES"])
    peak = int(os.environ["FAKE_PEAK_BYTES"])

    def mem_get_info(device: object = None) -> tuple[int, int]:
        del device
        return total - peak, total

    def nothing(*args: object, **kwargs: object) -> None:
        del args, kwargs

    torch.cuda.mem_get_info = mem_get_info
    torch.cuda.synchronize = nothing
    ModelRunner.profile_run = nothing
    for step in ("init_model", "load_model", "init_cache_engine", "warm_up_model"):
        setattr(Worker, step, nothing)


def install() -> None:
    """Everything above, once, before the user's code imports ChatTTS."""
    _register_vllm_c()
    _register_chattts()
    _pretend_gpu()
