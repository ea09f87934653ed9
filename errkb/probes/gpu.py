"""The GPU probe: what torch sees of the visible CUDA devices.

torch is never imported when it is not installed, and the already imported module is used
when there is one. The query runs in a bounded thread (see :func:`errkb.probes.run_bounded`).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import TYPE_CHECKING, Any

from errkb.probes import GpuDevice, GpuReading, run_bounded

if TYPE_CHECKING:
    from errkb.evidence import Evidence

__all__ = ["probe_gpus"]


def _torch() -> Any:
    loaded = sys.modules.get("torch")
    if loaded is not None:
        return loaded
    if importlib.util.find_spec("torch") is None:
        return None
    return importlib.import_module("torch")


def _measure() -> GpuReading:
    torch = _torch()
    if torch is None:
        return GpuReading(error="torch is not installed: install errkb[gpu] to measure the GPU")
    cuda = torch.cuda
    if not cuda.is_available():
        return GpuReading(
            error="torch sees no CUDA device (a CPU build, no driver, or none visible)"
        )
    others = _other_processes()
    devices = []
    for index in range(cuda.device_count()):
        props = cuda.get_device_properties(index)
        free, total = cuda.mem_get_info(index)
        devices.append(
            GpuDevice(
                index=index,
                name=str(props.name),
                total_bytes=int(total),
                free_bytes=int(free),
                allocated_bytes=int(cuda.memory_allocated(index)),
                reserved_bytes=int(cuda.memory_reserved(index)),
                capability=(int(props.major), int(props.minor)),
                other_processes_bytes=others.get(index),
            )
        )
    return GpuReading(devices=tuple(devices))


def _other_processes() -> dict[int, int]:
    """Bytes held on each device by other processes, where NVML can tell (nvidia-ml-py)."""
    if importlib.util.find_spec("pynvml") is None:
        return {}
    try:
        import pynvml

        pynvml.nvmlInit()
        out: dict[int, int] = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            out[index] = sum(p.usedGpuMemory or 0 for p in procs if p.pid != os.getpid())
    except Exception:
        return {}
    return out


def probe_gpus(timeout: float = 5.0) -> GpuReading:
    """The visible GPUs, measured now; never raises, never waits past ``timeout`` seconds."""
    reading, reason = run_bounded(_measure, timeout, "the GPU query")
    return reading if reading is not None else GpuReading(error=reason)


def probe(evidence: Evidence, timeout: float) -> GpuReading:
    """The ``gpu`` probe: the GPUs now, or why not (probes off: nothing is measured)."""
    if not evidence.options.probes:
        return GpuReading(error="probes are off (--no-probes)")
    return probe_gpus(timeout)
