"""What a real run measures, injected: the GPU's size and the memory the model took.

* ``FAKE_GPU_TOTAL_BYTES``: the GPU's total memory (``torch.cuda.mem_get_info()[1]``);
* ``FAKE_GPU_FREE_BYTES``: free memory when the engine starts (default: all of it);
* ``FAKE_PEAK_BYTES``: what the profiling run found in use besides the KV cache: V0's
  ``peak_memory`` (weights and activations), V1's ``non_kv_cache_memory``;
* ``FAKE_WEIGHTS_BYTES``: what loading the weights took (V0's
  ``model_runner.model_memory_usage``); by default the whole peak, a profile whose activations
  take nothing worth counting;
* ``FAKE_NON_TORCH_BYTES``: of the peak, what is outside torch's allocator (default 0); the
  rest of the peak past the weights is the activations.
* ``FAKE_ACTIVATION_BYTES_PER_TOKEN``: when set, the profile's activations are this much for
  each token of its batch, and the peak is the weights, the non-torch memory and those
  activations (``FAKE_PEAK_BYTES`` is then not read): vLLM's profiling run is one batch of
  ``max_num_batched_tokens`` tokens (V0: vllm/worker/model_runner.py:1231-1236@v0.6.6; V1:
  ``_dummy_run(self.max_num_tokens)``, vllm/v1/worker/gpu_model_runner.py:2012@v0.9.1).

Also the log lines, as vLLM's logger prints them to stdout (:func:`log`).

Also the stand-in's small helpers that real vLLM gets from torch (dtype sizes).
"""

from __future__ import annotations

import os

GiB_bytes = 1 << 30

#: Bytes per element, as ``torch.tensor([], dtype=d).element_size()`` gives them.
DTYPE_SIZE = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "fp8": 1,
    "fp8_e4m3": 1,
    "fp8_e5m2": 1,
    # DeepSeek's sparse-MLA cache (vllm/v1/kv_cache_interface.py:331-338@v0.20.0): bytes, sized
    # per token by the spec itself.
    "fp8_ds_mla": 1,
}


def _bytes(name: str, default: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise RuntimeError(f"the stand-in engine needs {name} in the environment")
        return default
    return int(value)


def total_gpu_memory() -> int:
    return _bytes("FAKE_GPU_TOTAL_BYTES")


def free_gpu_memory() -> int:
    return _bytes("FAKE_GPU_FREE_BYTES", total_gpu_memory())


def peak_memory(batched_tokens: int | None = None) -> int:
    """What the profiling run of ``batched_tokens`` tokens found in use besides the cache."""
    per_token = os.environ.get("FAKE_ACTIVATION_BYTES_PER_TOKEN")
    if per_token is None or batched_tokens is None:
        return _bytes("FAKE_PEAK_BYTES")
    return weights_memory() + non_torch_memory() + activation_memory(batched_tokens)


def activation_memory(batched_tokens: int) -> int:
    """The profile's activation peak for a batch of ``batched_tokens`` tokens."""
    return _bytes("FAKE_ACTIVATION_BYTES_PER_TOKEN") * batched_tokens


def weights_memory() -> int:
    if os.environ.get("FAKE_ACTIVATION_BYTES_PER_TOKEN") is not None:
        return _bytes("FAKE_WEIGHTS_BYTES")
    return _bytes("FAKE_WEIGHTS_BYTES", peak_memory())


def non_torch_memory() -> int:
    return _bytes("FAKE_NON_TORCH_BYTES", 0)


def log(file: str, line: int, message: str, level: str = "INFO") -> None:
    """A line as vLLM's logger prints it: ``INFO 12-02 10:00:00 [worker.py:241] ...``.

    A DEBUG line only with ``VLLM_LOGGING_LEVEL=DEBUG``, as vLLM's logger (vllm/logger.py:36
    @v0.6.6: the handler's level is ``VLLM_LOGGING_LEVEL``, INFO by default).

    The format is vllm/logger.py:20-22@v0.6.6 (no brackets) and :24-26@v0.9.1 (brackets); each
    newline of a message is followed by the line's prefix again, after a carriage return
    (``NewLineFormatter``, vllm/logging_utils/formatter.py@v0.6.6).
    """
    if level == "DEBUG" and os.environ.get("VLLM_LOGGING_LEVEL", "INFO") != "DEBUG":
        return
    where = f"[{file}:{line}]" if release() >= (0, 9, 0) else f"{file}:{line}]"
    prefix = f"{level} 12-02 10:00:00 {where} "
    print(prefix + message.replace("\n", "\r\n" + prefix), flush=True)


def version() -> str:
    return os.environ.get("FAKE_VLLM_VERSION", "0.9.1" if use_v1() else "0.6.0")


def release() -> tuple[int, ...]:
    return tuple(int(p) for p in version().split(".")[:3])


def default_gpu_memory_utilization() -> float:
    """0.9 until 0.19.1, 0.92 from 0.20.0 (vllm/config/cache.py:66@v0.20.0)."""
    return 0.92 if release() >= (0, 20, 0) else 0.9


def use_v1() -> bool:
    return os.environ.get("VLLM_USE_V1", "0") == "1"


def started(what: str) -> None:
    print(f"engine started ({what})", flush=True)
