"""Injected environments for the doctor's tests: a stand-in NVML, site-packages, torch, binaries.

Nothing here assumes what the machine has: each helper lays out a real part of an environment
in a temporary folder (a ``*.dist-info`` folder, a ``torch`` package, a shared library built
with the system C compiler) or builds the real frozen readings the doctor judges, so a test
names exactly the machine it describes.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import DATA

from errkb.doctor import Environment
from errkb.probes import GpuDevice
from errkb.probes.extensions import Extension
from errkb.probes.gpu import GpuProcess, NvmlReading
from errkb.probes.stack import Broken, Distribution, StackReading
from errkb.probes.system import SystemReading
from errkb.probes.torch_build import TorchBuild

GIB = 1 << 30


def compile_library(source: str, out: Path) -> Path:
    """Build ``source`` (C) into the shared library ``out``; skips the test without a compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler to build a shared library")
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / (out.name + ".c")
    src.write_text(source, encoding="utf-8")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(out), str(src)], check=True)
    src.unlink()
    return out


def fake_nvml_folder(folder: Path) -> Path:
    """A folder holding the stand-in NVML as ``libnvidia-ml.so.1`` (for LD_LIBRARY_PATH)."""
    out = folder / "libnvidia-ml.so.1"
    return compile_library((DATA / "nvml" / "fake_nvml.c").read_text(), out).parent


def fake_nvml_env(folder: Path, gpu: str, driver: str, cuda: int) -> dict[str, str]:
    """The environment a child reads the stand-in NVML through: one GPU (``name|major.minor|
    total bytes|used bytes``), the driver version and the CUDA version it reports."""
    return {
        "LD_LIBRARY_PATH": str(fake_nvml_folder(folder)),
        "FAKE_NVML_GPUS": gpu,
        "FAKE_NVML_DRIVER": driver,
        "FAKE_NVML_CUDA": str(cuda),
    }


def write_dist(
    site: Path,
    name: str,
    version: str,
    requires: tuple[str, ...] = (),
    files: dict[str, Path] | None = None,
) -> Path:
    """A ``name-version.dist-info`` folder in ``site``; ``files`` (relative path -> a built
    file) are copied in and listed in its RECORD."""
    folder = site / f"{name.replace('-', '_')}-{version}.dist-info"
    folder.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    (folder / "METADATA").write_text("\n".join(lines) + "\n\nA description.\n", encoding="utf-8")
    record = [f"{folder.name}/METADATA,,"]
    for relative, built in (files or {}).items():
        target = site / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(built, target)
        record.append(f"{relative},,")
    (folder / "RECORD").write_text("\n".join(record) + "\n", encoding="utf-8")
    return folder


def write_fake_torch(
    site: Path,
    version: str,
    *,
    cuda: str | None,
    archs: str = "",
    fail: str | None = None,
) -> Path:
    """A ``torch`` package that reports a build as the real one does (``torch.version.cuda``,
    ``torch._C._cuda_getArchFlags()``); with ``fail``, importing it raises that ImportError."""
    package = site / "torch"
    package.mkdir(parents=True)
    body = (
        f"raise ImportError({fail!r})\n"
        if fail
        else (f"__version__ = {version!r}\nfrom torch import version, _C\n")
    )
    (package / "__init__.py").write_text(body, encoding="utf-8")
    (package / "version.py").write_text(f"cuda = {cuda!r}\nhip = None\n", encoding="utf-8")
    flags = f"def _cuda_getArchFlags():\n    return {archs!r}\n" if cuda else ""
    (package / "_C.py").write_text(flags + "_GLIBCXX_USE_CXX11_ABI = True\n", encoding="utf-8")
    write_dist(site, "torch", version)
    return package


# -- frozen readings, for the verdicts -----------------------------------------------------


