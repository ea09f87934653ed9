"""Every install command the environment's verdicts print resolves, to what the command says.

The commands are computed by the real code (the doctor's checks on injected environments, the
pasted environments of tests/data/environments, the environment advisor's own answers); none is
written here. Each is run by the real pip as ``pip install --dry-run --report`` against a local
stand-in of the index it names: the CUDA builds of torch cannot be downloaded here, so the
index holds small stand-in wheels with the real names and versions (``torch-2.13.0+cu129``), one
folder per index URL, holding the builds errkb's torch table lists for that index; PyPI's
stand-in holds the releases the commands ask PyPI for. pip's report says what it would install:
that must be what the command names (the version, and the CUDA build of the index).

pip runs with ``--target`` an empty folder, so that this virtual environment's own torch does
not hide what the command would install on the reporter's machine; the command's own options
are kept.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import tarfile
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import pytest
from environments import environment, gpus, stack, torch_build
from helpers import DATA, write_wheel
from packaging.requirements import Requirement
from packaging.version import Version

from errkb.advisors.environment._tables import tables
from errkb.advisors.environment.verdicts import extension_verdict, judge
from errkb.diagnosis import explain
from errkb.doctor import examine_paste
from errkb.options import Options
from errkb.probes.extensions import Extension
from errkb.probes.stack import Broken, Distribution, StackReading

if TYPE_CHECKING:
    from pathlib import Path

ENVS = DATA / "environments"

#: What PyPI's stand-in holds: the releases the commands ask PyPI for, and older ones beside
#: them so that a wrong specifier would pick another.
PYPI = {
    "torch": ("2.4.0", "2.5.1", "2.13.0"),
    "tokenizers": ("0.20.3", "0.21.4", "0.22.1"),
    "numpy": ("1.26.4", "2.4.6"),
    "scipy": ("1.11.4", "1.14.1"),
    "nvidia-cufft-cu12": ("11.2.1.3", "11.3.0.4"),
    "nvidia-cublas-cu12": ("12.4.5.8", "12.6.4.1"),
    "nvidia-cuda-nvrtc-cu12": ("12.4.127", "12.8.93"),
    "xformers": ("0.0.18", "0.0.29.post1"),
    "bitsandbytes": ("0.42.0", "0.45.5", "0.48.2"),
}
#: Source distributions (a rebuild asks for one with --no-binary).
SDISTS = {"flash-attn": "2.7.4.post1", "vllm": "0.9.2"}
#: torchvision and torchaudio of each torch release, as the installed set of a situation pairs
#: them (the stand-in index holds them beside each torch build).
COMPANIONS = {"2.13.0": {"torchvision": "0.28.0", "torchaudio": "2.13.0"}}


def _sdist(folder: Path, name: str, version: str) -> None:
    """A source distribution pip can read metadata from (setuptools, no build isolation)."""
    root = f"{name.replace('-', '_')}-{version}"
    files = {
        f"{root}/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n",
        f"{root}/setup.py": f"from setuptools import setup\nsetup(name={name!r}, version={version!r})\n",
    }
    with tarfile.open(folder / f"{root}.tar.gz", "w:gz") as archive:
        for member, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(member)
            info.size = len(data)
            import io

            archive.addfile(info, io.BytesIO(data))


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> dict[str, Path]:
    """Index URL (``""`` for PyPI) -> the folder that stands in for it."""
    root = tmp_path_factory.mktemp("index")
    folders: dict[str, Path] = {"": root / "pypi"}
    folders[""].mkdir()
    for name, versions in PYPI.items():
        for version in versions:
            write_wheel(folders[""], name, version, {})
    for name, version in SDISTS.items():
        _sdist(folders[""], name, version)
    for row in tables().torch_builds:
        folder = folders.setdefault(row.index_url, root / row.index_url.rsplit("/", 1)[1])
        folder.mkdir(exist_ok=True)
        label = row.index_url.rsplit("/", 1)[1]
        if not (folder / f"torch-{row.torch}+{label}-py3-none-any.whl").exists():
            write_wheel(folder, "torch", f"{row.torch}+{label}", {})
            for name, version in COMPANIONS.get(row.torch, {}).items():
                write_wheel(folder, name, f"{version}+{label}", {})
    return folders


def _resolve(command: str, index: dict[str, Path], tmp_path: Path) -> dict[str, str]:
    """What pip would install for ``command``: {name: version}, from its --report."""
    argv = shlex.split(command)
    if argv[:2] != ["pip", "install"]:
        raise AssertionError(f"not a pip install command: {command}")
    args, url = [], ""
    rest = iter(argv[2:])
    for arg in rest:
        if arg == "--index-url":
            url = next(rest)
        else:
            args.append(arg)
    tmp_path.mkdir(parents=True, exist_ok=True)
    report = tmp_path / "report.json"
    target = tmp_path / "target"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", *args, "--dry-run", "--report", str(report),
         "--no-index", "--find-links", str(index[url]), "--target", str(target), "--quiet",
         "--disable-pip-version-check"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert 0 == done.returncode, f"{command}\n{done.stderr}"
    data = json.loads(report.read_text(encoding="utf-8"))
    return {i["metadata"]["name"].lower(): i["metadata"]["version"] for i in data["install"]}


def _asked(command: str) -> list[Requirement]:
    """The requirements a pip command names (the arguments that are not options)."""
    argv = shlex.split(command)[2:]
    takes_value = {"--index-url", "--no-binary", "--only-binary", "--find-links"}
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg in takes_value:
            skip = True
        elif not arg.startswith("-"):
            out.append(Requirement(arg))
    return out


# -- the situations: each gives the commands the real code computes for it ------------------


def _doctor(env) -> tuple[str, ...]:
    return tuple(c for v in judge(env) for c in v.commands)


def _rtx_5090_on_cu126():
    installed = stack(("torch", "2.13.0+cu126"), ("torchvision", "0.28.0+cu126"),
                      ("torchaudio", "2.13.0+cu126"))  # fmt: skip
    return _doctor(
        environment(nvml=gpus(("NVIDIA GeForce RTX 5090", (12, 0))), installed=installed)
    )


def _cpu_torch_on_rtx_4090_driver_550():
    return _doctor(
        environment(
            nvml=gpus(("NVIDIA GeForce RTX 4090", (8, 9)), driver="550.163.01", cuda=12040),
            torch=torch_build("2.13.0+cpu", cuda=None),
            installed=stack(("torch", "2.13.0+cpu")),
        )
    )


def _cu130_on_driver_570():
    return _doctor(
        environment(
            nvml=gpus(("NVIDIA H100 80GB HBM3", (9, 0)), driver="570.86.15", cuda=12080),
            torch=torch_build("2.13.0+cu130", cuda="13.0", archs="sm_75 sm_80 sm_86 sm_90"),
            installed=stack(("torch", "2.13.0+cu130")),
        )
    )


def _linux_driver_520_under_cu126():
    return _doctor(environment(nvml=gpus(("NVIDIA A10", (8, 6)), driver="520.61.05", cuda=11080)))


def _windows_driver_526_under_cu124():
    return _doctor(
        environment(
            nvml=gpus(("NVIDIA GeForce RTX 3090", (8, 6)), driver="526.98", cuda=12000),
            torch=torch_build("2.5.1+cu124", cuda="12.4", archs="sm_50 sm_60 sm_70 sm_75 sm_80"),
            installed=stack(("torch", "2.5.1+cu124")),
            os="Windows-10-10.0.19045-SP0",
        )
    )


def _linux_driver_575_under_cu130():
    return _doctor(
        environment(
            nvml=gpus(("NVIDIA H100 80GB HBM3", (9, 0)), driver="575.57.08", cuda=12090),
            torch=torch_build("2.13.0+cu130", cuda="13.0", archs="sm_75 sm_80 sm_86 sm_90"),
            installed=stack(("torch", "2.13.0+cu130")),
        )
    )


def _bitsandbytes_cpu_library(system: str, name: str):
    """bitsandbytes 0.45.5's CPU library loaded under torch 2.5.1+cu124 on an H100."""
    ext = Extension(distribution="bitsandbytes", version="0.45.5", kind="library", name=name,
                    path=f"/site/bitsandbytes/{name}", error=None)  # fmt: skip
    return _doctor(
        environment(
            torch=torch_build("2.5.1+cu124", cuda="12.4", archs="sm_80 sm_86 sm_90"),
            installed=stack(("torch", "2.5.1+cu124"), ("bitsandbytes", "0.45.5")),
            extensions=(ext,),
            os=system,
        )
    )


