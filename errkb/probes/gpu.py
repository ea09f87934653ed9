"""The GPU probe: the visible CUDA devices, measured through torch or NVML.

A program that imported torch is measured through it (its own allocations included). A program
that never imported torch is not made to import it at exit (over a second and 200 MB): its GPUs
are read through NVML (``libnvidia-ml``, the NVIDIA driver's management library, loaded with
ctypes: no package needed), honouring ``CUDA_VISIBLE_DEVICES``; without NVML they are left
unmeasured, and the diagnosis says so. Only where importing torch is allowed
(``Options(import_torch=True)``, as the command line sets it) is it imported to measure. Each
query runs in a bounded thread (see :func:`errkb.probes.run_bounded`).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
from typing import TYPE_CHECKING, Any

from errkb._attrs import attrs
from errkb.probes import GpuDevice, GpuReading, run_bounded

if TYPE_CHECKING:
    from errkb.evidence import Evidence

__all__ = ["GpuProcess", "NvmlReading", "probe_gpus", "read_nvml"]


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
                peak_reserved_bytes=int(cuda.max_memory_reserved(index)),
                capability=(int(props.major), int(props.minor)),
                other_processes_bytes=(
                    sum(n for _, n in others[index]) if index in others else None
                ),
                other_processes=tuple(others.get(index, ())),
            )
        )
    return GpuReading(devices=tuple(devices))


def _other_processes() -> dict[int, list[tuple[int, int]]]:
    """The other processes holding memory on each device, ``(pid, bytes)``, where NVML tells.

    Read through the driver's library with ctypes (:func:`read_nvml`), else nvidia-ml-py; a
    process whose memory NVML cannot tell counts nothing.
    """
    me = os.getpid()
    reading = read_nvml()
    if reading is not None:
        out: dict[int, list[tuple[int, int]]] = {d.index: [] for d in reading.devices}
        for proc in reading.processes:
            if proc.pid != me:
                out.setdefault(proc.device, []).append((proc.pid, proc.used_bytes or 0))
        return out
    if importlib.util.find_spec("pynvml") is None:
        return {}
    try:
        import pynvml

        pynvml.nvmlInit()
        found: dict[int, list[tuple[int, int]]] = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            procs = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
            found[index] = [(p.pid, p.usedGpuMemory or 0) for p in procs if p.pid != me]
    except Exception:
        return {}
    return found


_NVML_NAMES = ("libnvidia-ml.so.1", "libnvidia-ml.so", "nvml.dll")
# Where a loaded NVIDIA driver shows on Linux: its control device and its /proc folder, and
# WSL 2's GPU device (its driver lives on the Windows side).
_DRIVER_NODES = ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/dxg")


def _no_driver() -> bool:
    """Whether NVML certainly cannot answer here: Linux, with no NVIDIA driver loaded.

    NVML only talks to the kernel driver; without one, loading the library (ctypes, and the
    loader's 90 tries through its search folders) would end in a failed initialisation. A
    library named by path, or put on ``LD_LIBRARY_PATH`` (a stand-in, a driver's libraries
    moved), is still tried.
    """
    from pathlib import Path

    if not sys.platform.startswith("linux") or any(Path(n).exists() for n in _DRIVER_NODES):
        return False
    folders = [f for f in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if f]
    for name in _NVML_NAMES:
        if os.sep in name and Path(name).exists():
            return False
        if any(Path(f, name).exists() for f in folders):
            return False
    return True


@functools.cache
def _structures() -> tuple[Any, Any]:
    """NVML's memory and process records, as ctypes structures (ctypes imported only here)."""
    import ctypes

    class Memory(ctypes.Structure):
        _fields_ = (
            ("total", ctypes.c_ulonglong),
            ("free", ctypes.c_ulonglong),
            ("used", ctypes.c_ulonglong),
        )

    class ProcessInfo(ctypes.Structure):
        # nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v3 fills it.
        _fields_ = (
            ("pid", ctypes.c_uint),
            ("usedGpuMemory", ctypes.c_ulonglong),
            ("gpuInstanceId", ctypes.c_uint),
            ("computeInstanceId", ctypes.c_uint),
        )

    return Memory, ProcessInfo


def _load(name: str) -> Any:
    import ctypes

    try:
        return ctypes.CDLL(name)
    except OSError:
        return None


def _nvml() -> GpuReading | None:
    """The visible GPUs as NVML reads them; None when NVML is not there or cannot tell."""
    reading = read_nvml(details=False)
    return None if reading is None else GpuReading(devices=reading.devices)


@attrs.frozen(kw_only=True)
class GpuProcess:
    """A process that holds memory on a visible GPU (NVML's compute processes)."""

    device: int
    pid: int
    used_bytes: int | None
    name: str | None = None


@attrs.frozen(kw_only=True)
class NvmlReading:
    """What the NVIDIA driver says through NVML: its version, the GPUs, who holds their memory.

    ``cuda_driver_version`` is the newest CUDA version the driver supports, as NVML encodes
    it (``12020`` for 12.2); ``library`` names the NVML library that answered.
    """

    library: str
    driver_version: str | None
    cuda_driver_version: int | None
    devices: tuple[GpuDevice, ...]
    processes: tuple[GpuProcess, ...] = ()


#: NVML_ERROR_INSUFFICIENT_SIZE: the buffer handed in holds fewer entries than there are.
_INSUFFICIENT_SIZE = 7


def _nvml_library() -> tuple[Any, str] | None:
    for name in _NVML_NAMES:
        lib = _load(name)
        if lib is not None:
            return lib, name
    return None


def read_nvml(*, details: bool = True) -> NvmlReading | None:
    """The driver's version, the visible GPUs and (with ``details``) the processes on them.

    None when NVML is not there or cannot tell. Never imports torch; the caller bounds the
    time (:func:`errkb.probes.run_bounded`).
    """
    found = None if _no_driver() else _nvml_library()
    if found is None:
        return None
    import ctypes

    memory_record, _ = _structures()
    lib, library = found
    if lib.nvmlInit_v2() != 0:
        return None
    try:
        count = ctypes.c_uint()
        if lib.nvmlDeviceGetCount_v2(ctypes.byref(count)) != 0:
            return None
        handles = []
        for index in range(count.value):
            handle = ctypes.c_void_p()
            if lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0:
                return None
            handles.append(handle)
        visible = _visible(lib, handles)
        if visible is None:
            return None
        devices = []
        for position, handle in enumerate(visible):
            memory, name = memory_record(), ctypes.create_string_buffer(96)
            if lib.nvmlDeviceGetMemoryInfo(handle, ctypes.byref(memory)) != 0:
                return None
            lib.nvmlDeviceGetName(handle, name, len(name))
            major, minor = ctypes.c_int(), ctypes.c_int()
            known = lib.nvmlDeviceGetCudaComputeCapability(
                handle, ctypes.byref(major), ctypes.byref(minor)
            )
            devices.append(
                GpuDevice(
                    index=position,
                    name=name.value.decode(errors="replace"),
                    total_bytes=int(memory.total),
                    free_bytes=int(memory.free),
                    capability=(major.value, minor.value) if known == 0 else None,
                )
            )
        if not details:
            return NvmlReading(
                library=library,
                driver_version=None,
                cuda_driver_version=None,
                devices=tuple(devices),
            )
        processes = [p for i, h in enumerate(visible) for p in _processes(lib, i, h)]
        return NvmlReading(
            library=library,
            driver_version=_driver_version(lib),
            cuda_driver_version=_cuda_driver_version(lib),
            devices=tuple(devices),
            processes=tuple(processes),
        )
    finally:
        lib.nvmlShutdown()


def _driver_version(lib: Any) -> str | None:
    import ctypes

    buffer = ctypes.create_string_buffer(96)
    try:
        if lib.nvmlSystemGetDriverVersion(buffer, len(buffer)) != 0:
            return None
    except AttributeError:
        return None
    return buffer.value.decode(errors="replace") or None


def _cuda_driver_version(lib: Any) -> int | None:
    import ctypes

    version = ctypes.c_int()
    for name in ("nvmlSystemGetCudaDriverVersion_v2", "nvmlSystemGetCudaDriverVersion"):
        call = getattr(lib, name, None)
        if call is not None and call(ctypes.byref(version)) == 0:
            return version.value
    return None


def _processes(lib: Any, device: int, handle: Any) -> list[GpuProcess]:
    """The compute processes on one GPU, with their memory and name where NVML tells."""
    call = getattr(lib, "nvmlDeviceGetComputeRunningProcesses_v3", None)
    if call is None:
        return []
    import ctypes

    _, process_record = _structures()
    room = 16
    for _ in range(3):  # processes may start between two calls
        count = ctypes.c_uint(room)
        infos = (process_record * room)()
        status = call(handle, ctypes.byref(count), infos)
        if status == _INSUFFICIENT_SIZE:
            room = count.value + 8
            continue
        if status != 0:
            return []
        out = []
        for info in infos[: count.value]:
            used = int(info.usedGpuMemory)
            out.append(
                GpuProcess(
                    device=device,
                    pid=int(info.pid),
                    # NVML_VALUE_NOT_AVAILABLE (all bits set) where the driver cannot tell.
                    used_bytes=None if used >= 1 << 63 else used,
                    name=_process_name(lib, int(info.pid)),
                )
            )
        return out
    return []


def _process_name(lib: Any, pid: int) -> str | None:
    import ctypes

    buffer = ctypes.create_string_buffer(256)
    try:
        if lib.nvmlSystemGetProcessName(ctypes.c_uint(pid), buffer, len(buffer)) != 0:
            return None
    except AttributeError:
        return None
    return buffer.value.decode(errors="replace") or None


def _visible(lib: Any, handles: list[Any]) -> list[Any] | None:
    """The devices ``CUDA_VISIBLE_DEVICES`` leaves visible, in its order (None: cannot tell).

    Indices and ``GPU-`` UUIDs (or their prefixes) are followed; a MIG instance is not a
    device NVML lists here, so with one the GPUs are not read this way.
    """
    given = os.environ.get("CUDA_VISIBLE_DEVICES")
    if given is None:
        return handles
    import ctypes

    uuids: list[str] | None = None
    out = []
    for entry in (e.strip() for e in given.split(",")):
        if entry.isdigit():
            if int(entry) >= len(handles):
                break  # CUDA stops at the first invalid entry
            out.append(handles[int(entry)])
        elif entry.startswith("GPU-"):
            if uuids is None:
                uuids = []
                for handle in handles:
                    buffer = ctypes.create_string_buffer(96)
                    lib.nvmlDeviceGetUUID(handle, buffer, len(buffer))
                    uuids.append(buffer.value.decode(errors="replace"))
            found = [h for h, u in zip(handles, uuids, strict=True) if u.startswith(entry)]
            if len(found) != 1:
                break
            out.append(found[0])
        elif entry.startswith("MIG-"):
            return None
        else:
            break
    return out


def probe_gpus(timeout: float = 5.0, *, import_torch: bool = True) -> GpuReading:
    """The visible GPUs, measured now; never raises, never waits past ``timeout`` seconds.

    Through torch when the program imported it; else through NVML; else, with
    ``import_torch``, through torch imported now; else not at all, with the reason.
    """
    if "torch" not in sys.modules:
        # No driver, and no LD_LIBRARY_PATH folder to look in (on a cluster, a network
        # folder that may hang): told by three stat calls here, without a thread to wait on.
        bare = not os.environ.get("LD_LIBRARY_PATH") and _no_driver()
        reading, _ = (None, None) if bare else run_bounded(_nvml, timeout, "NVML")
        if reading is not None:
            return reading
        if not import_torch:
            return GpuReading(
                error="this program never imported torch, and NVML (the NVIDIA driver's "
                "libnvidia-ml) is not available to read the GPUs without it"
            )
    reading, reason = run_bounded(_measure, timeout, "the GPU query")
    return reading if reading is not None else GpuReading(error=reason)


def probe(evidence: Evidence, timeout: float) -> GpuReading:
    """The ``gpu`` probe: the GPUs now, or why not (probes off: nothing is measured)."""
    if not evidence.options.probes:
        return GpuReading(error="probes are off (--no-probes)")
    return probe_gpus(timeout, import_torch=evidence.options.import_torch)