def system(**changes: object) -> SystemReading:
    """A Linux x86_64 machine outside any container, with a roomy /dev/shm."""
    values: dict[str, object] = {
        "os": "Linux-6.1.0-x86_64-with-glibc2.36",
        "machine": "x86_64",
        "glibc": "2.36",
        "python": "3.11.9",
        "abi": "cpython-311-x86_64-linux-gnu",
        "executable": sys.executable,
        "memory_bytes": 64 * GIB,
        "shm_bytes": 32 * GIB,
        "container": None,
        "variables": (),
        "hf_cache": "/tmp/hub",
        "hf_cache_free_bytes": 100 * GIB,
    }
    values.update(changes)
    return SystemReading(**values)  # type: ignore[arg-type]


def gpus(
    *devices: tuple[str, tuple[int, int] | None],
    driver: str = "570.86.15",
    cuda: int = 12080,
    processes: tuple[GpuProcess, ...] = (),
) -> NvmlReading:
    """NVML's reading of ``devices`` (name, compute capability) under ``driver``."""
    return NvmlReading(
        library="libnvidia-ml.so.1",
        driver_version=driver,
        cuda_driver_version=cuda,
        devices=tuple(
            GpuDevice(index=i, name=name, total_bytes=24 * GIB, capability=cap)
            for i, (name, cap) in enumerate(devices)
        ),
        processes=processes,
    )


def torch_build(
    version: str = "2.13.0+cu126", cuda: str | None = "12.6", archs: str = ""
) -> TorchBuild:
    """An installed torch of ``version``, built for CUDA ``cuda`` (None: CPU) and ``archs``."""
    if archs == "" and cuda == "12.6":
        archs = "sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
    return TorchBuild(
        installed=True, version=version, cuda=cuda, archs=tuple(archs.split()), source="test"
    )


def stack(*dists: tuple[str, str], broken: tuple[Broken, ...] = ()) -> StackReading:
    """The stack's distributions (name, version) and the broken requirements."""
    return StackReading(
        distributions=tuple(
            Distribution(name=n, version=v, folder=f"/site/{n}-{v}.dist-info") for n, v in dists
        ),
        checked=len(dists),
        broken=broken,
        source="test",
    )


#: The GPU an environment has unless a test says otherwise: one that every build here runs on.
H100 = object()


def environment(
    *,
    nvml: NvmlReading | object | None = H100,
    torch: TorchBuild | None = None,
    installed: StackReading | None = None,
    extensions: tuple[Extension, ...] = (),
    **system_changes: object,
) -> Environment:
    """An environment: a machine (``system_changes``), its GPUs, torch, the installed set.

    By default one H100 (``nvml=None``: no NVIDIA GPU at all) and torch 2.13.0 for CUDA 12.6.
    """
    if nvml is H100:
        nvml = gpus(("NVIDIA H100 80GB HBM3", (9, 0)))
    assert nvml is None or isinstance(nvml, NvmlReading)
    return Environment(
        system=system(**system_changes),
        nvml=nvml,
        nvml_error=None if nvml is not None else "libnvidia-ml.so.1 is not found",
        torch=torch or torch_build(),
        stack=installed or stack(("torch", "2.13.0+cu126")),
        extensions=extensions,
    )


def print_diagnosis(exc: BaseException, env: Environment, **fields: object) -> None:
    """Print as JSON, for the test that ran this child, ``fields`` and the top finding of
    ``exc`` diagnosed on the machine ``env``: its record and its computed command."""
    import json

    import errkb
    from errkb.options import Options
    from errkb.probes import Measurements

    options = Options(measurements=Measurements(readings={"environment": env}), timeout=60.0)
    finding = errkb.diagnose(exc, options=options).findings[0]
    command = finding.solutions[0].settings.get("command")
    print(json.dumps({**fields, "record": finding.record.id, "command": command}))


def doctor_command(env: Environment, code: str) -> str:
    """The first command of the doctor's verdict ``code`` on the machine ``env``."""
    from errkb.advisors.environment.verdicts import judge

    return next(v.commands[0] for v in judge(env) if v.code == code)
