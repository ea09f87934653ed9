"""The out-of-memory advisor: where a GPU's memory went, and the one fix its figures decide.

torch's ``CUDA out of memory`` (and ``HIP``) message carries the figures that decide what to
do: the request, the card's total and free memory, what this process holds, what other
processes hold (``Process N has X memory in use``, one line each), what live tensors occupy
and what the allocator keeps reserved but unused. The frames, for a live exception, add the
model (its weights, gradients and optimizer state) and the batch size. From them one
situation is chosen, in this order, and its fix is the first solution:

- ``serving engine``: raised inside vLLM (its files in the traceback, its log lines in the
  paste): the engine's own settings, not a training batch.
- ``ranks on one card``: a distributed job whose other ranks share this card: each rank on
  its own device.
1. ``another process``: other processes hold at least what the request lacks: stop them or
   move to a free card.
2. ``fragmentation``: the memory reserved but unallocated is at least the request: the
   allocator's expandable segments (the setting the message itself names).
3. ``allocator limit``: the card had the request free: the allocator refused it without the card
   running out (a per-process memory fraction), or the memory came free after the failure.
4. ``single request``: the one tensor asked for is larger than what the card could give this
   process at all: shrink that tensor; nothing else helps.
5. ``weights``: the model's weights, gradients and optimizer state alone exceed the card: what
   does fit, with the arithmetic (for generation, the weights alone).
6. ``generation``: ``generate()`` ran out while its KV cache grew: the beams, the prompts at a
   time or the new tokens whose cache fits, from the model's config (transformers' cache keeps
   keys and values of every attention layer for every token of every sequence).
7. ``growing``: the step keeps the graph of every earlier step alive: a loss added up as a
   tensor (``total += loss``) rather than as a number (``loss.item()``).
8. ``activations``: the rest: the batch size that fits, an estimate, with gradient
   accumulation raised so that the effective batch stays exactly what it was.

Each figure says where it came from: the message, a frame, or computed from those.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any, Literal

import regex

from errkb._attrs import attrs
from errkb._patterns import lazy_compile, loosen
from errkb.advisors import Advice, Captures, Contract, Variant, advisor
from errkb.findings import ExampleFix, Fact, Solution
from errkb.units import format_bytes, to_bytes

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from errkb.evidence import Evidence
    from errkb.match import Match

__all__ = ["CONTRACT", "Figures", "ModelMemory", "advise", "figures_of", "situation"]

CONTRACT = Contract(
    name="out-of-memory",
    variants=(
        Variant(
            name="figures",
            requires={"requested", "requested_unit", "free", "free_unit"},
            reads={"total", "allocated", "reserved_unallocated", "reserved", "process_in_use"},
        ),
        Variant(
            name="mps",
            requires={"requested", "requested_unit", "mps_allocated", "mps_allocated_unit"},
            reads={"other_allocations", "max_allowed"},
        ),
        Variant(name="request", requires={"requested", "requested_unit"}),
    ),
)

#: The situations, in the order they are decided (see the module docstring).
SITUATIONS = (
    "serving engine",
    "ranks on one card",
    "another process",
    "fragmentation",
    "allocator limit",
    "single request",
    "weights",
    "generation",
    "growing",
    "activations",
)

# One line per other process on the card, as torch (2.1 and later) writes them; a paste may
# have wrapped them anywhere a space was.
_PROCESS = lazy_compile(
    loosen(r"Process (?P<pid>\d+) has (?P<n>\d+(?:\.\d+)?) (?P<unit>[KMGTP]iB|bytes) memory in use")
)
# The allocator setting the message names, when it names one.
_SETTING = lazy_compile(r"(?P<var>PYTORCH_(?:CUDA|HIP)_ALLOC_CONF)=expandable_segments:True")
# What the batch is left with, at least: the message's figures are a lower bound of the peak.
HEADROOM = 0.9
# Other processes count as the cause when they hold at least this share of the card.
_OTHERS_SHARE = 0.05
#: The device types whose tensors are on the card (ROCm's are "cuda" too; MPS's figures
#: count the "mps" device instead).
CARD_DEVICES = frozenset({"cuda"})
# Bytes of optimizer state per trainable parameter, by class: Adam keeps two fp32 moments.
_STATE_BYTES = {"Adam": 8, "AdamW": 8, "Adamax": 8, "NAdam": 8, "RAdam": 8, "Adagrad": 4}


@attrs.frozen(kw_only=True)
class Figures:
    """The message's figures, in bytes (``None`` where this wording has none)."""

    requested: int
    free: int | None = None
    total: int | None = None
    this_process: int | None = None
    allocated: int | None = None
    reserved_unallocated: int | None = None
    #: Other processes on the card: (pid, bytes), as the message lists them.
    others: tuple[tuple[int, int], ...] = ()
    #: The allocator's environment variable the message names, if it names one.
    setting: str | None = None
    #: The wording of torch 2.0 and older ("reserved in total by PyTorch"), whose message
    #: advises max_split_size_mb.
    older: bool = False
    #: The device type whose memory ran out: ``cuda`` (ROCm's too) or ``mps`` (Apple's GPU,
    #: whose "total" is the allocator's cap on unified memory, its "max allowed").
    device: str = "cuda"

    #: What other processes hold as the live GPU probe measured it (NVML, no pids), for a
    #: message that lists none (torch 2.0 and older, or none listed).
    others_measured: int | None = None
    #: Where ``others`` came from: the message's lines, or the live GPU probe (NVML).
    others_from: Literal["message", "gpu"] = "message"

    @property
    def others_bytes(self) -> int:
        """What the other processes hold, together."""
        return sum(n for _, n in self.others) or (self.others_measured or 0)

    @property
    def has_others(self) -> bool:
        """Whether the message or the probe says other processes hold memory on the card."""
        return self.others_bytes > 0

    @property
    def shortfall(self) -> int | None:
        """How much more the request needed than the card had free (at least 0)."""
        return None if self.free is None else max(self.requested - self.free, 0)


