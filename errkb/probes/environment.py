"""The environment probe: the machine, its GPUs, torch's build and the installed set, at once.

:class:`Environment` holds every probe's reading that the environment's verdicts judge
(:mod:`errkb.advisors.environment.verdicts`). ``errkb doctor`` reads it in full, compiled
extensions loaded in child interpreters (:func:`errkb.doctor.read_environment`); the
``environment`` probe reads it for a diagnosis, lighter and within the probe's time bound: the
system, NVML (the driver's library, never torch), torch's build only from the torch this program
imported (never importing it), and the installed distributions' metadata. No extension is
loaded: the error being diagnosed already says which one fails.
"""

from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from errkb._attrs import attrs

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from errkb.evidence import Evidence
    from errkb.probes.extensions import Extension
    from errkb.probes.gpu import NvmlReading
    from errkb.probes.stack import StackReading
    from errkb.probes.system import SystemReading
    from errkb.probes.torch_build import TorchBuild

__all__ = ["Environment", "probe", "read", "torch_in_process"]


@attrs.frozen(kw_only=True)
class Environment:
    """Every fact the doctor read, each probe's reading with its source.

    ``nvml`` is ``None`` when NVML could not be read, ``nvml_error`` says why. ``timings``
    holds each probe's name and the seconds it took.
    """

    system: SystemReading
    nvml: NvmlReading | None
    nvml_error: str | None
    torch: TorchBuild
    stack: StackReading
    extensions: tuple[Extension, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()


def torch_in_process() -> TorchBuild:
    """Torch's build as the program imported it, read without initialising CUDA.

    When the program never imported torch it is not imported here: the reading's ``error``
    says so, and only its version is read, from the distribution's metadata.
    """
    from errkb._dists import version as installed
    from errkb.probes.torch_build import TorchBuild

    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "__version__"):
        found = installed("torch")
        return TorchBuild(
            installed=found is not None,
            version=found,
            error="not read: this program did not import torch, and errkb does not import it",
            source="the torch distribution's metadata",
        )
    version = getattr(torch, "version", None)
    c = getattr(torch, "_C", None)
    flags = getattr(c, "_cuda_getArchFlags", None)
    archs = (flags() or "") if callable(flags) else ""
    abi = getattr(c, "_GLIBCXX_USE_CXX11_ABI", None)
    return TorchBuild(
        installed=True,
        version=str(torch.__version__),
        cuda=getattr(version, "cuda", None),
        hip=getattr(version, "hip", None),
        archs=tuple(str(archs).split()),
        cxx11_abi=None if abi is None else bool(abi),
        file=getattr(torch, "__file__", None),
        source="torch as this program imported it (torch.version, torch._C._cuda_getArchFlags())",
    )


def read(
    torch: Callable[[dict[str, str]], TorchBuild],
    *,
    nvml_timeout: float,
    paths: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    extensions: Callable[[StackReading, TorchBuild, dict[str, str]], tuple[Extension, ...]]
    | None = None,
) -> Environment:
    """Read the environment, each part timed: the system, NVML, torch, the installed set.

    NVML is read within ``nvml_timeout`` seconds, torch's build by ``torch`` (given the
    variables), the compiled extensions by ``extensions``.
    ``paths`` are where distributions are looked for (``sys.path``), ``environ`` the variables
    read (``os.environ``); ``extensions`` loads the compiled extensions (none when omitted).
    """
    import os

    from errkb.probes import run_bounded
    from errkb.probes.gpu import read_nvml
    from errkb.probes.stack import read_stack
    from errkb.probes.system import read_system

    timings: list[tuple[str, float]] = []

    def timed(name: str, start: float) -> None:
        timings.append((name, round(time.monotonic() - start, 2)))

    env = dict(os.environ if environ is None else environ)
    start = time.monotonic()
    system = read_system(env)
    timed("system", start)
    start = time.monotonic()
    nvml, reason = run_bounded(read_nvml, nvml_timeout, "NVML")
    if nvml is None and reason is None:
        reason = "libnvidia-ml.so.1 is not found"
    timed("nvml", start)
    start = time.monotonic()
    build = torch(env)
    timed("torch", start)
    start = time.monotonic()
    stack = read_stack(paths)
    timed("stack", start)
    loaded: tuple[Extension, ...] = ()
    if extensions is not None:
        start = time.monotonic()
        loaded = extensions(stack, build, env)
        timed("extensions", start)
    return Environment(
        system=system,
        nvml=nvml,
        nvml_error=reason,
        torch=build,
        stack=stack,
        extensions=loaded,
        timings=tuple(timings),
    )


def probe(evidence: Evidence, timeout: float) -> Environment | None:
    """The ``environment`` probe: this machine's environment now; ``None`` with probes off.

    NVML is read within ``timeout`` seconds; torch's build only from the imported torch, and no
    extension is loaded.
    """
    if not evidence.options.probes:
        return None
    return read(lambda _: torch_in_process(), nvml_timeout=timeout)
