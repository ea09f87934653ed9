"""Judging a pasted environment: the reporter's machine, as their report tools described it.

A paste (:mod:`errkb.probes.pasted_env`) says less than the doctor reads here: GPU names without
their compute capability, torch's version without the architectures it was built for, versions
without what each requires. :func:`completed` adds what errkb's knowledge tables know of the
named GPU and build, each said where it came from; :func:`judge_pasted` runs the doctor's
verdicts on it and replaces those that would speak of this machine (NVML unreadable here, torch
not importable here) with what the paste leaves out. Nothing of this machine is read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb.advisors.environment._model import Verdict

if TYPE_CHECKING:
    from errkb.advisors import Captures
    from errkb.advisors.environment._tables import Tables
    from errkb.probes.environment import Environment
    from errkb.probes.pasted_env import PastedEnvironment

__all__ = [
    "BLACKWELL_CUDA",
    "BLACKWELL_MAJOR",
    "BLACKWELL_SOURCE",
    "completed",
    "judge_pasted",
    "no_kernel_verdict",
    "table_archs",
    "with_message",
]

#: The first CUDA toolkit that builds code for Blackwell GPUs (compute capability 10.0, 12.0),
#: and where that is said: NVIDIA's guide splits building for Blackwell into "CUDA Toolkit 12.7
#: or Earlier" (PTX of an older architecture only) and "CUDA Toolkit 12.8".
BLACKWELL_CUDA = (12, 8)
#: The oldest major compute capability of a Blackwell GPU.
BLACKWELL_MAJOR = 10
BLACKWELL_SOURCE = (
    "https://docs.nvidia.com/cuda/blackwell-compatibility-guide (1.4.1 Building Applications "
    "Using CUDA Toolkit 12.7 or Earlier; 1.4.2 Using CUDA Toolkit 12.8)"
)

#: Verdicts about this machine that a pasted environment must not get.
_MACHINE_ONLY = ("no-gpu", "no-torch", "torch-import-fails")


def table_archs(env: Environment, known: Tables) -> tuple[str, ...]:
    """The architectures of the pasted torch build, from the table row of that exact build.

    ``()`` when the tables hold no row for its release and CUDA on this machine type.
    """
    from errkb.advisors.environment.verdicts import machine_of

    torch = env.torch
    if not torch.version or not torch.cuda or torch.archs:
        return torch.archs
    release = torch.version.split("+", 1)[0]
    for row in known.torch_builds:
        if (
            row.torch == release
            and row.cuda == torch.cuda
            and row.machine in (machine_of(env), "any")
        ):
            return tuple(f"sm_{major}{minor}" for major, minor in row.capabilities)
    return ()


def completed(pasted: PastedEnvironment, known: Tables) -> Environment:
    """The pasted environment with each GPU's capability and torch's architectures from the tables.

    A GPU's capability comes from the paste when torch's warning states it, else from the GPU
    table by its name; torch's architectures from the paste (torch's warning), else from the
    torch build table's row of that exact release and CUDA.
    """
    env = pasted.environment
    nvml = env.nvml
    if nvml is not None:
        devices = []
        for device in nvml.devices:
            row = None if device.capability else known.gpu_capability(device.name)
            devices.append(attrs.evolve(device, capability=row.capability) if row else device)
        env = attrs.evolve(env, nvml=attrs.evolve(nvml, devices=tuple(devices)))
    archs = table_archs(env, known)
    if archs != env.torch.archs:
        env = attrs.evolve(env, torch=attrs.evolve(env.torch, archs=archs))
    return env


def judge_pasted(pasted: PastedEnvironment, known: Tables) -> tuple[Verdict, ...]:
    """The doctor's verdicts on a pasted environment, and notes for what the paste leaves out."""
    from errkb.advisors.environment.verdicts import judge

    env = completed(pasted, known)
    said = _capability_source(pasted)
    verdicts = [
        attrs.evolve(v, why=v.why.replace("(NVML)", f"({said})"))
        for v in judge(env, known)
        if v.code not in _MACHINE_ONLY
    ]
    named = ", ".join(pasted.tools)
    if env.nvml is None:
        verdicts.append(
            Verdict(
                code="paste-no-gpu",
                severity="note",
                title="The paste names no NVIDIA GPU and no driver: the GPU checks were skipped",
                why=f"None of the outputs pasted ({named}) lists a GPU or a driver version.",
            )
        )
    torch = env.torch
    if torch.error:
        verdicts.append(
            Verdict(
                code="paste-no-torch-build",
                severity="note",
                title="The paste does not say torch's build: its checks were skipped",
                why=f"{torch.error[:1].upper()}{torch.error[1:]} ({named}).",
            )
        )
    elif torch.cuda and not torch.archs and env.nvml is not None and env.nvml.devices:
        verdicts.append(
            Verdict(
                code="paste-archs-unknown",
                severity="note",
                title=f"Whether torch {torch.version} has code for the GPU is not known",
                why="The paste does not list the architectures torch was built for (torch's "
                "warning does, when it names the GPU), and errkb's tables hold no row for "
                f"torch {torch.version.split('+', 1)[0] if torch.version else ''} with CUDA "
                f"{torch.cuda}.",
            )
        )
    return tuple(verdicts)