def _broken(dist: str, version: str, requirement: str, installed: str | None) -> Broken:
    name = Requirement(requirement).name
    return Broken(distribution=dist, version=version, requirement=requirement, required=name,
                  installed=installed)  # fmt: skip


def _vllm_pins_an_older_torch():
    broken = (_broken("vllm", "0.6.3", "torch==2.4.0", "2.13.0+cu126"),)
    installed = stack(("torch", "2.13.0+cu126"), ("vllm", "0.6.3"), broken=broken)
    return _doctor(environment(installed=installed))


def _a_pin_the_tables_hold_keeps_the_cuda_build():
    broken = (_broken("vllm", "0.99.0", "torch==2.13.0", "2.12.0+cu126"),)
    installed = stack(("torch", "2.12.0+cu126"), ("vllm", "0.99.0"), broken=broken)
    return _doctor(environment(torch=torch_build("2.12.0+cu126", cuda="12.6"), installed=installed))


def _transformers_wants_other_tokenizers():
    broken = (_broken("transformers", "4.53.2", "tokenizers<0.22,>=0.21", "0.20.3"),)
    installed = stack(("transformers", "4.53.2"), ("tokenizers", "0.20.3"), broken=broken)
    return _doctor(environment(installed=installed))


def _flash_attn_built_against_another_torch():
    ext = Extension(
        distribution="flash-attn", version="2.7.4.post1", kind="module",
        name="flash_attn_2_cuda", path="/site/flash_attn_2_cuda.so",
        error="/site/flash_attn_2_cuda.so: undefined symbol: _ZN3c104cuda9SetDeviceEa",
    )  # fmt: skip
    env = environment(installed=stack(("torch", "2.13.0+cu126"), ("flash-attn", "2.7.4.post1")))
    return extension_verdict(env, tables(), ext).commands


