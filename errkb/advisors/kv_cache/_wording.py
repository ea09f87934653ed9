"""The wording: the :class:`Outcome`'s numbers as solutions, in the order a user should try them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb.advisors.kv_cache._outcome import COMFORTABLE_UTILIZATION
from errkb.findings import Solution
from errkb.units import format_bytes

if TYPE_CHECKING:
    from errkb.advisors.kv_cache._inputs import Inputs
    from errkb.advisors.kv_cache._outcome import Outcome

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
