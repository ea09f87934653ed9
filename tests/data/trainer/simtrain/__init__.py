"""A stand-in trainer on a simulated card: torch's out-of-memory message, nothing of errkb's.

It trains one step of a workload whose memory is plain arithmetic: the fixed part (weights,
gradients, optimizer state) and, for each layer, the activations of the micro-batch. When an
allocation does not fit the card it raises ``torch.OutOfMemoryError`` with the message torch's
caching allocator writes (2.1 and later: c10/cuda/CUDACachingAllocator.cpp, its sizes as
``format_size`` prints them). The card and the workload come from the environment:

- ``SIM_TOTAL``: the card's bytes; ``SIM_CONTEXT``: what the CUDA context holds (not PyTorch's)
- ``SIM_FIXED``: weights, gradients and optimizer state; ``SIM_PER_SAMPLE``: one sample's
  activations over all layers; ``SIM_LAYERS``: how many allocations they come in
- ``SIM_UNUSED``: bytes the allocator keeps reserved but unallocated, in pieces too small to use
  unless ``PYTORCH_CUDA_ALLOC_CONF`` holds ``expandable_segments:True``
- ``SIM_OTHERS``: ``pid:bytes,...`` other processes on the card

A step that fits prints the effective batch: micro-batch x gradient accumulation.

Beside the Trainer, the same card serves:

- a model on the card (:func:`model_on_card`): a real ``torch.nn.Module`` whose parameters are
  torch's fake tensors on ``cuda`` (no memory, real shapes and dtypes); the Trainer then
  counts its weights, gradients and the optimizer state ``args.optim`` keeps (8 bytes a
  trainable parameter for AdamW, 2 for an 8-bit one) instead of ``SIM_FIXED``;
- :func:`fit`: a plain loop over a real ``DataLoader``, one step of its first batch;
- :func:`eval_step`: one evaluation step's loss, a real autograd graph that saves a tensor
  standing for ``SIM_PER_STEP`` bytes of activations for as long as the graph lives;
- :func:`on_card`: a real transformers model whose KV cache, during ``generate()``, is counted
  tensor by tensor against the card (``SIM_FIXED`` for its weights);
- :func:`to_card`: a model moved onto the card through torch's own ``Module._apply``, each
  parameter counted as it arrives (it becomes a fake tensor on ``cuda``).
"""

from __future__ import annotations

import os

import torch


def format_size(size: int) -> str:
    """Sizes as torch's allocator prints them."""
    if size <= 1024:
        return f"{size} bytes"
    if size <= 1048576:
        return f"{size / 1024:.2f} KiB"
    if size <= 1073741824:
        return f"{size / 1048576:.2f} MiB"
    return f"{size / 1073741824:.2f} GiB"


def _env(name: str, default: int = 0) -> int:
    return int(os.environ.get(name, default))


class Card:
    """The simulated card: what it holds, and torch's error when an allocation does not fit."""

    def __init__(self) -> None:
        self.total, self.context = _env("SIM_TOTAL"), _env("SIM_CONTEXT", 512 << 20)
        self.others = [
            (int(pid), int(n))
            for pid, n in (p.split(":") for p in os.environ.get("SIM_OTHERS", "").split(",") if p)
        ]
        expandable = "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        self.unused = 0 if expandable else _env("SIM_UNUSED")
        self.allocated = 0

    def allocate(self, size: int) -> None:
        in_use = self.allocated + self.unused + self.context
        free = self.total - sum(n for _, n in self.others) - in_use
        if size > free:
            raise torch.OutOfMemoryError(
                _message(size, self.total, free, in_use, self.allocated, self.unused, self.others)
            )
        self.allocated += size

    def activations(self, batch: int) -> None:
        """One step's activations for ``batch`` samples, layer by layer."""
        layers = _env("SIM_LAYERS", 32)
        chunk = _env("SIM_PER_SAMPLE") * batch // layers
        for _ in range(layers):
            self.allocate(chunk)