def _an_extension_pinning_a_torch_the_tables_hold():
    broken = (_broken("xformers", "0.0.99", "torch==2.13.0", "2.12.0+cu126"),)
    installed = stack(("torch", "2.12.0+cu126"), ("xformers", "0.0.99"), broken=broken)
    ext = Extension(
        distribution="xformers", version="0.0.99", kind="module", name="_C",
        path="/site/xformers/_C.so", error="/site/xformers/_C.so: undefined symbol: _ZN2at4_ops",
    )  # fmt: skip
    env = environment(torch=torch_build("2.12.0+cu126", cuda="12.6"), installed=installed)
    return extension_verdict(env, tables(), ext).commands


def _pasted(*names: str):
    checkup = examine_paste("\n".join((ENVS / n).read_text(encoding="utf-8") for n in names))
    assert checkup is not None
    return tuple(c for v in checkup.verdicts for c in v.commands)


def _pasted_no_kernel_image_on_rtx_5090_cu121():
    text = (ENVS / "vllm-13497-collect-env-4090.txt").read_text(encoding="utf-8")
    error = "RuntimeError: CUDA error: no kernel image is available for execution on the device\n"
    diagnosis = explain(
        error + text.replace("RTX 4090", "RTX 5090"), options=Options(probes=False, timeout=60)
    )
    assert diagnosis is not None
    return tuple(
        s.settings["command"] for f in diagnosis.findings for s in f.solutions if s.settings
    )


