"""vLLM's own account of its memory at start, read from its log lines in a pasted text.

"No available memory for the cache blocks" carries no figure, but the lines vLLM logs just
before it do, in each wording its releases printed (read at the releases named):

* the V0 worker, 0.6.5 on (vllm/worker/worker.py:225-240@v0.6.6, :278-293@v0.9.1): ``the
  current vLLM instance can use total_gpu_memory (79.15GiB) x gpu_memory_utilization (0.90) =
  71.24GiB`` and ``model weights take 8.63GiB; non_torch_memory takes 0.09GiB; PyTorch
  activation peak memory takes 1.16GiB; the rest of the memory reserved for KV Cache is
  45.21GiB.``, the last figure ``total x utilization - (weights + non-torch + activations)``;
* the V0 worker of 0.6.4 (worker.py:232-243@v0.6.4): ``Memory profiling results:
  total_gpu_memory=...GiB ... kv_cache_size=...GiB gpu_memory_utilization=0.90``;
* the V1 worker, 0.9.1 on (vllm/v1/worker/gpu_worker.py:227@v0.9.1, :298@v0.11.0; not in
  0.8.5): ``Available KV cache memory: 45.21 GiB``, ``requested memory - non-KV memory``;
* the weights alone: ``Loading model weights took 14.9888 GB`` (vllm/worker/model_runner.py:
  1099@v0.6.6, GiB labelled GB) and ``Model loading took 14.9888 GiB and 3.2 seconds``
  (model_runner.py:1203@v0.9.1, v1/worker/gpu_model_runner.py:2653@v0.11.0).

Each release logs every line through a formatter that repeats the line's prefix after each
newline (vllm/logging_utils/formatter.py@v0.6.6), so the figures are found wherever the prefix
stands. The left-over is negative when the profile took more than the utilization allows;
vLLM then finds zero blocks.
"""

from __future__ import annotations

import attrs
import regex

__all__ = ["Profile", "read_profile"]

_NUM = r"-?\d+(?:\.\d+)?"
#: The V0 worker, 0.6.5 on: the instance's share of the GPU, and where it went.
_V0_SHARE = regex.compile(
    rf"total_gpu_memory \((?P<total>{_NUM})GiB\) x gpu_memory_utilization \((?P<util>{_NUM})\)"
)
_V0_SPLIT = regex.compile(
    rf"model weights take (?P<weights>{_NUM})GiB;\s*non_torch_memory takes "
    rf"(?P<non_torch>{_NUM})GiB;\s*PyTorch activation peak memory takes "
    rf"(?P<activation>{_NUM})GiB;\s*the rest of the memory reserved for KV Cache is "
    rf"(?P<cache>{_NUM})GiB"
)
#: The V0 worker of 0.6.4.
_V0_RESULTS = regex.compile(
    rf"Memory profiling results: total_gpu_memory=(?P<total>{_NUM})GiB\b.*?"
    rf"non_torch_memory=(?P<non_torch>{_NUM})GiB kv_cache_size=(?P<cache>{_NUM})GiB "
    rf"gpu_memory_utilization=(?P<util>{_NUM})"
)
#: The V1 worker, 0.9.1 on.
_V1_AVAILABLE = regex.compile(rf"Available KV cache memory: (?P<cache>{_NUM}) GiB")
#: What loading the weights took.
_WEIGHTS = regex.compile(
    rf"(?:Loading model weights took (?P<weights>{_NUM}) GB\b"
    rf"|Model loading took (?P<weights>{_NUM}) GiB)"
)


@attrs.frozen(kw_only=True)
class Profile:
    """What vLLM's log lines say of one start, sizes in GiB as printed (two decimals).

    Attributes:
        engine: ``vllm-v0`` or ``vllm-v1``, the worker that printed the lines; None when only
            the weights line was found (both print it).
        line: which wording, and where vLLM prints it, for the facts.
        cache: what was left for the KV cache at the run's utilization (negative when the
            profile took more than the utilization allows).
        total: the GPU's total memory, where the line prints it.
        utilization: the run's ``gpu_memory_utilization``, where the line prints it.
        weights: what loading the weights took.
        non_torch: memory outside torch's allocator (NCCL, CUDA graphs' pools, buffers).
        activation: the profile run's peak of activations.
    """

    engine: str | None = None
    line: str = ""
    cache: float | None = None
    total: float | None = None
    utilization: float | None = None
    weights: float | None = None
    non_torch: float | None = None
    activation: float | None = None


def _last(pattern: regex.Pattern[str], text: str) -> regex.Match[str] | None:
    found = list(pattern.finditer(text))
    return found[-1] if found else None


def _least(pattern: regex.Pattern[str], text: str) -> regex.Match[str] | None:
    """The match whose ``cache`` is least: vLLM sizes the cache by its poorest worker."""
    return min(pattern.finditer(text), key=lambda m: float(m.group("cache")), default=None)


def read_profile(text: str | None) -> Profile | None:
    r"""The memory figures vLLM logged in ``text``, or None when it has none of its lines.

    A text of several workers (tensor parallelism) gives the least left-over any of them had,
    which is what vLLM sizes every worker's cache by.

    >>> p = read_profile("INFO worker.py:241] the current vLLM instance can use total_gpu_memory "
    ...     "(80.00GiB) x gpu_memory_utilization (0.90) = 72.00GiB\r\nINFO worker.py:241] "
    ...     "model weights take 60.00GiB; non_torch_memory takes 1.30GiB; PyTorch activation "
    ...     "peak memory takes 11.00GiB; the rest of the memory reserved for KV Cache is -0.30GiB.")
    >>> (p.engine, p.cache, p.total, p.utilization)
    ('vllm-v0', -0.3, 80.0, 0.9)
    """
    if not text:
        return None
    weights_m = _last(_WEIGHTS, text)
    weights = float(weights_m.group("weights")) if weights_m else None
    split = _least(_V0_SPLIT, text)
    if split is not None:
        share = _last(_V0_SHARE, text)
        return Profile(
            engine="vllm-v0",
            line="vLLM's V0 worker, 0.6.5 on: 'the rest of the memory reserved for KV Cache is "
            f"{split.group('cache')}GiB' (vllm/worker/worker.py:225-240@v0.6.6)",
            cache=float(split.group("cache")),
            total=float(share.group("total")) if share else None,
            utilization=float(share.group("util")) if share else None,
            weights=float(split.group("weights")),
            non_torch=float(split.group("non_torch")),
            activation=float(split.group("activation")),
        )
    results = _least(_V0_RESULTS, text)
    if results is not None:
        return Profile(
            engine="vllm-v0",
            line=f"vLLM 0.6.4's V0 worker: 'kv_cache_size={results.group('cache')}GiB' "
            "(vllm/worker/worker.py:232-243@v0.6.4)",
            cache=float(results.group("cache")),
            total=float(results.group("total")),
            utilization=float(results.group("util")),
            weights=weights,
            non_torch=float(results.group("non_torch")),
        )
    available = _least(_V1_AVAILABLE, text)
    if available is not None:
        return Profile(
            engine="vllm-v1",
            line=f"vLLM's V1 worker, 0.9.1 on: 'Available KV cache memory: "
            f"{available.group('cache')} GiB' (vllm/v1/worker/gpu_worker.py:227@v0.9.1)",
            cache=float(available.group("cache")),
            weights=weights,
        )
    if weights is not None:
        return Profile(
            line="vLLM's weights line (vllm/worker/model_runner.py:1099@v0.6.6)", weights=weights
        )
    return None
