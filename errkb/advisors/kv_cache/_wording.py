"""The wording: the :class:`Outcome`'s numbers as solutions, in the order a user should try them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb.advisors.kv_cache._outcome import COMFORTABLE_UTILIZATION
from errkb.findings import Solution
from errkb.units import format_bytes

if TYPE_CHECKING:
    from errkb.advisors.kv_cache._inputs import Inputs
    from errkb.advisors.kv_cache._outcome import Batched, Outcome

__all__ = ["solutions"]


def _from(inp: Inputs) -> str:
    """How to name the run's utilization: its value, or the defaults it may have been."""
    if inp.utilization is None:
        return ""
    if len(inp.default_utilizations) > 1:
        shown = " or ".join(f"{u:g}" for u in inp.default_utilizations)
        return f"from the default ({shown}, by release) "
    return f"from {inp.utilization.value:g} "


def solutions(inp: Inputs, out: Outcome) -> list[Solution]:
    """The solutions of ``out``, best first; none when the figures contradict each other."""
    if out.contradiction:
        return []
    if inp.variant == "free-memory":
        return _free_memory(inp, out)
    length = inp.max_model_len.value if inp.max_model_len else None
    primary: Solution | None = None
    if out.cpu_space_gib is not None and inp.env_var:
        primary = Solution(
            text=f"Set {inp.env_var}={out.cpu_space_gib} (GiB) or more in the environment: the "
            f"cache then holds max_model_len={length}.",
            settings={inp.env_var: out.cpu_space_gib},
        )
    elif out.utilization_needed is not None and not out.infeasible and out.deficit_bytes:
        util = out.utilization_needed
        if out.lower_bound:
            text = (
                f"Raise gpu_memory_utilization {_from(inp)}to at least {util:g}: with no memory "
                "left for the cache, vLLM cannot say how much more it needs; this is the least "
                f"that holds max_model_len={length}, try it and raise further if the error stays."
            )
        else:
            text = (
                f"Raise gpu_memory_utilization {_from(inp)}to {util:g}: that gives the cache "
                f"{format_bytes(out.deficit_bytes)} more, enough for max_model_len={length}."
            )
        primary = Solution(
            text=text,
            settings={"gpu_memory_utilization": util},
            estimate=out.lower_bound or out.measured,
        )
    fit = None
    if out.fits:
        fit = Solution(
            text=f"Lower max_model_len from {length} to {out.fits}: the longest length the cache "
            "holds now."
            if length
            else f"Set max_model_len to {out.fits} or less: the longest length the cache holds now.",
            settings={"max_model_len": out.fits},
        )
    out_list: list[Solution] = []
    comfortable = (
        out.utilization_needed is None or out.utilization_needed <= COMFORTABLE_UTILIZATION
    )
    if primary is not None and comfortable:
        out_list.append(primary)
        if fit:
            out_list.append(fit)
    else:
        if fit:
            out_list.append(fit)
        if primary is not None:
            out_list.append(primary)
    if out.together is not None:
        # Before a utilization that cannot be used; after one that can, as the safer choice.
        both = _together(inp, out, out.together)
        if primary is None or out.infeasible:
            out_list.insert(0, both)
        else:
            out_list.insert(out_list.index(primary) + 1, both)
    if out.batched is not None:
        out_list.append(_batched(inp, out, out.batched))
    if out.fits_fp8:
        settings: dict[str, object] = {"kv_cache_dtype": "fp8"}
        if length and out.fits_fp8 < length:
            settings["max_model_len"] = out.fits_fp8
        out_list.append(
            Solution(
                text=f"Keep the KV cache in fp8 (kv_cache_dtype='fp8'): about {out.fits_fp8} "
                "tokens fit in the same memory (needs a GPU and attention backend with fp8 KV "
                "support; may cost a little accuracy).",
                settings=settings,
                estimate=True,
            )
        )
    if out.tensor_parallel is not None and inp.visible_gpus is not None:
        t = out.tensor_parallel
        out_list.append(
            Solution(
                text=f"Shard over {t.size} of the {inp.visible_gpus.value} visible GPUs "
                f"(tensor_parallel_size={t.size}): each GPU then caches fewer KV heads, so at "
                f"least {t.fits} tokens fit.",
                settings={"tensor_parallel_size": t.size},
                estimate=True,
            )
        )
    return out_list