def _pasted_vllm_c_undefined_symbol():
    error = (
        "ImportError: /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: "
        "_ZN3c104cuda9SetDeviceEi\n\n"
    )
    text = error + (ENVS / "vllm-21028-collect-env-tail.txt").read_text(encoding="utf-8")
    diagnosis = explain(text, options=Options(probes=False, timeout=60))
    assert diagnosis is not None
    return tuple(
        s.settings["command"] for f in diagnosis.findings for s in f.solutions if s.settings
    )


def _numpy_answers():
    situations = pytest.importorskip("errkb.advisors.environment._situations")
    commands: list[str] = []
    for wanted in ("numpy<2", "numpy"):
        verdict, _, _ = situations._numpy_verdict(wanted, "", None, None, [])
        commands += verdict.commands if verdict is not None else ()
    # A module of scipy built for numpy 1.x, where pandas requires numpy 2: scipy is upgraded.
    installed = StackReading(
        distributions=(
            Distribution(name="numpy", version="2.4.6", folder="/site"),
            Distribution(name="scipy", version="1.11.4", folder="/site"),
            Distribution(name="pandas", version="2.3.0", folder="/site", requires=("numpy>=2",)),
        ),
        checked=3, broken=(), source="test",
    )  # fmt: skip
    env = environment(installed=installed)
    verdict, _, _ = situations._numpy_verdict("numpy<2", "", "scipy", env, [])
    commands += verdict.commands if verdict is not None else ()
    return tuple(commands)


def _torch_251_with(
    wheel: str, version: str, broken: tuple[Broken, ...] = (), folder: str = "/site"
):
    """torch 2.5.1 with its wheel's real pins (tables/cuda_wheel_pins.json), and ``wheel``."""
    from errkb.advisors.environment._tables import tables as known

    pins = tuple(f"{p.distribution}=={p.version}" for p in known().cuda_wheel_pins
                 if p.torch == "2.5.1")  # fmt: skip
    dists = (
        Distribution(name="torch", version="2.5.1", folder=f"{folder}/t.dist-info", requires=pins),
        Distribution(name=wheel, version=version, folder=f"{folder}/w.dist-info"),
    )
    return environment(
        torch=torch_build("2.5.1+cu124", cuda="12.4"),
        installed=StackReading(distributions=dists, checked=2, broken=broken, source="test"),
    )


def _cufft_wheel_other_than_torch_s_pin():
    from errkb.advisors.environment._situations import cuda_wheel

    broken = (_broken("torch", "2.5.1", "nvidia-cufft-cu12==11.2.1.3", "11.3.0.4"),)
    verdict, _, _ = cuda_wheel(
        "cufft", "", _torch_251_with("nvidia-cufft-cu12", "11.3.0.4", broken)
    )
    return verdict.commands if verdict else ()


def _cublas_wheel_other_than_torch_s_pin():
    from errkb.advisors.environment._situations import cuda_wheel

    broken = (_broken("torch", "2.5.1", "nvidia-cublas-cu12==12.4.5.8", "12.6.4.1"),)
    verdict, _, _ = cuda_wheel(
        "cublas", "", _torch_251_with("nvidia-cublas-cu12", "12.6.4.1", broken)
    )
    return verdict.commands if verdict else ()


def _numpy_c_api_newer_than_installed():
    """C-API 0x10 (pinocchio#1873's message) under numpy 1.21.5, nothing pinning numpy."""
    from errkb.advisors import Captures
    from errkb.advisors.environment._situations import numpy_c_api

    installed = StackReading(
        distributions=(Distribution(name="numpy", version="1.21.5", folder="/site"),),
        checked=1, broken=(), source="test",
    )  # fmt: skip
    caps = Captures({"module_api": "0x10", "numpy_api": "0xe"})
    verdict, _, _ = numpy_c_api(caps, environment(installed=installed), [])
    return verdict.commands if verdict else ()


