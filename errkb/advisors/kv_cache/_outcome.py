"""The fix in numbers: pure functions from :class:`Inputs` to a frozen :class:`Outcome`.

Three engines, three sums. The V0 engine (and ChatTTS's) counts whole blocks of every
attention layer and clamps at zero; V1 compares the bytes one longest request needs with the
bytes available, sliding windows included; the CPU backend sizes its cache from an
environment variable. Where a figure is only known as printed (two decimals of GiB), the
arithmetic takes the end of its range that keeps the fix safe: the most the engine can need,
the least it can have.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb.advisors.kv_cache._arithmetic import (
    GIB,
    Layout,
    cdiv,
    longest_length,
    needed_bytes,
    printed_range,
    round_down,
    round_up,
)
from errkb.advisors.kv_cache._inputs import Inputs, Value, given_as
from errkb.advisors.kv_cache._layouts import (
    Sized,
    layout_from_shape,
    layout_from_spec,
    sizing_for,
)
from errkb.findings import Fact
from errkb.units import format_bytes

if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["COMFORTABLE_UTILIZATION", "Batched", "Outcome", "TensorParallel", "compute"]

#: Above this, raising the utilization leaves too little for activations and other processes.
COMFORTABLE_UTILIZATION = 0.95
#: The defaults of ``max_num_batched_tokens`` a V1 engine may have run with: 2048 or 8192
#: below 70 GiB or on an A100, 8192 or 16384 above (vllm/engine/arg_utils.py:1495-1507@v0.9.0).
BATCHED_DEFAULTS = (8192, 2048, 16384)
#: V0 without chunked prefill batches ``max(max_model_len, 2048)`` tokens, and refuses fewer
#: than max_model_len (vllm/config.py:554,563@v0.4.0, :1442@v0.6.6, :2168@v0.9.1;
#: vllm/config/scheduler.py:195@v0.10.2).
V0_UNCHUNKED_LEAST = 2048
#: V0 turns chunked prefill on by itself above this length, in 0.5.3 to 0.10.2
#: (vllm/engine/arg_utils.py:747@v0.5.3, :1081@v0.6.6, :1570@v0.10.2; not in 0.5.2).
V0_AUTO_CHUNKED_ABOVE = 32768
V_AUTO_CHUNKED = ((0, 5, 3), (0, 10, 2))
#: A proposed ``max_num_batched_tokens`` is a multiple of this, as vLLM's own chunked-prefill
#: defaults are (512 to 0.6.4, 2048 from 0.6.5: vllm/config.py:1114@v0.6.4, :1344@v0.6.5).
BATCH_STEP = 512
#: ``max_num_batched_tokens`` may not be below ``max_num_seqs`` (vllm/config.py:2225@v0.9.1),
#: whose default is 256 in V0 and up to 1024 in V1 (vllm/engine/arg_utils.py:213@v0.6.6,
#: :1560@v0.9.1).
LEAST_BATCH = {"vllm-v0": 256, "vllm-v1": 1024}
#: The longest length searched when the request's own is not known.
SEARCH_LIMIT = 1 << 24


@attrs.frozen(kw_only=True)
class TensorParallel:
    """Sharding over more GPUs: the size, and the length the same memory then holds."""

    size: int
    fits: int


@attrs.frozen(kw_only=True)
class Batched:
    """A smaller profiling batch: vLLM's profile runs ``max_num_batched_tokens`` tokens.

    ``tokens`` is what the profile ran, where known; ``proposed`` the smaller value whose
    estimated activation peak frees what the cache lacks (None where the figures give no
    number), ``chunk`` whether ``enable_chunked_prefill=True`` must come with it (V0, below
    ``max_model_len``), ``freed`` the estimate of what it frees, ``activation`` the profile's
    peak from vLLM's log, ``short`` that the whole peak is less than the cache lacks, ``auto``
    that a V0 release may have turned chunked prefill on by itself (above 32K) and nothing
    says whether it did.
    """

    tokens: int | None = None
    proposed: int | None = None
    chunk: bool = False
    freed: int | None = None
    activation: int | None = None
    short: bool = False
    auto: bool = False


@attrs.frozen(kw_only=True)
class Outcome:
    """The numbers of the fix, each with its fact, and what could not be worked out.

    ``fits`` is the longest ``max_model_len`` the cache holds now; ``utilization_needed`` the
    ``gpu_memory_utilization`` that holds the requested one (``lower_bound`` when it is only
    a least value, ``measured`` when it rests on the GPU measured at the failure rather than
    vLLM's own figures), ``infeasible`` the reasons it cannot be used; ``together`` the
    utilization and length that start the engine together when that one is too high;
    ``batched`` a smaller profiling batch, the alternative that keeps both.
    """

    facts: tuple[Fact, ...] = ()
    notes: tuple[str, ...] = ()
    sized: Sized | None = None
    fits: int | None = None
    deficit_bytes: int | None = None
    utilization_needed: float | None = None
    lower_bound: bool = False
    infeasible: tuple[str, ...] = ()
    fits_fp8: int | None = None
    tensor_parallel: TensorParallel | None = None
    cpu_space_gib: int | None = None
    free_fits: float | None = None
    free_short: int | None = None
    contradiction: bool = False
    together: tuple[float, int] | None = None
    measured: bool = False
    batched: Batched | None = None


@attrs.define
class _Work:
    """The facts and notes of one computation, in the order established."""

    facts: list[Fact] = attrs.Factory(list)
    notes: list[str] = attrs.Factory(list)

    def put(self, v: Value[int] | Value[float]) -> None:
        self.facts.append(v.fact)

    def outcome(self, **fields: object) -> Outcome:
        """An :class:`Outcome` with the facts and notes so far."""
        return Outcome(facts=tuple(self.facts), notes=tuple(self.notes), **fields)  # type: ignore[arg-type]

    def fact(
        self,
        name: str,
        v: object,
        unit: str | None,
        note: str | None = None,
        source: str = "computed",
    ) -> None:
        self.facts.append(Fact(name=name, value=v, unit=unit, source=source, note=note))  # type: ignore[arg-type]


def compute(inp: Inputs) -> Outcome:
    """The fix in numbers for ``inp``; an :class:`Outcome` with notes where there is none."""
    if inp.variant == "free-memory":
        return _free_memory(inp)
    work = _Work()
    sized = _layout(inp, work)
    v1 = inp.variant == "v1" or (inp.variant == "no-blocks" and inp.era.engine == "vllm-v1")
    if v1:
        return _v1(inp, sized, work)
    return _v0(inp, sized, work)


def _layout(inp: Inputs, work: _Work) -> Sized | None:
    """The layout of one GPU: the engine's own spec if the frames have it, else the shape's."""
    if inp.spec_layers:
        layout = layout_from_spec(inp.spec_layers)
        sized = Sized(
            layout=layout,
            heads_per_gpu=0,
            head_size=0,
            values_per_head=0,
            stage_layers=layout.attention_layers,
            formula="summed over the layers of the engine's kv_cache_spec",
        )
        source = "frame"
    elif inp.shape is not None:
        tp = inp.tensor_parallel_size.value if inp.tensor_parallel_size else 1
        pp = inp.pipeline_parallel_size.value if inp.pipeline_parallel_size else 1
        sized = layout_from_shape(
            inp.shape,
            sizing=sizing_for(inp.era),
            block_size=inp.block_size.value,
            cache_bytes=inp.cache_bytes.value,
            cache_dtype=inp.cache_dtype,
            tp=tp,
            pp=pp,
        )
        source = "computed"
        work.notes.extend(sized.notes)
        if pp > 1:
            work.fact(
                "attention_layers_per_stage",
                sized.stage_layers,
                None,
                f"the largest of {pp} pipeline stages: each GPU caches its stage's layers only",
            )
    else:
        return None
    if sized.layout.block_bytes <= 0:
        work.notes.append("the model has no attention layer that keeps a KV cache")
        return None
    work.fact("kv_bytes_per_token", sized.layout.bytes_per_token, "bytes", sized.formula, source)
    work.fact(
        "kv_block_bytes", sized.layout.block_bytes, "bytes", "block_size x kv_bytes_per_token"
    )
    return sized


def _utilization_ok(inp: Inputs, work: _Work) -> float | None:
    """The run's utilization when it is one vLLM accepts, else None and a note."""
    if inp.utilization is None:
        return None
    u = inp.utilization.value
    if not 0 < u <= 1:
        work.notes.append(
            f"gpu_memory_utilization={u:g} is outside (0, 1], which vLLM refuses: no utilization "
            "is worked out from it"
        )
        return None
    return u


def _v0(inp: Inputs, sized: Sized | None, work: _Work) -> Outcome:
    """The V0 engine, ChatTTS's, and the CPU backend: whole blocks of every attention layer."""
    block = inp.block_size.value
    length = inp.max_model_len.value if inp.max_model_len else None
    blocks: int | None = None
    if inp.num_gpu_blocks is not None:
        blocks = max(0, inp.num_gpu_blocks.value)
    elif inp.capacity is not None:
        if inp.capacity.value % block:
            work.notes.append(
                f"the cache holds {inp.capacity.value} tokens, not a whole number of "
                f"{block}-token blocks: the block size is not {block}; give yours: "
                + given_as("block_size")
            )
        blocks = inp.capacity.value // block
    elif inp.variant == "no-blocks":
        blocks = 0
    bb = sized.layout.block_bytes if sized is not None else None
    u0 = _utilization_ok(inp, work)
    # Zero blocks is vLLM's clamp of a count that may have been far below zero; what vLLM left
    # for the cache, where a log line or the GPU says it, tells how far.
    left = _left(inp, work, u0, bb) if blocks == 0 else None
    lower_bound = blocks == 0 and left is None
    fits = blocks * block if blocks is not None else None
    if length is not None and fits is not None and fits >= length:
        work.notes.append(
            f"the message says the cache holds {fits} tokens, not fewer than max_model_len "
            f"{length}: its figures contradict each other, so no fix is worked out"
        )
        return work.outcome(sized=sized, contradiction=True)
    if fits:
        work.fact("max_model_len_that_fits", fits, "tokens", "num_gpu_blocks x block_size")
    deficit = need = None
    if length and blocks is not None:
        need = cdiv(length, block)
        work.fact("kv_cache_deficit_tokens", (need - blocks) * block, "tokens")
        if bb is not None:
            deficit = (need - blocks) * bb if left is None else need * bb - left[0]
            work.fact(
                "kv_cache_deficit_bytes",
                deficit,
                "bytes",
                "at least: vLLM clamps a negative block count at zero" if lower_bound else None,
            )
    if inp.variant == "cpu":
        space = None
        if bb is not None and length:
            space = cdiv(cdiv(length, block) * bb, GIB)
            work.fact("kv_cache_space_needed", space, "GiB", f"for {inp.env_var}")
        return work.outcome(sized=sized, fits=fits, cpu_space_gib=space)
    util: float | None = None
    infeasible: tuple[str, ...] = ()
    together = None
    if deficit is not None and need is not None and bb is not None and u0 is not None:
        if left is not None:
            util, infeasible = _utilization(
                inp, work, u0, deficit, bound=None, v1=False, lower_bound=False
            )
            if util is not None and (infeasible or util > COMFORTABLE_UTILIZATION):
                together = _together(inp, work, u0, left[0], lambda room: room // bb * block)
        elif lower_bound:
            # Zero blocks: (total x u0 - peak) is under one block, so all but one block of the
            # request is missing at least; and the weights take memory before any block.
            bound = (need * bb + inp.weights.value) if inp.weights is not None else None
            util, infeasible = _utilization(
                inp, work, u0, max(0, (need - 1) * bb), bound=bound, v1=False, lower_bound=True
            )
        else:
            util, infeasible = _utilization(
                inp, work, u0, deficit, bound=None, v1=False, lower_bound=False
            )
    smaller = _batched(inp, work, None if lower_bound else deficit)
    out = work.outcome(
        sized=sized,
        fits=fits or None,
        deficit_bytes=deficit,
        utilization_needed=util,
        lower_bound=lower_bound,
        infeasible=infeasible,
        together=together,
        measured=left is not None and left[1],
        batched=smaller,
    )
    cache_memory = blocks * bb if bb is not None and blocks else None
    return _options(inp, out, work, cache_memory, v1=False)


def _may_auto_chunk(inp: Inputs) -> bool:
    """Whether a V0 release in range turns chunked prefill on by itself for this length."""
    length = inp.max_model_len.value if inp.max_model_len else None
    first, last = V_AUTO_CHUNKED
    return (
        length is not None
        and length > V0_AUTO_CHUNKED_ABOVE
        and inp.era.before(first) is not True
        and (inp.era.low is None or inp.era.low <= last)
    )


def _batched(inp: Inputs, work: _Work, deficit: int | None) -> Batched | None:
    """The smaller ``max_num_batched_tokens`` that frees ``deficit`` bytes for the cache.

    vLLM's profiling run is a batch of ``max_num_batched_tokens`` tokens (V0:
    vllm/worker/model_runner.py:1231-1236@v0.6.6; V1: gpu_model_runner.py:2012@v0.9.1), and its
    activation peak is taken from the memory the cache gets. Where vLLM's log gives that peak,
    the peak is assumed to scale with the tokens (an estimate: the sampler's part for
    ``max_num_seqs`` sequences does not), and the value proposed is the largest multiple of
    512 whose smaller peak frees the deficit. Elsewhere it says so without a number.
    """
    engine = inp.era.engine
    if engine not in LEAST_BATCH or inp.variant not in ("old", "v1", "no-blocks"):
        return None
    if inp.engine_kind == "chattts" or (deficit is not None and deficit <= 0):
        return None
    length = inp.max_model_len.value if inp.max_model_len else None
    chunked = inp.chunked_prefill.value if inp.chunked_prefill else None
    tokens = inp.max_num_batched_tokens.value if inp.max_num_batched_tokens else None
    auto = engine == "vllm-v0" and chunked is None and _may_auto_chunk(inp)
    if tokens is None and (
        engine == "vllm-v0" and chunked is not True and not auto and length is not None
    ):
        tokens = max(length, V0_UNCHUNKED_LEAST)
        work.fact(
            "max_num_batched_tokens",
            tokens,
            "tokens",
            "vLLM V0's default without chunked prefill, max(max_model_len, 2048) "
            "(vllm/config.py:1442@v0.6.6)"
            + ("" if chunked is False else "; nothing here says chunked prefill was on"),
        )
    found = Batched(tokens=tokens, auto=auto)
    if inp.activation is None or deficit is None:
        return found
    peak = inp.activation.value
    if peak <= deficit:
        return attrs.evolve(found, activation=peak, short=True)
    if tokens is None:
        return attrs.evolve(found, activation=peak)
    raw = tokens * (peak - deficit) // peak
    proposed = raw // BATCH_STEP * BATCH_STEP
    if proposed < max(BATCH_STEP, LEAST_BATCH[engine]) or proposed >= tokens:
        return attrs.evolve(found, activation=peak)
    freed = peak * (tokens - proposed) // tokens
    work.fact(
        "max_num_batched_tokens_that_fits",
        proposed,
        "tokens",
        f"estimate: {tokens} x (1 - deficit / activation peak) = {raw}, down to a multiple of "
        f"{BATCH_STEP}; the peak, scaled by the tokens, then frees {format_bytes(freed)}",
    )
    chunk = engine == "vllm-v0" and chunked is not True and length is not None and proposed < length
    return attrs.evolve(found, proposed=proposed, chunk=chunk, freed=freed, activation=peak)


def _left(
    inp: Inputs, work: _Work, u0: float | None, block_bytes: int | None
) -> tuple[int, bool] | None:
    """What vLLM left for the cache at the run's utilization, in bytes, when it can be told.

    Negative when the profile took more than the utilization allows. vLLM's own log line
    first (the least its printed figure can stand for); else, for a failure under the hook,
    the run's share of the GPU less the memory in use when the engine gave up (V0's peak).
    The second value says whether the figure is measured rather than printed.
    """
    if inp.left_printed is not None:
        low = printed_range(inp.left_printed.value, signed=True)[0]
        work.fact(
            "kv_cache_memory_left",
            low,
            "bytes",
            _printed_note(inp.left_printed, "least"),
            "message",
        )
        return low, False
    if inp.in_use is None or inp.total is None or u0 is None:
        return None
    left = math.floor(inp.total.value * u0) - inp.in_use.value
    if block_bytes is not None and left >= block_bytes:
        work.notes.append(
            f"the GPU held {format_bytes(inp.in_use.value)} when the engine gave up, which leaves "
            f"room for blocks at gpu_memory_utilization={u0:g}: it is not what the engine "
            "measured, so it is not used"
        )
        return None
    work.put(inp.in_use)
    work.fact(
        "kv_cache_memory_left",
        left,
        "bytes",
        "total x gpu_memory_utilization - the memory in use, as V0's worker computes it",
    )
    return left, True


def _together(
    inp: Inputs, work: _Work, u0: float, left: int, holds: Callable[[int], int]
) -> tuple[float, int] | None:
    """The utilization and ``max_model_len`` that start the engine together, in one step.

    For when the utilization that holds the requested length is too high to use: the highest
    comfortable utilization (and, V1, one the free memory allows), and the longest length
    ``holds`` finds in the memory the cache then gets. None when that is no length at all.
    """
    if inp.total is None:
        return None
    total = inp.total.value
    cap = COMFORTABLE_UTILIZATION
    if inp.era.engine == "vllm-v1" and inp.free is not None:
        cap = min(cap, round_down(inp.free.value / total))
    if cap <= u0:
        return None
    # What the profile took (total x u0 - left) stays; the rest of total x cap is the cache's.
    room = math.floor(total * cap) - math.ceil(total * u0) + left
    fits = holds(room) if room > 0 else 0
    length = inp.max_model_len.value if inp.max_model_len else None
    if fits <= 0 or (length is not None and fits >= length):
        return None
    work.fact(
        "max_model_len_that_fits_together",
        fits,
        "tokens",
        f"the longest length the cache holds at gpu_memory_utilization={cap:g}",
    )
    return cap, fits


def _utilization(
    inp: Inputs,
    work: _Work,
    u0: float,
    more: int,
    *,
    bound: int | None,
    v1: bool,
    lower_bound: bool,
) -> tuple[float | None, tuple[str, ...]]:
    """``u0 + more / total`` rounded up (and, as a least value, ``bound / total``), checked."""
    if inp.total is None:
        return None, ()
    total = inp.total.value
    raw = u0 + more / total
    why = "the run's utilization plus all but one block of the request" if not v1 else ""
    if bound is not None and bound / total > raw:
        raw, why = bound / total, "(the request's cache + the weights) / the GPU's total"
    util = round_up(raw)
    infeasible = []
    if util > 1.0:
        infeasible.append("above 1.0: the GPU is too small at this length")
    if v1 and inp.free is not None and util * total > inp.free.value:
        infeasible.append(
            f"above the free memory now ({format_bytes(inp.free.value)}), which V1 requires at start"
        )
    note = f"{raw:.5f} rounded up"
    if lower_bound:
        note = f"at least: {why + ' = ' if why else ''}{note}"
    if infeasible:
        note += f"; infeasible: {'; '.join(infeasible)}"
    work.fact("gpu_memory_utilization_needed", util, None, note)
    return util, tuple(infeasible)


def _printed_note(printed: Value[float], end: str) -> str:
    """What a size in bytes taken from a printed figure stands for."""
    note = f"the {end} the printed {printed.value:.2f} GiB can stand for (two decimals)"
    if printed.fact.note:
        note += f"; {printed.fact.note}"
    return note


def _needed_candidates(inp: Inputs, layout: Layout) -> list[tuple[bool, int, str]]:
    """(grouped, max_num_batched_tokens, where the latter came from) the releases allow."""
    sizing = sizing_for(inp.era)
    groupings = [sizing.grouped] if sizing.grouped is not None else [False, True]
    if inp.max_num_batched_tokens is not None:
        batches = [(inp.max_num_batched_tokens.value, "frame")]
    elif layout.has_windows:
        batches = [(b, "default") for b in BATCHED_DEFAULTS]
    else:
        batches = [(BATCHED_DEFAULTS[0], "default")]
    return [(g, b, src) for g in groupings for b, src in batches]


def _v1_available(inp: Inputs, work: _Work) -> int | None:
    """The frame's exact available memory, else the least the printed figure stands for."""
    if inp.available is not None:
        return inp.available.value
    if inp.available_printed is not None:
        low = printed_range(inp.available_printed.value)[0]
        work.fact(
            "available_kv_cache_memory",
            low,
            "bytes",
            _printed_note(inp.available_printed, "least"),
            "message",
        )
        return low
    return 0 if inp.variant == "no-blocks" else None


def _v1_needed(inp: Inputs, sized: Sized | None, work: _Work) -> tuple[int | None, bool, int]:
    """Needed bytes, and the rule (grouped, max_num_batched_tokens) that gives them.

    The frame's figure first; else the layout's, by the rule that reproduces the printed
    figure; else the most the printed figure can stand for.
    """
    length = inp.max_model_len.value if inp.max_model_len else None
    needed = inp.needed.value if inp.needed is not None else None
    printed = printed_range(inp.needed_printed.value) if inp.needed_printed else None
    grouped, batched = False, BATCHED_DEFAULTS[0]
    if sized is not None and length:
        candidates = _needed_candidates(inp, sized.layout)
        tried = [
            (g, b, src, needed_bytes(sized.layout, length, batched=b, grouped=g))
            for g, b, src in candidates
        ]
        if printed is None:
            found = max(tried, key=lambda c: c[3], default=None)
        else:
            found = next((c for c in tried if printed[0] <= c[3] <= printed[1]), None)
        if found is not None:
            grouped, batched, _, n = found
            if sized.layout.has_windows and inp.max_num_batched_tokens is None:
                work.fact(
                    "max_num_batched_tokens",
                    batched,
                    "tokens",
                    "the vLLM default that reproduces the message's needed figure"
                    if printed is not None
                    else "the largest default of vLLM (arg_utils.py:1497-1507@v0.9.0)",
                    "computed" if printed is not None else "default",
                )
            if needed is None:
                how = "ceil(max_model_len / block) x kv_block_bytes"
                if sized.layout.has_windows:
                    how = (
                        "sum over layers of max_memory_usage_bytes (sliding windows hold "
                        "min(window - 1 + max_num_batched_tokens, max_model_len) tokens + 1 block)"
                    )
                    if grouped:
                        how += ", over KV-cache groups padded to one size (vLLM 0.14.0 on)"
                needed = n
                work.fact("needed_kv_cache_memory", needed, "bytes", how)
        elif tried and inp.needed_printed is not None:
            work.notes.append(
                f"errkb's sum of the model's cache ({format_bytes(tried[0][3])}) does not give "
                f"the message's {inp.needed_printed.value:.2f} GiB: the message's figure is used"
            )
    if needed is None and printed is not None and inp.needed_printed is not None:
        needed = printed[1]
        work.fact(
            "needed_kv_cache_memory",
            needed,
            "bytes",
            _printed_note(inp.needed_printed, "most"),
            "message",
        )
    return needed, grouped, batched


def _v1(inp: Inputs, sized: Sized | None, work: _Work) -> Outcome:
    """V1: the bytes one longest request needs against the bytes available."""
    length = inp.max_model_len.value if inp.max_model_len else None
    # No blocks: the memory left is zero or less; the frames or vLLM's log say how much less.
    left = None
    if inp.variant == "no-blocks" and inp.available is None:
        found = _left(inp, work, None, None)
        left = found[0] if found is not None else None
    lower_bound = inp.variant == "no-blocks" and inp.available is None and left is None
    available = left if left is not None else _v1_available(inp, work)
    needed, grouped, batched = _v1_needed(inp, sized, work)
    n_msg, a_msg = inp.needed_printed, inp.available_printed
    if n_msg and a_msg and n_msg.value <= a_msg.value:
        work.notes.append(
            f"the message says {n_msg.value:.2f} GiB are needed and {a_msg.value:.2f} GiB "
            "available: its figures contradict each other, so no fix is worked out"
        )
        return work.outcome(sized=sized, contradiction=True)
    deficit = None
    if needed is not None and available is not None:
        deficit = max(0, needed - available)
        work.fact(
            "kv_cache_deficit_bytes",
            deficit,
            "bytes",
            "at least: vLLM found no memory at all for the cache" if lower_bound else None,
        )
    fits = None
    if inp.estimate is not None:
        fits = inp.estimate.value
        work.fact("max_model_len_that_fits", fits, "tokens", "vLLM's own estimate", "message")
    elif sized is not None and available and not lower_bound:
        fits = longest_length(
            sized.layout, available, limit=length or SEARCH_LIMIT, batched=batched, grouped=grouped
        )
        if fits:
            least = " (the least the printed figure can stand for)" if inp.available is None else ""
            work.fact(
                "max_model_len_that_fits",
                fits,
                "tokens",
                "the longest length whose cache fits the available memory, as vLLM's "
                f"estimate_max_model_len searches it{least}",
            )
    if length is not None and fits is not None and fits >= length:
        work.notes.append(
            f"the cache holds {fits} tokens, not fewer than max_model_len {length}: the "
            "figures contradict each other, so no fix is worked out"
        )
        return work.outcome(sized=sized, contradiction=True)
    util: float | None = None
    infeasible: tuple[str, ...] = ()
    together = None
    u0 = _utilization_ok(inp, work)
    if deficit is not None and u0 is not None:
        bound = None
        if lower_bound and inp.weights is not None and needed is not None:
            bound = needed + inp.weights.value
        util, infeasible = _utilization(
            inp, work, u0, deficit, bound=bound, v1=True, lower_bound=lower_bound
        )
        high = util is not None and (bool(infeasible) or util > COMFORTABLE_UTILIZATION)
        zero = inp.variant == "no-blocks" and not lower_bound
        if zero and high and sized is not None and available is not None:
            layout = sized.layout
            together = _together(
                inp,
                work,
                u0,
                available,
                lambda room: longest_length(
                    layout, room, limit=length or SEARCH_LIMIT, batched=batched, grouped=grouped
                ),
            )
    smaller = _batched(inp, work, None if lower_bound else deficit)
    out = work.outcome(
        sized=sized,
        fits=fits or None,
        deficit_bytes=deficit,
        utilization_needed=util,
        lower_bound=lower_bound,
        infeasible=infeasible,
        together=together,
        batched=smaller,
    )
    cache_memory = available if available and available > 0 else None
    return _options(inp, out, work, cache_memory, v1=True, batched=batched, grouped=grouped)


def _options(
    inp: Inputs,
    out: Outcome,
    work: _Work,
    cache_memory: int | None,
    *,
    v1: bool,
    batched: int = BATCHED_DEFAULTS[0],
    grouped: bool = False,
) -> Outcome:
    """The fp8 cache and tensor parallelism, for the same cache memory."""
    sized, shape = out.sized, inp.shape
    if sized is None or not cache_memory:
        return attrs.evolve(out, facts=tuple(work.facts), notes=tuple(work.notes))
    block = inp.block_size.value
    sizing = sizing_for(inp.era)
    tp = inp.tensor_parallel_size.value if inp.tensor_parallel_size else 1
    pp = inp.pipeline_parallel_size.value if inp.pipeline_parallel_size else 1

    def holds(layout: Layout) -> int:
        if v1:
            return longest_length(
                layout, cache_memory, limit=SEARCH_LIMIT, batched=batched, grouped=grouped
            )
        return cache_memory // layout.block_bytes * block

    fits8 = None
    offer_fp8 = (
        inp.cache_bytes.value > 1
        and inp.engine_has_kv_dtype is not False
        and inp.engine_kind != "chattts"
        and inp.era.engine != "chattts"
    )
    if offer_fp8 and shape is not None and not inp.spec_layers:
        layout8 = layout_from_shape(
            shape, sizing=sizing, block_size=block, cache_bytes=1, tp=tp, pp=pp
        ).layout
        fits8 = holds(layout8)
    elif offer_fp8 and inp.spec_layers:
        scale = inp.cache_bytes.value
        layout8 = attrs.evolve(
            sized.layout,
            groups=tuple(
                attrs.evolve(g, page_bytes=g.page_bytes // scale) for g in sized.layout.groups
            ),
        )
        fits8 = holds(layout8)
    if fits8:
        work.fact(
            "max_model_len_that_fits_fp8",
            fits8,
            "tokens",
            "estimate: the same cache memory at 1 byte per value",
        )
    parallel = None
    if (
        shape is not None
        and inp.visible_gpus is not None
        and inp.visible_gpus.value > tp
        and inp.era.engine != "chattts"
        and inp.engine_kind != "chattts"
    ):
        if shape.mla is not None and sizing.mla == "latent":
            work.notes.append(
                "tensor parallelism does not shrink an MLA cache: every GPU keeps the whole "
                "latent (only the weights are split)"
            )
        else:
            sizes = [
                t
                for t in range(inp.visible_gpus.value, tp, -1)
                if shape.num_attention_heads % t == 0
            ]
            if sizes:
                t = sizes[0]
                layout_t = layout_from_shape(
                    shape,
                    sizing=sizing,
                    block_size=block,
                    cache_bytes=inp.cache_bytes.value,
                    cache_dtype=inp.cache_dtype,
                    tp=t,
                    pp=pp,
                ).layout
                fits_t = holds(layout_t)
                work.fact(
                    "max_model_len_that_fits_tp",
                    fits_t,
                    "tokens",
                    f"estimate with tensor_parallel_size={t}: at least, since the weights are split too",
                )
                parallel = TensorParallel(size=t, fits=fits_t)
    return attrs.evolve(
        out,
        facts=tuple(work.facts),
        notes=tuple(work.notes),
        fits_fp8=fits8 or None,
        tensor_parallel=parallel,
    )


def _free_memory(inp: Inputs) -> Outcome:
    """V1's "Free memory on device ... less than desired": the utilization free memory allows."""
    work = _Work()
    if inp.free_at_start is None or inp.total_at_start is None:
        return Outcome()
    work.put(inp.free_at_start)
    work.put(inp.total_at_start)
    free, total = inp.free_at_start.value, inp.total_at_start.value
    if total <= 0:
        work.notes.append("the message gives a total memory of 0: no fix is worked out")
        return Outcome(facts=tuple(work.facts), notes=tuple(work.notes), contradiction=True)
    fits = round_down(free / total)
    work.fact("gpu_memory_utilization_that_fits", fits, None, "free / total, rounded down")
    requested = inp.requested_utilization.value if inp.requested_utilization else None
    if fits <= 0:
        work.notes.append(
            f"only {free:g} GiB of {total:g} GiB were free at start: no utilization above 0 "
            "fits; free the GPU first (other processes hold it: see nvidia-smi)"
        )
        return Outcome(
            facts=tuple(work.facts), notes=tuple(work.notes), free_fits=None, free_short=None
        )
    if requested is not None and fits >= requested:
        work.notes.append(
            f"the message says {free:g} of {total:g} GiB were free, enough for "
            f"gpu_memory_utilization={requested:g}: its figures contradict each other"
        )
        return Outcome(facts=tuple(work.facts), notes=tuple(work.notes), contradiction=True)
    short = None
    if requested is not None:
        short = max(0, round((requested * total - free) * GIB))
    return Outcome(
        facts=tuple(work.facts), notes=tuple(work.notes), free_fits=fits, free_short=short
    )