def _batched(inp: Inputs, out: Outcome, batched: Batched) -> Solution:
    """A smaller profiling batch: computed where vLLM's log gives the activation peak."""
    length = inp.max_model_len.value if inp.max_model_len else None
    v0 = inp.era.engine == "vllm-v0"
    ran = f" ({batched.tokens} tokens here)" if batched.tokens else ""
    auto = ""
    if batched.auto:
        auto = (
            " vLLM 0.5.3 to 0.10.2 turn chunked prefill on by themselves when max_model_len is "
            "above 32768 (on a CUDA GPU, without a sliding window, LoRA or speculative decoding), "
            "and then batch 512 tokens (2048 from 0.6.5), not the whole length: vLLM's log says "
            "which ('Chunked prefill is enabled with max_num_batched_tokens=<N>')."
        )
    util = inp.utilization.value if inp.utilization else None
    at = f" at gpu_memory_utilization={util:g}" if util is not None else ""
    if batched.proposed is not None and batched.tokens and batched.activation and batched.freed:
        settings: dict[str, object] = {"max_num_batched_tokens": batched.proposed}
        chunk = ""
        if batched.chunk:
            settings = {"enable_chunked_prefill": True, **settings}
            chunk = (
                ", with chunked prefill on (enable_chunked_prefill=True: V0 refuses a batch "
                "below max_model_len without it)"
            )
        lacks = ""
        if out.deficit_bytes:
            lacks = f", more than the {format_bytes(out.deficit_bytes)} the cache lacks"
        return Solution(
            text=f"Or keep max_model_len={length}{at} and lower max_num_batched_tokens from "
            f"{batched.tokens} to {batched.proposed}{chunk}: vLLM's profiling run is one batch "
            "of max_num_batched_tokens tokens, and its activation peak "
            f"({format_bytes(batched.activation)} for {batched.tokens} tokens, in vLLM's log) is "
            f"memory the cache does not get; about {format_bytes(batched.freed)} of it comes "
            f"back{lacks} (an estimate: not all of the peak scales "
            "with the tokens, so lower it further if the error stays; long prompts then take "
            "several steps to prefill).",
            settings=settings,
            estimate=True,
        )
    if batched.short and batched.activation and out.deficit_bytes:
        return Solution(
            text=f"A smaller max_num_batched_tokens cannot make up for it alone: vLLM's "
            f"profiling run batches that many tokens{ran}, but its whole activation peak "
            f"({format_bytes(batched.activation)}, in vLLM's log) is less than the cache lacks "
            f"({format_bytes(out.deficit_bytes)}).{auto}",
        )
    chunk = " (V0: with enable_chunked_prefill=True)" if v0 and not batched.auto else ""
    if batched.activation is not None and not batched.tokens:
        missing = (
            f"its peak was {format_bytes(batched.activation)} (vLLM's log), but not for how many "
            "tokens: vLLM logs that too ('Chunked prefill is enabled with "
            "max_num_batched_tokens=<N>'), as does the command's --max-num-batched-tokens"
        )
    elif v0:
        missing = (
            "vLLM's V0 worker logs the peak from 0.6.5 ('PyTorch activation peak memory "
            "takes <size>'); paste that line and errkb computes the value"
        )
    else:
        missing = (
            "vLLM's V1 worker logs the peak from 0.9.1 at VLLM_LOGGING_LEVEL=DEBUG ('torch peak "
            "memory increase: <size>'); paste that line and errkb computes the value"
        )
    return Solution(
        text=f"Or lower max_num_batched_tokens{chunk}: vLLM's profiling run is one batch of "
        f"that many tokens{ran}, and its activation peak is memory the cache does not get, so "
        "a smaller batch leaves the cache more at the same utilization. How much, these figures "
        f"do not say: {missing}.{auto}",
    )


def _together(inp: Inputs, out: Outcome, together: tuple[float, int]) -> Solution:
    """Both settings at once, when the utilization for the whole length is too high to use."""
    util, fits = together
    length = inp.max_model_len.value if inp.max_model_len else None
    why = ""
    if out.utilization_needed is not None and length:
        why = f" the whole {length} tokens would need {out.utilization_needed:g}, " + (
            f"which cannot be used ({'; '.join(out.infeasible)})"
            if out.infeasible
            else "which leaves too little for activations and other processes"
        )
        why = ";" + why
    lower = f" from {length}" if length else ""
    return Solution(
        text=f"Raise gpu_memory_utilization {_from(inp)}to {util:g} and lower max_model_len"
        f"{lower} to {fits}: at {util:g} the cache holds {fits} tokens{why}.",
        settings={"gpu_memory_utilization": util, "max_model_len": fits},
        estimate=out.measured,
    )


def _free_memory(inp: Inputs, out: Outcome) -> list[Solution]:
    if out.free_fits is None or inp.free_at_start is None or inp.total_at_start is None:
        return []
    requested = inp.requested_utilization.value if inp.requested_utilization else None
    free, total = inp.free_at_start.value, inp.total_at_start.value
    lower = f"from {requested:g} " if requested is not None else ""
    found = [
        Solution(
            text=f"Lower gpu_memory_utilization {lower}to {out.free_fits:g}: the most this GPU's "
            f"free memory at start ({free:g} GiB of {total:g} GiB) allows.",
            settings={"gpu_memory_utilization": out.free_fits},
        )
    ]
    if out.free_short and requested is not None:
        found.append(
            Solution(
                text=f"Or free {format_bytes(out.free_short)} on the GPU (other processes hold "
                f"memory: see nvidia-smi) to keep gpu_memory_utilization={requested:g}.",
            )
        )
    return found