def _nvrtc_wheel_without_its_builtins():
    import tempfile
    from pathlib import Path

    from errkb.advisors.environment._situations import cuda_wheel

    site = Path(tempfile.mkdtemp())
    (site / "nvidia" / "cuda_nvrtc" / "lib").mkdir(parents=True)
    env = _torch_251_with("nvidia-cuda-nvrtc-cu12", "12.4.127", folder=str(site))
    text = "nvrtc: error: failed to open libnvrtc-builtins.so.12.4."
    verdict, _, _ = cuda_wheel("nvrtc", text, env)
    return verdict.commands if verdict else ()


def _flash_attn_without_its_extension():
    from errkb.advisors.environment._situations import extension_not_built

    env = environment(installed=stack(("torch", "2.13.0+cu126"), ("flash-attn", "2.7.4.post1")))
    files = ["/usr/lib/python3/site-packages/flash_attn/flash_attn_interface.py"]
    verdict, _, _ = extension_not_built(env, "flash_attn_2_cuda", files)
    return verdict.commands if verdict else ()


def _xformers_0_0_18_on_an_h100():
    from errkb.advisors.environment._situations import cutlass_kernel

    installed = stack(("torch", "2.5.1+cu121"), ("xformers", "0.0.18"))
    env = environment(torch=torch_build("2.5.1+cu121", cuda="12.1"), installed=installed)
    verdict, _, _ = cutlass_kernel(env)
    return verdict.commands if verdict else ()


def _torchaudio_built_for_torch_2_5_1():
    broken = (_broken("torchaudio", "2.5.1", "torch==2.5.1", "2.13.0+cu126"),)
    installed = stack(("torch", "2.13.0+cu126"), ("torchaudio", "2.5.1"), broken=broken)
    ext = Extension(
        distribution="torchaudio", version="2.5.1", kind="module", name="libtorchaudio",
        path="/site/torchaudio/lib/libtorchaudio.so",
        error="/site/torchaudio/lib/libtorchaudio.so: undefined symbol: _ZNK5torch8autograd4Node4nameEv",
    )  # fmt: skip
    return extension_verdict(environment(installed=installed), tables(), ext).commands