def _capability_source(pasted: PastedEnvironment) -> str:
    """Where the GPUs' compute capabilities of a paste come from, in words.

    The paste's tools name GPUs, not capabilities: torch's warning states one, else errkb's GPU
    table gives it by the name (the verdicts judging a machine here say NVML).
    """
    if any(f.name == "gpu warning" for f in pasted.facts):
        return "torch's warning in the paste"
    return "errkb's GPU table, by the name in the paste"


def no_kernel_verdict(env: Environment, known: Tables) -> Verdict | None:
    """The verdict for 'no kernel image is available' on a pasted Blackwell GPU, when it is torch's.

    The paste names the GPU and the CUDA torch was built with, not its architectures. Code for
    Blackwell GPUs (compute capability 10.x and 12.x) is built by CUDA 12.8 and later
    (:data:`BLACKWELL_CUDA`): a torch built with an older CUDA has none, so the error is torch's
    own and the build to install is the one the doctor would choose for that GPU and driver.
    ``None`` for any other GPU or build: the error may be an extension's, which the paste does
    not say.
    """
    from errkb.advisors.environment.verdicts import best_build, install_torch_command

    nvml, torch = env.nvml, env.torch
    device = next((d for d in nvml.devices if d.capability), None) if nvml else None
    if device is None or device.capability is None or not torch.cuda:
        return None
    cap = device.capability
    cuda = tuple(int(p) for p in torch.cuda.split(".")[:2] if p.isdigit())
    if cap[0] < BLACKWELL_MAJOR or cuda >= BLACKWELL_CUDA:
        return None
    named = f"torch {torch.version}" if torch.version else "torch"
    row = best_build(known, env, cap, (torch.version or "").split("+", 1)[0] or None)
    if row is None:
        fix = f"errkb's tables hold no torch build for compute capability {cap[0]}.{cap[1]}."
    else:
        fix = (
            f"Install torch {row.torch} built for CUDA {row.cuda}, which carries code for this "
            f"GPU (from {row.index_url})."
        )
    return Verdict(
        code="gpu-arch-unsupported",
        severity="broken",
        title=f"{device.name} (sm_{cap[0]}{cap[1]}) is not among {named}'s architectures",
        why=f"GPU {device.index} has compute capability {cap[0]}.{cap[1]} (errkb's GPU table, by "
        f"the name in the paste), a Blackwell GPU; {named} was built with CUDA {torch.cuda}, and "
        "code for Blackwell GPUs needs CUDA 12.8 or later: no kernel of this torch runs on it.",
        fix=fix,
        commands=(install_torch_command(env, row),) if row else (),
        sources=((row.source,) if row else ()) + (BLACKWELL_SOURCE,),
    )


def with_message(env: Environment, kind: str, caps: Captures) -> Environment:
    """``env`` with what the error's message says and the paste's tools did not.

    torch's architectures and the GPU from torch's warning (``kind`` ``gpu-arch``), the newest
    CUDA the driver runs from "found version N" (``driver``).
    """
    from errkb.advisors.environment._tables import capability
    from errkb.probes import GpuDevice
    from errkb.probes.gpu import NvmlReading

    empty = NvmlReading(library="the message", driver_version=None, cuda_driver_version=None,
                        devices=())  # fmt: skip
    if kind == "gpu-arch" and caps.text("archs") and not env.torch.archs:
        archs = tuple((caps.text("archs") or "").split())
        env = attrs.evolve(env, torch=attrs.evolve(env.torch, archs=archs))
    if kind == "gpu-arch" and caps.text("gpu") and (env.nvml is None or not env.nvml.devices):
        try:
            cap = capability(f"sm_{caps.text('sm')}")
        except ValueError:
            return env
        device = GpuDevice(index=0, name=caps.text("gpu") or "", total_bytes=0, capability=cap,
                           source="message")  # fmt: skip
        env = attrs.evolve(env, nvml=attrs.evolve(env.nvml or empty, devices=(device,)))
    found = caps.integer("driver_cuda")
    if kind == "driver" and found and (env.nvml is None or not env.nvml.cuda_driver_version):
        env = attrs.evolve(env, nvml=attrs.evolve(env.nvml or empty, cuda_driver_version=found))
    return env