@attrs.frozen(kw_only=True)
class ModelMemory:
    """A model found in the frames: what it keeps on the GPU for training, in bytes."""

    weights: int
    gradients: int
    optimizer_state: int
    #: How the optimizer state was counted: its tensors, or its class's rule.
    optimizer: str | None = None
    #: Where the optimizer state's figure comes from: its tensors in a frame, or computed.
    optimizer_source: Literal["frame", "computed"] = "computed"
    #: The weights' bytes were counted in a floating type wider than bf16 (fp32).
    wide: bool = False
    #: Every parameter's bytes, wherever it is: what the card must hold once the model is on
    #: it (it ran out while the model was being moved: some are there, the rest not yet).
    all_weights: int = 0

    @property
    def fixed(self) -> int:
        """Weights, gradients and optimizer state: what no batch size changes."""
        return self.weights + self.gradients + self.optimizer_state


@attrs.frozen(kw_only=True)
class Batch:
    """The batch size found in the frames, and the gradient accumulation beside it."""

    size: int
    accumulation: int = 1
    #: Where it was found: the keywords to change, by what holds them.
    size_name: str = "batch_size"
    accumulation_name: str | None = None
    #: The optimizer the arguments name (``TrainingArguments.optim``), when they name one.
    optim: str | None = None


@attrs.frozen(kw_only=True)
class Generation:
    """A ``generate()`` call found in the frames, and its KV cache's arithmetic.

    transformers' cache keeps, for every token of every sequence, a key and a value of
    ``head_dim`` for each KV head of each attention layer, in the model's dtype.
    """

    batch: int
    prompt: int
    new_tokens: int
    beams: int
    #: Bytes the cache keeps for one token of one sequence.
    per_token: int
    #: How ``per_token`` is made: ``2 x layers x heads x head_dim x bytes``.
    formula: str
    #: Tokens each sequence held when memory ran out (a frame's ``cur_len``), if a frame says.
    length: int | None = None
    #: The cache implementations this transformers accepts (``offloaded`` among them or not).
    offloaded: bool = False

    #: Attention layers: each grows its keys, then its values, by a new tensor while the
    #: old one is still held, so the cache's peak is one tensor (of ``2 x layers``) above it.
    layers: int = 1

    def cache(
        self, *, batch: int | None = None, beams: int | None = None, new_tokens: int | None = None
    ) -> int:
        """Bytes of the whole run's cache, with any of its figures changed."""
        rows = (batch or self.batch) * (beams or self.beams)
        tokens = self.prompt + (self.new_tokens if new_tokens is None else new_tokens)
        return self.per_token * rows * tokens

    @property
    def growth(self) -> float:
        """The cache's peak over its size: one more tensor of its ``2 x layers``."""
        return 1 + 1 / (2 * self.layers)

    def room(self, fig: Figures) -> int | None:
        """What the cache may have: what it held when memory ran out, and what was left."""
        if fig.free is None:
            return None
        now = self.per_token * self.batch * self.beams * (self.length or self.prompt)
        return now + fig.free + (fig.reserved_unallocated or 0)


@attrs.frozen(kw_only=True)
class Growing:
    """A tensor that adds up every step's graph: ``name += value`` in a user's function."""

    name: str
    file: str
    line: int
    #: The source line of the ``+=``, as the file has it, and with the number added instead.
    text: str
    after: str


def figures_of(captures: Mapping[str | int, object], message: str | None) -> Figures | None:
    """The figures of a match of the record (its captures), and of its message's text.

    ``CaptureError`` when a figure the record captured is not a size.
    """
    size = Captures(captures).size
    requested = size("requested")
    if requested is None:
        return None
    mps = size("mps_allocated")
    if mps is not None:  # torch's MPS allocator: its tensors, the rest, and its cap
        cap, other = size("max_allowed"), size("other_allocations") or 0
        return Figures(
            requested=requested,
            free=None if cap is None else max(cap - mps - other, 0),
            total=cap,
            this_process=mps + other,
            allocated=mps,
            device="mps",
        )
    allocated = size("allocated")
    unused = size("reserved_unallocated")
    reserved = size("reserved")  # the older wording: reserved in total
    if unused is None and reserved is not None and allocated is not None:
        unused = max(reserved - allocated, 0)
    others: tuple[tuple[int, int], ...] = ()
    setting = None
    if message:
        others = tuple(
            (int(m["pid"]), to_bytes(float(m["n"]), m["unit"])) for m in _PROCESS.finditer(message)
        )
        named = _SETTING.search(message)
        setting = named["var"] if named else None
    return Figures(
        requested=requested,
        free=size("free"),
        total=size("total"),
        this_process=size("process_in_use"),
        allocated=allocated,
        reserved_unallocated=unused,
        others=others,
        setting=setting,
        older=reserved is not None,
    )


def situation(
    fig: Figures,
    model: ModelMemory | None = None,
    *,
    moving: bool = False,
    where: str | None = None,
    generation: Generation | None = None,
    growing: Growing | None = None,
) -> str:
    """Which of :data:`SITUATIONS` the figures show (see the module docstring).

    ``moving``: the traceback runs through a module being moved to the device (``.to()``,
    ``.cuda()``): the weights were still arriving when the card ran out. ``where``: what ran
    out, read from the traceback's files and the pasted text: ``"vllm"`` (a serving engine,
    whose fix is in its own settings) or ``"distributed"`` (a job of several ranks).
    ``generation``: a ``generate()`` call in the frames; ``growing``: a tensor in a user's frame
    that adds up the graphs of every step.
    """
    shortfall = fig.shortfall
    if where == "vllm":
        return "serving engine"
    if where == "distributed" and fig.has_others and fig.total:
        return "ranks on one card"
    if (
        fig.has_others
        and shortfall is not None
        and fig.others_bytes >= shortfall
        and fig.total
        and fig.others_bytes >= _OTHERS_SHARE * fig.total
    ):
        return "another process"
    if fig.reserved_unallocated is not None and fig.reserved_unallocated >= fig.requested > 0:
        return "fragmentation"
    if fig.free is not None and fig.free >= fig.requested:
        return "allocator limit"
    if fig.total is not None and fig.requested > fig.total - fig.others_bytes:
        return "single request"
    room = None if fig.total is None else fig.total - fig.others_bytes
    # Generation keeps no gradients or optimizer state: its weights alone must fit.
    kept = None if model is None else model.weights if generation else model.fixed
    if moving or (kept is not None and room is not None and kept > room):
        return "weights"
    if generation is not None:
        return "generation"
    if growing is not None:
        return "growing"
    return "activations"


