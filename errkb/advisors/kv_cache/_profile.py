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

What the profiling run processed, and what it took for activations (:func:`read_batching`):

* the profile run is a batch of ``max_num_batched_tokens`` tokens: V0's model runner
  (vllm/worker/model_runner.py:601@v0.3.3, :683@v0.4.0, :1231-1236@v0.6.6), V1's
  ``_dummy_run(self.max_num_tokens)`` (vllm/v1/worker/gpu_model_runner.py:114,2012@v0.9.1);
* ``Chunked prefill is enabled with max_num_batched_tokens=2048.`` (vllm/config.py:816@v0.5.3,
  :1459@v0.6.6, :2196@v0.9.1; vllm/config/scheduler.py:206@v0.11.0; V1 always chunks);
* ``Chunked prefill is enabled by default for models with max_model_len > 32K.``: the V0
  releases that turn it on by themselves above 32768 tokens, 0.5.3 to 0.10.2
  (vllm/engine/arg_utils.py:747-769@v0.5.3, :1081-1108@v0.6.6, :1566-1595@v0.10.2; not in
  0.5.2; V0 is gone in 0.11.0), and ``The model has a long context length (131072).`` when
  chunked prefill stays off above 32768 (arg_utils.py:773@v0.5.3, :1114@v0.6.6, :1599@v0.10.2);
* the profile's activation peak: V0's ``PyTorch activation peak memory takes 1.16GiB`` (above,
  0.6.5 on) and V1's ``torch peak memory increase: 1.16GiB``, logged at DEBUG level only
  (``VLLM_LOGGING_LEVEL=DEBUG``; vllm/utils.py:2334@v0.9.1 through
  vllm/v1/worker/gpu_worker.py:226@v0.9.1, vllm/utils/__init__.py:2775@v0.11.0; not in 0.8.5).

Each release logs every line through a formatter that repeats the line's prefix after each
newline (vllm/logging_utils/formatter.py@v0.6.6), so the figures are found wherever the prefix
stands. The left-over is negative when the profile took more than the utilization allows;
vLLM then finds zero blocks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb._patterns import lazy_compile

if TYPE_CHECKING:
    import regex

__all__ = ["Batching", "Profile", "read_batching", "read_profile"]

_NUM = r"-?\d+(?:\.\d+)?"
#: The V0 worker, 0.6.5 on: the instance's share of the GPU, and where it went.
_V0_SHARE = lazy_compile(
    rf"total_gpu_memory \((?P<total>{_NUM})GiB\) x gpu_memory_utilization \((?P<util>{_NUM})\)"
)
_V0_SPLIT = lazy_compile(
    rf"model weights take (?P<weights>{_NUM})GiB;\s*non_torch_memory takes "
    rf"(?P<non_torch>{_NUM})GiB;\s*PyTorch activation peak memory takes "
    rf"(?P<activation>{_NUM})GiB;\s*the rest of the memory reserved for KV Cache is "
    rf"(?P<cache>{_NUM})GiB"
)
#: The V0 worker of 0.6.4.
_V0_RESULTS = lazy_compile(
    rf"Memory profiling results: total_gpu_memory=(?P<total>{_NUM})GiB\b.*?"
    rf"non_torch_memory=(?P<non_torch>{_NUM})GiB kv_cache_size=(?P<cache>{_NUM})GiB "
    rf"gpu_memory_utilization=(?P<util>{_NUM})"
)
#: The V1 worker, 0.9.1 on.
_V1_AVAILABLE = lazy_compile(rf"Available KV cache memory: (?P<cache>{_NUM}) GiB")
#: V1's profile at DEBUG level, 0.9.1 on: the activation peak.
_V1_ACTIVATION = lazy_compile(rf"torch peak memory increase: (?P<activation>{_NUM}) ?GiB")
#: The scheduler's line: what one step, and so the profiling run, batches.
_CHUNKED = lazy_compile(r"Chunked prefill is enabled with max_num_batched_tokens=(?P<tokens>\d+)")
#: V0 0.5.3 to 0.10.2, above 32768 tokens: chunked prefill turned on by vLLM itself.
_AUTO_CHUNKED = lazy_compile(
    r"Chunked prefill is enabled by default for models\s+with max_model_len > 32K"
)
#: The same releases, above 32768 tokens with chunked prefill off.
_UNCHUNKED_LONG = lazy_compile(r"The model has a long context length \(\d+\)")
#: What loading the weights took.
_WEIGHTS = lazy_compile(
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


@attrs.frozen(kw_only=True)
class Batching:
    """What vLLM's log lines say of its profiling run's batch.

    Attributes:
        activation: the profile's activation peak, GiB as printed; the least of several
            workers' figures.
        line: which wording gave the peak, and where vLLM prints it.
        tokens: ``max_num_batched_tokens`` as the scheduler's line gives it (chunked prefill
            on).
        auto: whether vLLM said it turned chunked prefill on by itself (above 32K).
        unchunked: whether vLLM warned of a long context with chunked prefill off.
    """

    activation: float | None = None
    line: str = ""
    tokens: int | None = None
    auto: bool = False
    unchunked: bool = False


def read_batching(text: str | None) -> Batching | None:
    r"""The profiling run's batch and activation peak in ``text``, or None when it has neither.

    >>> b = read_batching("INFO config.py:1459] Chunked prefill is enabled with "
    ...     "max_num_batched_tokens=2048.\nDEBUG Memory profiling takes 2.10 seconds. Total non KV "
    ...     "cache memory: 17.71GiB; torch peak memory increase: 1.45GiB; non-torch forward increase "
    ...     "memory: 0.06GiB; weights memory: 16.20GiB.")
    >>> (b.activation, b.tokens, b.auto)
    (1.45, 2048, False)
    """
    if not text:
        return None
    activation, line = None, ""
    v0 = [float(m.group("activation")) for m in _V0_SPLIT.finditer(text)]
    v1 = [float(m.group("activation")) for m in _V1_ACTIVATION.finditer(text)]
    if v0:
        activation = min(v0)
        line = (
            f"vLLM's V0 worker, 0.6.5 on: 'PyTorch activation peak memory takes {activation:.2f}GiB'"
            " (vllm/worker/worker.py:225-240@v0.6.6)"
        )
    elif v1:
        activation = min(v1)
        line = (
            f"vLLM's V1 worker at DEBUG level, 0.9.1 on: 'torch peak memory increase: "
            f"{activation:.2f}GiB' (vllm/utils.py:2334@v0.9.1)"
        )
    chunked = _last(_CHUNKED, text)
    tokens = int(chunked.group("tokens")) if chunked else None
    auto = _AUTO_CHUNKED.search(text) is not None
    unchunked = _UNCHUNKED_LONG.search(text) is not None
    if activation is None and tokens is None and not auto and not unchunked:
        return None
    return Batching(activation=activation, line=line, tokens=tokens, auto=auto, unchunked=unchunked)