SITUATIONS = {
    "doctor: RTX 5090 under torch 2.13.0+cu126 (with torchvision, torchaudio)": _rtx_5090_on_cu126,
    "doctor: CPU torch on an RTX 4090, driver 550": _cpu_torch_on_rtx_4090_driver_550,
    "doctor: torch cu130 on driver 570": _cu130_on_driver_570,
    "doctor: Linux driver 520.61.05 under torch cu126": _linux_driver_520_under_cu126,
    "doctor: Windows driver 526.98 under torch cu124": _windows_driver_526_under_cu124,
    "doctor: Linux driver 575.57.08 under torch cu130": _linux_driver_575_under_cu130,
    "doctor: bitsandbytes' CPU library under torch cu124 (Linux)": lambda: (
        _bitsandbytes_cpu_library("Linux-6.8.0-x86_64-with-glibc2.39", "libbitsandbytes_cpu.so")
    ),
    "doctor: bitsandbytes' CPU library under torch cu124 (Windows)": lambda: (
        _bitsandbytes_cpu_library("Windows-10-10.0.19045-SP0", "libbitsandbytes_cpu.dll")
    ),
    "paste: bitsandbytes#779 CPU library + vllm#13497 collect_env": lambda: _pasted(
        "vllm-13497-collect-env-4090.txt", "bitsandbytes-779-cpu-library.txt"
    ),
    "doctor: vllm 0.6.3 pins torch 2.4.0": _vllm_pins_an_older_torch,
    "doctor: a pin of torch 2.13.0 over 2.12.0+cu126": _a_pin_the_tables_hold_keeps_the_cuda_build,
    "doctor: transformers wants tokenizers 0.21": _transformers_wants_other_tokenizers,
    "doctor: flash-attn built against another torch": _flash_attn_built_against_another_torch,
    "doctor: xformers pins torch 2.13.0": _an_extension_pinning_a_torch_the_tables_hold,
    "paste: pytorch#150733 collect_env (RTX 5090 D)": lambda: _pasted(
        "pytorch-150733-collect-env-rtx5090d.txt"
    ),
    "paste: accelerate env (CPU torch) + nvidia-smi (RTX 4090)": lambda: _pasted(
        "local-accelerate-env.txt", "rlinf-255-nvidia-smi-2x4090.txt"
    ),
    "paste: no kernel image, RTX 5090, torch 2.5.1+cu121": _pasted_no_kernel_image_on_rtx_5090_cu121,
    "paste: vllm._C undefined symbol beside vllm 0.9.2's pip list": _pasted_vllm_c_undefined_symbol,
    "advisor: numpy 1.x, a newer numpy, a newer scipy": _numpy_answers,
    "advisor: cuFFT error, nvidia-cufft-cu12 11.3.0.4 under torch 2.5.1": _cufft_wheel_other_than_torch_s_pin,
    "advisor: cuBLAS error, nvidia-cublas-cu12 12.6.4.1 under torch 2.5.1": _cublas_wheel_other_than_torch_s_pin,
    "advisor: numpy C-API 0x10 module under numpy 1.21.5": _numpy_c_api_newer_than_installed,
    "advisor: NVRTC's builtins missing from torch 2.5.1's pinned wheel": _nvrtc_wheel_without_its_builtins,
    "advisor: flash-attn 2.7.4.post1 installed without flash_attn_2_cuda": _flash_attn_without_its_extension,
    "advisor: cutlassF without a kernel, xformers 0.0.18 on an H100": _xformers_0_0_18_on_an_h100,
    "doctor: torchaudio 2.5.1's library under torch 2.13.0": _torchaudio_built_for_torch_2_5_1,
}


@pytest.fixture(scope="module")
def commands() -> dict[str, tuple[str, ...]]:
    """Each situation's install commands, as the real code computes them."""
    return {
        name: tuple(c for c in situation() if c.startswith("pip install"))
        for name, situation in SITUATIONS.items()
    }


@pytest.fixture(scope="module")
def resolved(commands, index, tmp_path_factory) -> dict[str, dict[str, str]]:
    """What pip would install for each distinct command, the dry runs side by side."""
    distinct = sorted({c for listed in commands.values() for c in listed})
    root = tmp_path_factory.mktemp("pip")
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        runs = pool.map(lambda n: _resolve(distinct[n], index, root / str(n)), range(len(distinct)))
        return dict(zip(distinct, runs, strict=True))


@pytest.mark.parametrize("situation", sorted(SITUATIONS))
def test_each_install_command_resolves_to_what_it_names(situation, commands, resolved):
    """pip's dry run installs each requirement the command names, of the index's CUDA build."""
    assert commands[situation], f"{situation}: no install command was computed"
    for command in commands[situation]:
        argv = shlex.split(command)
        url = argv[argv.index("--index-url") + 1] if "--index-url" in argv else ""
        for requirement in _asked(command):
            version = resolved[command].get(requirement.name.lower())
            assert version is not None, f"{command}: {requirement.name} not in {resolved[command]}"
            assert requirement.specifier.contains(Version(version), prereleases=True), (
                f"{command}: {version}"
            )
            if url:  # the build of that index: its local label is the index's cuXYZ
                assert url.rsplit("/", 1)[1] == Version(version).local, f"{command}: {version}"
