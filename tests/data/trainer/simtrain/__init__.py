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


class Trainer:
    """Trains one step of the simulated workload with ``args``' batch."""

    def __init__(self, args) -> None:
        self.args = args

    def train(self) -> None:
        batch = self.args.per_device_train_batch_size
        steps = self.args.gradient_accumulation_steps
        total, context = _env("SIM_TOTAL"), _env("SIM_CONTEXT", 512 << 20)
        others = [
            (int(pid), int(n))
            for pid, n in (p.split(":") for p in os.environ.get("SIM_OTHERS", "").split(",") if p)
        ]
        expandable = "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        unused = 0 if expandable else _env("SIM_UNUSED")
        layers = _env("SIM_LAYERS", 32)
        chunk = _env("SIM_PER_SAMPLE") * batch // layers
        allocated = _env("SIM_FIXED")
        held = sum(n for _, n in others)
        for _ in range(layers):
            in_use = allocated + unused + context
            free = total - held - in_use
            if chunk > free:
                raise torch.OutOfMemoryError(
                    _message(chunk, total, free, in_use, allocated, unused, others)
                )
            allocated += chunk
        print(f"trained: effective batch {batch * steps}")


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