# --- what the frames hold ----------------------------------------------------------------


def _torch() -> Any:
    return sys.modules.get("torch")  # never imported here: only a program that uses it


def _values(evidence: Evidence) -> Iterator[Any]:
    """The local values of the frames, innermost first, and the attributes a Trainer holds."""
    for view in evidence.frames():
        for value in view.locals().values():
            yield value
            if type(value).__name__ == "Trainer" or hasattr(value, "create_optimizer"):
                for name in ("model", "optimizer", "args"):
                    held = getattr(value, name, None)
                    if held is not None:
                        yield held


def _model_memory(evidence: Evidence, devices: frozenset[str] = CARD_DEVICES) -> ModelMemory | None:
    """The model of the frames: what it keeps on a device of ``devices`` for training."""
    torch = _torch()
    if torch is None:
        return None
    # The outermost module: inner frames hold the layers of the model being run.
    module = next(
        (v for v in reversed(list(_values(evidence))) if isinstance(v, torch.nn.Module)), None
    )
    if module is None:
        return None
    weights = gradients = trainable = every = 0
    wide = False
    for param in module.parameters():
        size = param.numel() * param.element_size()
        every += size
        wide = wide or (param.is_floating_point() and param.element_size() >= 4)
        if param.device.type not in devices:
            continue  # offloaded, or not placed yet: it holds nothing on the card
        weights += size
        if param.requires_grad:
            gradients += size
            trainable += param.numel()
    optimizer = next((v for v in _values(evidence) if isinstance(v, torch.optim.Optimizer)), None)
    state, how = 0, None
    source: Literal["frame", "computed"] = "computed"
    if optimizer is not None:
        held = [t for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
        if held:
            on_card = [t for t in held if t.device.type in devices]
            state = sum(t.numel() * t.element_size() for t in on_card)
            how, source = f"{type(optimizer).__name__}: its state's tensors", "frame"
        elif type(optimizer).__name__ in _STATE_BYTES:
            per = _STATE_BYTES[type(optimizer).__name__]
            state = per * trainable
            how = f"{type(optimizer).__name__}: {per} bytes a trainable parameter, before its first step"
    return ModelMemory(
        weights=weights,
        gradients=gradients,
        optimizer_state=state,
        optimizer=how,
        optimizer_source=source,
        wide=wide,
        all_weights=every,
    )


def _batch(evidence: Evidence) -> Batch | None:
    for value in _values(evidence):
        if isinstance(value, type):
            continue  # a class: its defaults are no one's settings
        size = getattr(value, "per_device_train_batch_size", None)
        if isinstance(size, int) and not isinstance(size, bool) and size > 0:
            steps = getattr(value, "gradient_accumulation_steps", 1)
            optim = getattr(value, "optim", None)  # an OptimizerNames member, a str enum
            return Batch(
                size=size,
                accumulation=steps if isinstance(steps, int) and steps > 0 else 1,
                size_name="per_device_train_batch_size",
                accumulation_name="gradient_accumulation_steps",
                optim=str(getattr(optim, "value", optim)) if optim is not None else None,
            )
        torch = _torch()
        loader = torch is not None and isinstance(value, torch.utils.data.DataLoader)
        if loader and isinstance(value.batch_size, int) and value.batch_size > 0:
            return Batch(size=value.batch_size)
    return None


_GENERATE_FILE = "transformers/generation/utils.py"


def _generation(evidence: Evidence) -> Generation | None:
    """The ``generate()`` call of transformers that ran out, read from its frame.

    Its ``self`` is the model (its config gives the cache's shape, its parameters the dtype),
    ``generation_config`` the beams and lengths, ``inputs_tensor`` the prompts; a decoding
    loop's ``cur_len`` (or its ``input_ids``) inside it, how far it got. Encoder-decoder and latent-attention (MLA)
    models keep other caches: None for them.
    """
    from errkb.exceptions import UsageError
    from errkb.probes.model import model_shape

    length = None
    for view in evidence.frames():  # innermost first
        if not view.file.replace("\\", "/").endswith(_GENERATE_FILE):
            continue
        if view.function != "generate":
            if length is None:  # the decoding loop: beam search counts cur_len, sampling
                length = _length(view.local("cur_len"), view.local("input_ids"))  # grows ids
            continue
        model, options = view.local("self"), view.local("generation_config")
        shape = getattr(view.local("inputs_tensor"), "shape", None)
        config = getattr(model, "config", None)
        if config is None or options is None or shape is None or len(shape) != 2:
            return None
        if getattr(config, "is_encoder_decoder", False):
            return None
        try:
            text = config.get_text_config() if hasattr(config, "get_text_config") else config
            cache = model_shape(text, origin="the model's config (frame)")
            width = next(iter(model.parameters())).element_size()
        except (UsageError, StopIteration, AttributeError, TypeError):
            return None
        if cache.mla is not None:
            return None
        batch, prompt = int(shape[0]), int(shape[1])
        beams = options.num_beams if isinstance(options.num_beams, int) else 1
        new = options.max_new_tokens
        if not isinstance(new, int):
            most = options.max_length
            new = most - prompt if isinstance(most, int) else None
        if new is None or new <= 0 or batch <= 0 or beams <= 0:
            return None
        layers, heads, dim = cache.attention_layers, cache.num_kv_heads, cache.head_dim
        implementations = getattr(
            sys.modules.get("transformers.generation.configuration_utils"),
            "ALL_CACHE_IMPLEMENTATIONS",
            (),
        )
        return Generation(
            batch=batch,
            prompt=prompt,
            new_tokens=new,
            beams=max(beams, 1),
            per_token=2 * layers * heads * dim * width,
            formula=f"2 x {layers} layers x {heads} KV heads x {dim} x {width} bytes",
            length=length if length and length >= prompt else None,
            offloaded="offloaded" in implementations,
            layers=max(layers, 1),
        )
    return None


def _length(cur: object, ids: object) -> int | None:
    if isinstance(cur, int) and not isinstance(cur, bool):
        return cur
    shape = getattr(ids, "shape", None)
    return int(shape[-1]) if shape is not None and len(shape) == 2 else None


def _growing(evidence: Evidence) -> Growing | None:
    """A user's tensor that holds every step's graph: the target of ``+=`` with a ``grad_fn``.

    Read in the innermost user frame that has one: the local is a tensor with history, and
    its function's source adds to it (``name += ...``).
    """
    import ast

    torch = _torch()
    if torch is None:
        return None
    from errkb._traceback import is_library_file
    from errkb.advisors._callsite import _parse

    for view in evidence.frames():
        if is_library_file(view.file):
            continue
        history = {
            name
            for name, value in view.locals().items()
            if torch.is_tensor(value) and value.grad_fn is not None and value.dim() == 0
        }
        parsed = _parse(view.file) if history else None
        if parsed is None:
            continue
        lines, tree = parsed
        scope = next(
            (
                node
                for node in ast.walk(tree)
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name == view.function
                and node.lineno <= view.line <= (node.end_lineno or node.lineno)
            ),
            tree,
        )
        for node in ast.walk(scope):
            if (
                isinstance(node, ast.AugAssign)
                and isinstance(node.op, ast.Add)
                and isinstance(node.target, ast.Name)
                and node.target.id in history
                and node.lineno == node.end_lineno
            ):
                text = lines[node.lineno - 1].rstrip("\r\n")
                raw = text.encode()  # ast's columns count UTF-8 bytes
                start, end = node.value.col_offset, node.value.end_col_offset or 0
                value = raw[start:end].decode()
                simple = isinstance(node.value, (ast.Name, ast.Attribute, ast.Subscript, ast.Call))
                number = f"{value}.item()" if simple else f"({value}).item()"
                after = (raw[:start] + number.encode() + raw[end:]).decode()
                return Growing(
                    name=node.target.id, file=view.file, line=node.lineno, text=text, after=after
                )
    return None


# A pasted log line of vLLM's (its engine-core process, its loggers); a traceback's file of a
# job of several ranks.
_VLLM_LOG = lazy_compile(
    r"\((?:EngineCore|VllmWorker)\b|\bvllm\.(?:engine|entrypoints|v1|worker)\b"
    # vLLM's own logger: "INFO 12-22 10:55:38 model_runner.py:1413] ..." (a bracket before the
    # file from 0.8), a line no other library of the stack prints so; and its server's command.
    r"|^(?:DEBUG|INFO|WARNING|ERROR) \d\d-\d\d \d\d:\d\d:\d\d \[?[\w.]+\.py:\d+\]"
    r"|^\W*vllm\s+serve\b",
    regex.MULTILINE,
)
_DISTRIBUTED = lazy_compile(
    r"[/\\](?:torch[/\\](?:distributed|nn[/\\]parallel)|deepspeed|accelerate)[/\\]"
)


def _where(evidence: Evidence) -> str | None:
    """``"vllm"`` or ``"distributed"`` when the traceback's files or the pasted text say so."""
    from errkb.advisors.kv_cache._engine_calls import engine_file

    files = [f.file for info in evidence.infos for f in info.frames]
    if any(map(engine_file, files)) or (evidence.text and _VLLM_LOG.search(evidence.text)):
        return "vllm"
    if any(_DISTRIBUTED.search(f) for f in files):
        return "distributed"
    return None


def _moving(evidence: Evidence) -> bool:
    """Whether a module's parameters were being moved to the device when memory ran out."""
    return any(
        view.function in ("_apply", "convert")
        and view.file.replace("\\", "/").endswith("torch/nn/modules/module.py")
        for view in evidence.frames()
    )


# --- the fix -------------------------------------------------------------------------------


def activation_share(fig: Figures, fixed: int) -> float | None:
    """The share of today's batch whose activations fit, with :data:`HEADROOM` kept.

    The step's activations are at least what was allocated, less ``fixed`` (weights,
    gradients, optimizer state), plus the request; what they may have is what this process's
    allocator could reach (free, allocated, reserved) less ``fixed``. ``None`` when the
    figures do not give both.
    """
    if fig.free is None or fig.allocated is None:
        return None
    budget = fig.free + fig.allocated + (fig.reserved_unallocated or 0) - fixed
    needed = fig.allocated - fixed + fig.requested
    if needed <= 0 or budget <= 0:
        return None
    return HEADROOM * budget / needed


def fitting_batch(fig: Figures, batch: Batch, fixed: int) -> tuple[int, int] | None:
    """The micro-batch that fits and the accumulation that keeps the effective batch.

    The batch is scaled by :func:`activation_share`, then lowered to a divisor of the effective
    batch (micro-batch x accumulation stays exactly what it was). ``None`` when the figures give
    no smaller batch.
    """
    share = activation_share(fig, fixed)
    if share is None:
        return None
    largest = math.floor(batch.size * share)
    effective = batch.size * batch.accumulation
    micro = max((d for d in range(1, max(largest, 1) + 1) if effective % d == 0), default=1)
    return (micro, effective // micro) if micro < batch.size else None


def _facts(
    fig: Figures,
    model: ModelMemory | None,
    batch: Batch | None,
    generation: Generation | None = None,
) -> list[Fact]:
    facts = [Fact(name="requested", value=fig.requested, unit="bytes", source="message")]
    for name, value in (
        ("gpu_total", fig.total),
        ("gpu_free", fig.free),
        ("this_process_in_use", fig.this_process),
        ("allocated_by_pytorch", fig.allocated),
        ("reserved_unallocated", fig.reserved_unallocated),
    ):
        if value is not None:
            facts.append(Fact(name=name, value=value, unit="bytes", source="message"))
    if fig.has_others and not fig.others:
        facts.append(
            Fact(name="other_processes", value=fig.others_bytes, unit="bytes", source="gpu",
                 note="measured after the error, through NVML")
        )  # fmt: skip
    if fig.others:
        pids = ", ".join(str(pid) for pid, _ in fig.others)
        after = ", measured after the error, through NVML" if fig.others_from == "gpu" else ""
        facts.append(
            Fact(name="other_processes", value=fig.others_bytes, unit="bytes",
                 source=fig.others_from, note=f"pids {pids}{after}")
        )  # fmt: skip
    if fig.shortfall:  # none when the card had the request free (it failed in the allocator)
        facts.append(Fact(name="shortfall", value=fig.shortfall, unit="bytes", source="computed"))
    if model is not None and generation is not None:
        if model.weights:  # a model kept on the CPU holds nothing of the card
            facts.append(
                Fact(name="weights_on_gpu", value=model.weights, unit="bytes", source="frame")
            )
    elif model is not None:
        facts += [
            Fact(name="weights_on_gpu", value=model.weights, unit="bytes", source="frame"),
            Fact(name="gradients", value=model.gradients, unit="bytes", source="computed",
                 note="one per trainable parameter, its dtype"),
            Fact(name="optimizer_state", value=model.optimizer_state, unit="bytes",
                 source=model.optimizer_source,
                 note=model.optimizer),
        ]  # fmt: skip
    if generation is not None:
        g = generation
        facts += [
            Fact(name="kv_cache_per_token", value=g.per_token, unit="bytes", source="computed",
                 note=f"{g.formula}, from the model's config in a frame"),
            Fact(name="generate_prompts", value=g.batch, source="frame"),
            Fact(name="prompt_tokens", value=g.prompt, source="frame"),
            Fact(name="num_beams", value=g.beams, source="frame"),
            Fact(name="max_new_tokens", value=g.new_tokens, source="frame"),
            Fact(name="kv_cache_needed", value=g.cache(), unit="bytes", source="computed",
                 note="the whole run's cache: prompts x beams x tokens x kv_cache_per_token"),
        ]  # fmt: skip
    elif batch is not None:
        facts.append(Fact(name=batch.size_name, value=batch.size, source="frame"))
        if batch.accumulation_name:
            facts.append(
                Fact(name=batch.accumulation_name, value=batch.accumulation, source="frame")
            )
    return facts


def _solutions(
    kind: str,
    fig: Figures,
    model: ModelMemory | None,
    batch: Batch | None,
    generation: Generation | None = None,
    growing: Growing | None = None,
    *,
    moving: bool = False,
    phase: str | None = None,
) -> list[Solution]:
    b = format_bytes
    if kind == "another process":
        pids = ", ".join(f"{pid} ({b(n)})" for pid, n in fig.others) or "nvidia-smi names them"
        return [Solution(
            text=f"Free the GPU: other processes hold {b(fig.others_bytes)} of it ({pids}), at "
            f"least the {b(fig.shortfall or 0)} this request lacked. Stop them (nvidia-smi "
            "lists them) or run this job on a card nobody uses (CUDA_VISIBLE_DEVICES).",
            settings={"stop_pids": [pid for pid, _ in fig.others]},
        )]  # fmt: skip
    if kind == "serving engine":
        return _serving_solutions(fig, phase)
    if kind == "ranks on one card":
        pids = ", ".join(str(pid) for pid, _ in fig.others) or "nvidia-smi names them"
        return [Solution(
            text=f"Each rank must use its own GPU: other processes ({pids}) hold "
            f"{b(fig.others_bytes)} of this card, most likely the job's other ranks, all on "
            "cuda:0. Call torch.cuda.set_device(int(os.environ['LOCAL_RANK'])) at the start of "
            "each rank, before the model or the process group is made, and move the model to "
            "that device (launch with torchrun, accelerate or deepspeed, which set LOCAL_RANK).",
        )]  # fmt: skip
    if kind == "fragmentation":
        var = fig.setting or "PYTORCH_CUDA_ALLOC_CONF"
        return [Solution(
            text=f"Set {var}=expandable_segments:True in the environment before torch is "
            f"imported (the line that starts the job, or os.environ at the top of the script): "
            f"{b(fig.reserved_unallocated or 0)} is reserved by PyTorch but unallocated, more "
            f"than the {b(fig.requested)} asked for, in pieces too small for it.",
            settings={var: "expandable_segments:True"},
        )] if not fig.older else [Solution(
            text=f"{b(fig.reserved_unallocated or 0)} is reserved by PyTorch but unallocated, "
            f"more than the {b(fig.requested)} asked for: set PYTORCH_CUDA_ALLOC_CONF="
            "max_split_size_mb:<MB> before torch starts, as this release's message advises, so "
            "that large cached blocks are not split.",
        )]  # fmt: skip
    if kind == "allocator limit":
        return [Solution(
            text=f"The card had {b(fig.free or 0)} free, more than the {b(fig.requested)} asked "
            "for: the caching allocator refused the request without the card running out. A "
            "limit set with torch.cuda.set_per_process_memory_fraction refuses any allocation "
            "past its share without asking the card: raise it or remove it. Without one, memory "
            "came free between the failure and the message (another process's, most often): "
            "run again and watch nvidia-smi.",
        )]  # fmt: skip
    if kind == "single request":
        room = (fig.total or 0) - fig.others_bytes
        return [Solution(
            text=f"One tensor of {b(fig.requested)} was asked for, more than this card could ever "
            f"give this process ({b(room)}): shrink that tensor (its batch, sequence length or "
            "resolution) or split the work across devices; no allocator setting and no freed "
            "memory can hold it.",
        )]  # fmt: skip
    if kind == "weights":
        return _weights_solutions(fig, model, batch, moving=moving)
    if kind == "generation" and generation is not None:
        return _generation_solutions(fig, generation)
    if kind == "growing" and growing is not None:
        return [Solution(
            text=f"{growing.name} adds up each step's loss as a tensor, so it keeps every step's "
            f"graph, and the activations saved in it, alive until the card is full: add the "
            f"number instead ({growing.after.strip()}, at {growing.file}:{growing.line}).",
        )]  # fmt: skip
    return _activation_solutions(fig, model, batch)


def generation_fix(fig: Figures, gen: Generation) -> dict[str, int]:
    """The one change of ``generate()``'s figures whose cache fits, with :data:`HEADROOM` kept.

    Fewer beams first (the same prompts and lengths), then fewer prompts at a time (the same
    outputs: ``prompts_at_a_time``, not a keyword), then fewer new tokens. The cache's peak
    (:attr:`Generation.growth`) must fit. Empty when the whole run's cache already fits what it
    had, or nothing smaller does.
    """
    room = gen.room(fig)
    if room is None:
        return {}
    limit = HEADROOM * room / gen.growth
    if gen.cache() <= limit:
        return {}
    tokens = gen.prompt + gen.new_tokens
    beams = math.floor(limit / (gen.per_token * gen.batch * tokens))
    if gen.beams > 1 and beams >= 1:
        return {"num_beams": min(beams, gen.beams - 1)}
    prompts = math.floor(limit / (gen.per_token * gen.beams * tokens))
    if gen.batch > 1 and prompts >= 1:
        return {"prompts_at_a_time": min(prompts, gen.batch - 1)}
    new = math.floor(limit / (gen.per_token * gen.batch * gen.beams)) - gen.prompt
    return {"max_new_tokens": new} if 1 <= new < gen.new_tokens else {}


def _generation_solutions(fig: Figures, gen: Generation) -> list[Solution]:
    b = format_bytes
    room = gen.room(fig) or 0
    prompts = "prompt" if gen.batch == 1 else "prompts"
    beams = "beam" if gen.beams == 1 else "beams"
    text = (
        f"generate() ran out as its KV cache grew. The cache keeps {b(gen.per_token)} for each "
        f"token of each sequence ({gen.formula}, from the model's config): {gen.batch} {prompts} "
        f"x {gen.beams} {beams} x ({gen.prompt} + {gen.new_tokens} tokens) = {b(gen.cache())} "
        f"for the whole run, and about {b(room)} can hold it (the cache when memory ran out, "
        "and what was free or reserved)."
    )
    fix = generation_fix(fig, gen)
    settings: dict[str, object] = {}
    if "num_beams" in fix:
        n = fix["num_beams"]
        text += f" Lower num_beams from {gen.beams} to {n}: {b(gen.cache(beams=n))}."
        settings = dict(fix)
    elif "prompts_at_a_time" in fix:
        n = fix["prompts_at_a_time"]
        text += (
            f" Generate {n} prompts at a time instead of {gen.batch}: "
            f"{b(gen.cache(batch=n))}, and the same outputs."
        )
    elif "max_new_tokens" in fix:
        n = fix["max_new_tokens"]
        text += f" Lower max_new_tokens from {gen.new_tokens} to {n}: {b(gen.cache(new_tokens=n))}."
        settings = dict(fix)
    if fix:
        text += (
            f" An estimate: the cache grows one layer's tensor at a time (a peak of "
            f"{gen.growth:.3g}x its size), and logits and activations need room beside it, so "
            f"it keeps {round((1 - HEADROOM) * 100)}% headroom."
        )
    if gen.offloaded:
        text += (
            ' Or keep the cache off the card: generate(..., cache_implementation="offloaded") '
            "(this transformers accepts it) holds one layer's cache on the GPU at a time, "
            "slower."
        )
    return [Solution(text=text, settings=settings, estimate=bool(fix))]


#: What the engine was doing when the card ran out, by the functions of its frames.
_PHASE_FUNCTIONS = {
    "capturing CUDA graphs": frozenset({"capture_model", "_capture_cudagraphs", "capture"}),
    "profiling": frozenset({
        "profile_run", "_dummy_run", "_dummy_sampler_run", "determine_num_available_blocks",
        "determine_available_memory",
    }),
}  # fmt: skip
# vLLM's log lines: V0's "Capturing cudagraphs for decoding." (worker/model_runner.py), V1's
# progress bars "Capturing CUDA graph shapes" and "Capturing CUDA graphs (...)", both ended by
# "Graph capturing finished in N secs".
_CAPTURING = lazy_compile(r"Capturing (?:cudagraphs for decoding|CUDA graph)")
_CAPTURED = lazy_compile(r"Graph capturing finished in")


def serving_phase(evidence: Evidence) -> str | None:
    """``"capturing CUDA graphs"``, ``"profiling"``, ``"sampling"`` or None (not known).

    From the traceback's functions and files (the innermost that tells), else from vLLM's log
    lines in the paste: a capture started and not finished.
    """
    for info in evidence.infos:
        for frame in reversed(info.frames):  # innermost first
            path = frame.file.replace("\\", "/")
            if path.endswith("torch/cuda/graphs.py"):
                return "capturing CUDA graphs"
            for phase, functions in _PHASE_FUNCTIONS.items():
                if frame.function in functions and "vllm/" in path:
                    return phase
            if "vllm/" in path and ("/sample/" in path or path.endswith("/sampler.py")):
                return "sampling"
    text = evidence.text or ""
    started = [m.end() for m in _CAPTURING.finditer(text)]
    if started and not _CAPTURED.search(text, started[-1]):
        return "capturing CUDA graphs"
    return None


def _serving_solutions(fig: Figures, phase: str | None) -> list[Solution]:
    """A serving engine's fix is its own settings: the share of the card it takes."""
    b = format_bytes
    if fig.has_others and fig.total:
        # gpu_memory_utilization is a share of the whole card, not of what is free.
        share = math.floor((fig.total - fig.others_bytes) / fig.total * 100 - 1) / 100
        if share > 0:
            return [Solution(
                text=f"Set gpu_memory_utilization to at most {share:.2f} (CLI "
                f"--gpu-memory-utilization): other processes hold {b(fig.others_bytes)} of the "
                f"{b(fig.total)} card, and vLLM takes its share of the whole card, not of what "
                "is free; or stop them.",
                settings={"gpu_memory_utilization": share},
            )]  # fmt: skip
    drop = (
        math.ceil((fig.shortfall or fig.requested) / fig.total * 100) / 100 if fig.total else None
    )
    lower = (
        f"lower gpu_memory_utilization by at least {drop:.2f} (the request less what was free, "
        "as a share of the card)"
        if drop
        else "lower gpu_memory_utilization"
    )
    if phase == "capturing CUDA graphs":
        return [Solution(
            text="It ran out capturing CUDA graphs, after the KV cache had taken its share: set "
            "enforce_eager=True (CLI --enforce-eager) to run without them, at some speed; or "
            f"keep them and {lower}, so that their memory stays outside the cache, or lower "
            "max_num_seqs (vLLM captures a graph for each batch size up to it).",
            settings={"enforce_eager": True},
        )]  # fmt: skip
    if phase == "profiling":
        return [Solution(
            text="It ran out in the profiling run, one batch of max_num_batched_tokens tokens "
            "(and up to max_num_seqs sequences) before the KV cache is sized: lower "
            f"max_num_batched_tokens and max_num_seqs, or {lower}.",
        )]  # fmt: skip
    if phase == "sampling":
        return [Solution(
            text="It ran out sampling: the logits of a step are max_num_seqs sequences by the "
            f"vocabulary, so lower max_num_seqs, or {lower} to leave them room.",
        )]  # fmt: skip
    text = (
        f"The engine's memory outside its KV cache (activations, sampling, CUDA graphs) "
        f"outgrew what its settings left: {lower}, or lower max_num_seqs and "
        "max_num_batched_tokens; enforce_eager=True when it ran out capturing CUDA graphs."
    )
    return [Solution(text=text)]


def _dtype_keyword() -> str:
    """``from_pretrained``'s keyword for the dtype: ``dtype`` from transformers 4.56.

    Before it, ``torch_dtype`` (the released wheels: modeling_utils.py pops ``dtype`` from its
    keywords in 4.56.0, not in 4.55.4); the installed release's metadata says which (``dtype``
    when it cannot be read).
    """
    from errkb._dists import version

    installed = version("transformers")
    parts = [int(p) for p in (installed or "").split(".")[:2] if p.isdigit()]
    return "torch_dtype" if len(parts) == 2 and tuple(parts) < (4, 56) else "dtype"


def _half_the_weights(model: ModelMemory, room: int) -> Solution:
    """The model ran out of the card on its way there: its fp32 weights, halved in bf16."""
    b = format_bytes
    half = model.all_weights // 2
    text = (
        f"The card ran out while the model was being moved onto it: its weights are "
        f"{b(model.all_weights)} in fp32"
    )
    if half < HEADROOM * room:
        key = _dtype_keyword()
        return Solution(
            text=text + f", {b(half)} in bf16, which fits the {b(room)} this card has with room "
            f"to run: load them so ({key}='bfloat16' in from_pretrained), or let "
            "device_map='auto' (accelerate) offload what does not fit.",
            settings={key: "bfloat16"},
        )
    return Solution(
        text=text + f", and even in bf16 ({b(half)}) more than the {b(room)} this card has: "
        "load them in 8 or 4 bits, or let device_map='auto' (accelerate) offload what does "
        "not fit to the CPU.",
    )


#: The 8-bit AdamW of bitsandbytes, as ``TrainingArguments(optim=...)`` names it.
EIGHT_BIT = "adamw_bnb_8bit"


def _weights_solutions(
    fig: Figures, model: ModelMemory | None, batch: Batch | None = None, *, moving: bool = False
) -> list[Solution]:
    b = format_bytes
    room = (fig.total or 0) - fig.others_bytes
    if moving and model is not None and model.wide and model.all_weights:
        return [_half_the_weights(model, room)]
    if model is None or moving:
        return [Solution(
            text="The card ran out while the model's weights were being moved onto it: load "
            "them in bf16 or 8/4-bit, or let device_map='auto' (accelerate) offload what does "
            "not fit to the CPU.",
        )]  # fmt: skip
    parts = (
        f"weights {b(model.weights)} + gradients {b(model.gradients)} + optimizer state "
        f"{b(model.optimizer_state)} = {b(model.fixed)}, more than the {b(room)} this card has"
    )
    eight_bit = model.weights + model.gradients + model.optimizer_state // 4
    options = [
        ("an 8-bit optimizer (bitsandbytes' AdamW8bit): a quarter of the optimizer state",
         eight_bit),
        ("freeze the base model and train adapters (LoRA): about the weights alone",
         model.weights),
    ]  # fmt: skip
    if model.wide:
        options.append(
            ("bf16 weights and gradients: half of them",
             (model.weights + model.gradients) // 2 + model.optimizer_state)
        )  # fmt: skip
    fits = [f"{what}: {b(total)}" for what, total in options if total < room]
    text = f"The model alone does not fit: {parts}."
    text += (
        " What fits: " + "; ".join(fits) + ". Activations need room on top."
        if fits
        else " None of LoRA, an 8-bit optimizer or bf16 brings it under the card: offload "
        "(device_map, DeepSpeed ZeRO) or a smaller model."
    )
    settings: dict[str, object] = {}
    eight_bit_named = batch is not None and batch.optim is not None and "8bit" in batch.optim
    if batch is not None and batch.optim and not eight_bit_named and eight_bit < HEADROOM * room:
        # The arguments name the optimizer: the 8-bit one is a setting of the same call.
        settings = {"optim": EIGHT_BIT}
        text += (
            f" The 8-bit optimizer is one setting of the training arguments: optim={EIGHT_BIT!r} "
            f"instead of {batch.optim!r} (it needs bitsandbytes)."
        )
    return [Solution(text=text, settings=settings)]


def _activation_solutions(
    fig: Figures, model: ModelMemory | None, batch: Batch | None
) -> list[Solution]:
    b = format_bytes
    fixed = model.fixed if model is not None else fig.allocated or 0
    basis = (
        "the model's weights, gradients and optimizer state from the frames"
        if model is not None
        else "all that was allocated taken as fixed, the cautious reading"
    )
    if batch is not None:
        fitted = fitting_batch(fig, batch, fixed)
        if fitted is not None:
            micro, steps = fitted
            text = f"Lower {batch.size_name} from {batch.size} to {micro}"
            settings: dict[str, object] = {batch.size_name: micro}
            if batch.accumulation_name:
                text += f" and raise {batch.accumulation_name} from {batch.accumulation} to {steps}"
                settings[batch.accumulation_name] = steps
                text += f": the effective batch stays {batch.size * batch.accumulation}."
            else:
                text += f" and accumulate gradients over {steps} steps to keep the batch of {batch.size}."
            text += (
                f" An estimate ({basis}; the message's figures are a lower bound of the step's "
                f"peak, so it keeps {round((1 - HEADROOM) * 100)}% headroom); gradient "
                "checkpointing saves more."
            )
            return [Solution(text=text, settings=settings, estimate=True)]
    share = activation_share(fig, fixed)
    text = (
        f"This step's tensors need more than the card has left: {b(fig.requested)} more was "
        f"asked for with {b(fig.free or 0)} free."
    )
    if share is not None and share < 1:
        text += (
            f" Lower the batch size (or sequence length) to about {math.floor(share * 100)}% of "
            f"today's, an estimate ({basis}), and keep the effective batch with gradient "
            "accumulation; or turn on gradient checkpointing."
        )
    else:
        text += " Lower the batch size, keeping the effective batch with gradient accumulation, or turn on gradient checkpointing."
    return [Solution(text=text, estimate=share is not None)]


def _message(evidence: Evidence) -> str | None:
    return next(
        (
            i.message
            for i in evidence.infos
            if "out of memory" in i.message and "Tried to" in i.message
        ),
        None,
    )


@advisor(CONTRACT)
def advise(match: Match, evidence: Evidence) -> Advice | None:
    """The situation the figures show, its fix first, and the figures as facts."""
    fig = figures_of(match.captures, _message(evidence))
    if fig is None or fig.free is None:
        return None  # the request alone decides nothing: the record's own solutions stand
    fig = _with_probe(fig, evidence)
    model = _model_memory(
        evidence, frozenset({fig.device}) if fig.device == "mps" else CARD_DEVICES
    )
    batch = _batch(evidence)
    generation = _generation(evidence)
    growing = None if generation is not None else _growing(evidence)
    moving = _moving(evidence)
    kind = situation(
        fig,
        model,
        moving=moving,
        where=_where(evidence),
        generation=generation,
        growing=growing,
    )
    facts = _facts(fig, model, batch, generation)
    facts.append(Fact(name="situation", value=kind, source="computed"))
    phase = serving_phase(evidence) if kind == "serving engine" else None
    if phase is not None:
        facts.append(Fact(name="engine_phase", value=phase, source="computed"))
    found = _solutions(kind, fig, model, batch, generation, growing, moving=moving, phase=phase)
    example = _rewritten(found[0], evidence) or _engine(found[0], kind, evidence)
    example = example or _example(found[0])
    if kind == "growing" and growing is not None:
        example = ExampleFix(
            before=growing.text,
            after=growing.after,
            location=f"{growing.file}:{growing.line}",
            note="the number, not the tensor: its graph is freed with each step",
        )
    return Advice(
        solutions=tuple(found),
        facts=tuple(facts),
        example_fix=example,
        # The record's example lowers a batch size: beside another fix it would contradict it.
        withhold_example=example is None and kind != "activations",
    )


_GPU_INDEX = lazy_compile(r"\bGPU (?P<index>\d+)\b")


def _with_probe(fig: Figures, evidence: Evidence) -> Figures:
    """The figures, with other processes as the GPU probe measured them, if the message has none.

    Only for a live exception (a pasted one ran on someone else's machine), on the card the
    message names (or the only one).
    """
    if fig.others or fig.device != "cuda" or evidence.text is not None:
        return fig
    if not any(True for _ in evidence.frames()):
        return fig
    devices = evidence.gpus().devices
    message = _message(evidence) or ""
    named = _GPU_INDEX.search(message)
    index = int(named["index"]) if named else 0 if len(devices) == 1 else None
    device = next((d for d in devices if d.index == index), None)
    if device is None or not device.other_processes_bytes:
        return fig
    if device.other_processes:  # NVML named them
        return attrs.evolve(fig, others=device.other_processes, others_from="gpu")
    return attrs.evolve(fig, others_measured=device.other_processes_bytes)


#: The calls whose keywords hold a training run's batch: what a fix rewrites.
BATCH_CALLS = frozenset({"TrainingArguments", "Seq2SeqTrainingArguments", "SFTConfig"})
#: The calls that take each setting a fix changes, by the setting's name.
HOLDERS = {
    "per_device_train_batch_size": BATCH_CALLS,
    "gradient_accumulation_steps": BATCH_CALLS,
    "optim": BATCH_CALLS,
    "batch_size": frozenset({"DataLoader"}),
    "num_beams": frozenset({"generate"}),
    "max_new_tokens": frozenset({"generate"}),
    "dtype": frozenset({"from_pretrained"}),
    "torch_dtype": frozenset({"from_pretrained"}),
}


def _rewritten(first: Solution, evidence: Evidence) -> ExampleFix | None:
    """The first solution's settings written into the user's own call, when it is found."""
    holders = {HOLDERS.get(key) for key in first.settings}
    names = holders.pop() if len(holders) == 1 else None
    if names is None:
        return None  # no settings, settings no one call takes, or settings of two calls
    from errkb.advisors._callsite import rewrite_named_call
    from errkb.advisors._fix import rewritten

    for info in evidence.infos:
        rewrite = rewrite_named_call(info.frames, names, first.settings)
        if rewrite is not None:
            return rewritten(rewrite)
    return None


def _engine(first: Solution, kind: str, evidence: Evidence) -> ExampleFix | None:
    """A serving engine's settings written where this run gave the engine its settings."""
    if kind != "serving engine" or not first.settings:
        return None
    from errkb.advisors.kv_cache._example import engine_example

    return engine_example(evidence, first.settings)


def _example(first: Solution) -> ExampleFix | None:
    """The first solution's settings shown as they are set, when it has any to show."""
    settings = {k: v for k, v in first.settings.items() if k != "stop_pids"}
    if not settings:
        return None
    variable = next((k for k in settings if k.startswith("PYTORCH_")), None)
    if variable is not None:
        value = settings[variable]
        return ExampleFix(
            before=None,
            after=f"{variable}={value} python train.py\n\n# or at the very top of the script, "
            f"before torch is imported:\nimport os\nos.environ[{variable!r}] = {value!r}\n"
            "import torch",
            note="an illustration: set it where your job starts",
        )
    if "gpu_memory_utilization" in settings:
        share = settings["gpu_memory_utilization"]
        return ExampleFix(
            before=None,
            after=f"LLM(model=..., gpu_memory_utilization={share})\n\n# or on the command line:\n"
            f"vllm serve MODEL --gpu-memory-utilization {share}",
            note="an illustration: set it where your engine is made",
        )
    holder = {
        "per_device_train_batch_size": "TrainingArguments",
        "optim": "TrainingArguments",
        "batch_size": "DataLoader",
        "num_beams": "model.generate",
        "max_new_tokens": "model.generate",
        "dtype": "AutoModel.from_pretrained",
        "torch_dtype": "AutoModel.from_pretrained",
    }.get(next(iter(settings)))
    if holder is None:
        return None
    args = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    return ExampleFix(
        before=None,
        after=f"{holder}(..., {args})",
        note="an illustration: change these in the call that sets them",
    )