class Trainer:
    """Trains one step of the simulated workload with ``args``' batch (and ``model``'s memory)."""

    def __init__(self, args, model=None) -> None:
        self.args = args
        self.model = model
        eight_bit = "8bit" in str(getattr(args.optim, "value", args.optim))
        # A torch optimizer exists before its first step; an 8-bit one needs bitsandbytes.
        self.optimizer = (
            torch.optim.AdamW(model.parameters()) if model is not None and not eight_bit else None
        )
        self.state_bytes = 2 if eight_bit else 8

    def train(self) -> None:
        batch = self.args.per_device_train_batch_size
        steps = self.args.gradient_accumulation_steps
        card = Card()
        if self.model is None:
            card.allocate(_env("SIM_FIXED"))
        else:
            params = list(self.model.parameters())
            for p in params:
                card.allocate(p.numel() * p.element_size())
            for p in params:  # the first step: gradients, then the optimizer's state
                card.allocate(p.numel() * p.element_size())
            for p in params:
                card.allocate(p.numel() * self.state_bytes)
        card.activations(batch)
        print(f"trained: effective batch {batch * steps}")


def model_on_card(layers: int, width: int) -> torch.nn.Module:
    """``layers`` fp32 linear layers of ``width`` x ``width``, their parameters on the card."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    model = torch.nn.Sequential(
        *(torch.nn.Linear(width, width, bias=False, device="meta") for _ in range(layers))
    )
    mode = FakeTensorMode()
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is None:
                continue
            with mode:
                placed = torch.empty(param.shape, dtype=param.dtype, device="cuda")
            module._parameters[name] = torch.nn.Parameter(placed)
    return model


def fit(loader) -> None:
    """One training step of the loader's first batch on the card."""
    card = Card()
    card.allocate(_env("SIM_FIXED"))
    for (features,) in loader:
        card.activations(features.shape[0])
        print(f"trained: batch {features.shape[0]}")
        return


#: The evaluation loop's card, and a weak reference to each step's activations.
_EVAL: dict = {"card": None, "steps": []}


def eval_step(weight: torch.Tensor) -> torch.Tensor:
    """One evaluation step's loss: its graph holds this step's activations until it is freed."""
    import gc
    import weakref

    if _EVAL["card"] is None:
        _EVAL["card"] = Card()
    card = _EVAL["card"]
    gc.collect()
    _EVAL["steps"] = [ref for ref in _EVAL["steps"] if ref() is not None]
    card.allocated = _env("SIM_FIXED") + len(_EVAL["steps"]) * _env("SIM_PER_STEP")
    card.allocate(_env("SIM_PER_STEP"))
    activations = torch.ones(weight.shape)
    _EVAL["steps"].append(weakref.ref(activations))
    return (activations * weight).sum()  # the product saves the activations for backward


def on_card(model):
    """Count ``model``'s KV cache against the card after each forward of ``generate()``."""

    def check(module, args, kwargs, output):
        cache = getattr(output, "past_key_values", None)
        if cache is None:
            return output
        # As the cache's torch.cat does: each tensor grown by one token in turn, while the
        # tensors not grown yet still hold the step before's length.
        tensors = [t for layer in cache.layers for t in (layer.keys, layer.values)]
        sizes = [t.numel() * t.element_size() for t in tensors]
        length = tensors[0].shape[-2]
        before = [size * (length - 1) // length for size in sizes]
        card = Card()
        card.allocate(_env("SIM_FIXED") + sum(before))
        for size, old in zip(sizes, before):
            card.allocate(size)
            card.allocated -= old  # the shorter tensor is freed
        return output

    model.register_forward_hook(check, with_kwargs=True)
    return model


def _message(request, total, free, in_use, allocated, unused, others) -> str:
    processes = "".join(f"Process {pid} has {format_size(n)} memory in use. " for pid, n in others)
    return (
        f"CUDA out of memory. Tried to allocate {format_size(request)}. GPU 0 has a total "
        f"capacity of {format_size(total)} of which {format_size(max(free, 0))} is free. "
        f"{processes}Including non-PyTorch memory, this process has {format_size(in_use)} memory "
        f"in use. Of the allocated memory {format_size(allocated)} is allocated by PyTorch, and "
        f"{format_size(unused)} is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True "
        "to avoid fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )


def tiny_llm():
    """A real two-layer Llama of transformers, random weights, that never stops early."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        eos_token_id=None,
        pad_token_id=0,
    )
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    return model


def to_card(model):
    """Move ``model``'s parameters onto the card as ``model.cuda()`` would, one by one."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    card, mode = Card(), FakeTensorMode()

    def place(tensor):
        card.allocate(tensor.numel() * tensor.element_size())
        with mode:
            return torch.empty(tensor.shape, dtype=tensor.dtype, device="cuda")

    return model._apply(place)
