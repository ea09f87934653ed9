"""V1's check that one request of ``max_model_len`` tokens fits the KV cache.

``check_enough_kv_cache_memory`` in vllm/v1/core/kv_cache_utils.py, in the wording of each
release (``FAKE_VLLM_VERSION``):

* 0.7.3 (kv_cache_utils.py:438): sizes in GiB printed as "GB";
* 0.8.3 (kv_cache_utils.py:463): "GiB", no estimate;
* 0.8.4 to 0.9.0 (kv_cache_utils.py:510@v0.8.4): an estimate was meant, but the f-string
  holding it stands alone, so the message says "Based on the available memory," and stops;
* 0.9.1 on (kv_cache_utils.py:538@v0.9.1): "... the estimated maximum model length is N."
* 0.13.0 on: a link to the docs at the end (kv_cache_utils.py:688-691@v0.13.0);
* 0.20.0 on: sizes as ``round(x, 2)`` GiB (``format_gib``, vllm/utils/mem_utils.py:27-28@v0.20.0);
* 0.22.0 on: "the model's" and "(which also controls CPU memory on the CPU backend)"
  (kv_cache_utils.py:697-724@v0.22.0).

The needed bytes are the sum over layers of each spec's ``max_memory_usage_bytes``
(kv_cache_utils.py:484-490@v0.9.1), so a sliding-window layer counts its window only.

``estimate_max_model_len`` is the binary search of kv_cache_utils.py:493@v0.9.1; like vLLM's it
leaves ``model_config.max_model_len`` at the last length it tried.
"""

from __future__ import annotations

from vllm import _fake
from vllm._fake import GiB_bytes
from vllm.config import VllmConfig
from vllm.v1.kv_cache_interface import FullAttentionSpec  # and its subclasses


def max_memory_usage_bytes(vllm_config: VllmConfig, specs: list[FullAttentionSpec]) -> int:
    return sum(spec.max_memory_usage_bytes(vllm_config) for spec in specs)


def estimate_max_model_len(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, FullAttentionSpec], available_memory: int
) -> int:
    def fits_in_memory(model_len: int) -> bool:
        vllm_config.model_config.max_model_len = model_len
        needed = max_memory_usage_bytes(vllm_config, list(kv_cache_spec.values()))
        return needed <= available_memory

    current_max = vllm_config.model_config.max_model_len
    left, right = 1, current_max
    if not fits_in_memory(left):
        return 0
    result = 1
    while left <= right:
        mid = (left + right) // 2
        if fits_in_memory(mid):
            result = mid
            left = mid + 1
        else:
            right = mid - 1
    return result


def check_enough_kv_cache_memory(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, FullAttentionSpec], available_memory: int
) -> None:
    if available_memory <= 0:
        raise ValueError(
            "No available memory for the cache blocks. "
            "Try increasing `gpu_memory_utilization` when "
            "initializing the engine."
        )
    max_model_len = vllm_config.model_config.max_model_len
    needed_memory = max_memory_usage_bytes(vllm_config, list(kv_cache_spec.values()))
    if needed_memory <= available_memory:
        return
    release = _fake.release()
    if release < (0, 8, 3):
        raise ValueError(
            f"To serve at least one request with the models's max seq len "
            f"({max_model_len}), ({needed_memory / 1024 / 1024 / 1024:.2f} GB KV "
            f"cache is needed, which is larger than the available KV cache "
            f"memory ({available_memory / 1024 / 1024 / 1024:.2f} GB). Try "
            f"increasing `gpu_memory_utilization` or decreasing "
            f"`max_model_len` when initializing the engine."
        )
    if release < (0, 8, 4):
        raise ValueError(
            f"To serve at least one request with the models's max seq len "
            f"({max_model_len}), ({needed_memory / 1024 / 1024 / 1024:.2f} GiB KV "
            f"cache is needed, which is larger than the available KV cache "
            f"memory ({available_memory / 1024 / 1024 / 1024:.2f} GiB). Try "
            f"increasing `gpu_memory_utilization` or decreasing "
            f"`max_model_len` when initializing the engine."
        )
    estimated_max_len = estimate_max_model_len(vllm_config, kv_cache_spec, available_memory)
    estimated_msg = ""
    if release < (0, 9, 1):
        if estimated_max_len > 0:
            estimated_msg = " Based on the available memory,"
        raise ValueError(
            f"To serve at least one request with the models's max seq len "
            f"({max_model_len}), ({needed_memory / GiB_bytes:.2f} GiB KV "
            f"cache is needed, which is larger than the available KV cache "
            f"memory ({available_memory / GiB_bytes:.2f} GiB)."
            f"{estimated_msg} "
            f" Try increasing `gpu_memory_utilization` or decreasing "
            f"`max_model_len` when initializing the engine."
        )
    if estimated_max_len > 0:
        estimated_msg = (
            "Based on the available memory, "
            f"the estimated maximum model length is {estimated_max_len}."
        )
    if release >= (0, 13, 0):
        needed = f"{needed_memory / GiB_bytes:.2f}"
        available = f"{available_memory / GiB_bytes:.2f}"
        if release >= (0, 20, 0):
            needed = str(round(needed_memory / GiB_bytes, 2))
            available = str(round(available_memory / GiB_bytes, 2))
        model_s, cpu = "models's", ""
        if release >= (0, 22, 0):
            model_s, cpu = "model's", " (which also controls CPU memory on the CPU backend)"
        raise ValueError(
            f"To serve at least one request with the {model_s} max seq len "
            f"({max_model_len}), ({needed} GiB KV "
            f"cache is needed, which is larger than the available KV cache "
            f"memory ({available} GiB). "
            f"{estimated_msg} "
            f"Try increasing `gpu_memory_utilization`{cpu} or decreasing "
            f"`max_model_len` when initializing the engine. "
            f"See https://docs.vllm.ai/en/latest/configuration/conserving_memory/ "
            f"for more details."
        )
    raise ValueError(
        f"To serve at least one request with the models's max seq len "
        f"({max_model_len}), ({needed_memory / GiB_bytes:.2f} GiB KV "
        f"cache is needed, which is larger than the available KV cache "
        f"memory ({available_memory / GiB_bytes:.2f} GiB). "
        f"{estimated_msg} "
        f"Try increasing `gpu_memory_utilization` or decreasing "
        f"`max_model_len` when initializing the engine."
    )


def get_kv_cache_config(
    vllm_config: VllmConfig, kv_cache_spec: dict[str, FullAttentionSpec], available_memory: int
) -> None:
    """kv_cache_utils.py:924@v0.9.1; the stand-in only checks (kv_cache_utils.py:940)."""
    check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)
