"""The environment advisor's own answers in a child process, with the real probes.

The child is a script run as users run it (``python train.py --epochs 3``): its
``init_process_group`` meets a port another socket of the same process holds, torch raises its
real error, and the ``launch`` probe reads the real command line and asks the system for a free
port. The command must be that command line with ``MASTER_PORT`` set to a port that is free.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from typing import TYPE_CHECKING

import pytest
from helpers import DATA, _child_env

if TYPE_CHECKING:
    from pathlib import Path

SCRIPT = """
import json, os, socket
import errkb
import torch.distributed as dist

busy = socket.socket()
busy.bind(("", 0))
busy.listen()
os.environ["MASTER_ADDR"] = "localhost"
os.environ["MASTER_PORT"] = str(busy.getsockname()[1])
try:
    dist.init_process_group("gloo", init_method="env://", rank=0, world_size=1)
except RuntimeError as exc:
    finding = errkb.diagnose(exc).findings[0]
    print(json.dumps({
        "record": finding.record.id,
        "command": finding.solutions[0].settings.get("command"),
        "busy": busy.getsockname()[1],
    }))
"""


def test_a_script_s_busy_master_port_gets_its_own_command_line_on_a_free_port(tmp_path):
    """Real torch, real probes: MASTER_PORT=<free> python <the script> --epochs 3."""
    pytest.importorskip("torch.distributed")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), "--epochs", "3"],
        capture_output=True, env=_child_env(None), timeout=300, check=False,
    )  # fmt: skip
    assert 0 == done.returncode, done.stderr.decode()[-2000:]
    data = json.loads(done.stdout)
    found = re.fullmatch(rf"MASTER_PORT=(\d+) python {re.escape(str(script))} --epochs 3",
                         str(data["command"]))  # fmt: skip
    assert ("torch-rendezvous-port-in-use", True) == (data["record"], found is not None)
    port = int(found.group(1)) if found else 0
    with socket.socket() as sock:  # free when read, and not the one that was taken
        sock.bind(("", port))
    assert port != data["busy"]


#: The release archives the miner downloads, where a test needs a real one.
MINE_CACHE = DATA.parents[1] / ".mine-cache"
NVRTC_WHEEL = "nvidia_cuda_nvrtc_cu12-12.4.127-py3-none-manylinux2014_x86_64.whl"


def _unpacked(archive_name: str, into: Path) -> Path:
    """The released archive ``archive_name`` of .mine-cache unpacked into ``into``; skips the test
    where it was not downloaded (``nox -s tests`` downloads tests/archives.toml)."""
    import tarfile
    import zipfile

    archive = MINE_CACHE / archive_name
    if not archive.exists():
        pytest.skip(f"needs {archive_name} in .mine-cache")
    if archive_name.endswith(".whl"):
        with zipfile.ZipFile(archive) as wheel:
            wheel.extractall(into)
    else:
        with tarfile.open(archive) as sdist:
            sdist.extractall(into, filter="data")
    return into


def _child_json(tmp_path: Path, script: str, *args: str, **env: str) -> dict[str, str]:
    """Run ``script`` in a child interpreter (its argv ``args``, ``env`` added); its JSON line."""
    path = tmp_path / "child.py"
    path.write_text(script, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(path), *args], capture_output=True, timeout=300, check=False,
        env=_child_env(env),
    )  # fmt: skip
    assert 0 == done.returncode, done.stderr.decode()[-2000:]
    data: dict[str, str] = json.loads(done.stdout)
    return data


NVRTC_SCRIPT = """
import sys
import torch, torch.version
import torch.utils.cpp_extension as cpp_extension
from environments import environment, print_diagnosis, torch_build
from errkb.probes.stack import read_stack

site, cuda_home = sys.argv[1], sys.argv[2]
torch.version.cuda = "12.4"  # the machine: a CUDA 12.4 build of torch
cpp_extension.CUDA_HOME = cuda_home
from torch.cuda._utils import _nvrtc_compile

env = environment(torch=torch_build("2.5.1+cu124", cuda="12.4"), installed=read_stack([site]))
try:
    _nvrtc_compile('extern "C" __global__ void k(float* x) { x[0] = 1.0f; }', "k", "80")
except RuntimeError as exc:
    print_diagnosis(exc, env, message=str(exc))
"""


def test_nvrtc_without_its_builtins_raised_by_real_torch_gets_the_pinned_wheel(tmp_path):
    """torch 2.13.0's _nvrtc_compile with the real libnvrtc of nvidia-cuda-nvrtc-cu12 12.4.127,
    whose builtins library is gone: NVRTC's real log, and the pinned wheel reinstalled."""
    from environments import write_dist

    pytest.importorskip("torch.cuda._utils")
    site = _unpacked(NVRTC_WHEEL, tmp_path / "site-packages")
    lib = site / "nvidia" / "cuda_nvrtc" / "lib"
    (lib / "libnvrtc-builtins.so.12.4").unlink()
    pins = ('nvidia-cuda-nvrtc-cu12==12.4.127; platform_system == "Linux"',)  # torch 2.5.1's
    write_dist(site, "torch", "2.5.1", requires=pins)
    (tmp_path / "cuda" / "include").mkdir(parents=True)
    data = _child_json(tmp_path, NVRTC_SCRIPT, str(site), str(tmp_path / "cuda"),
                       LD_LIBRARY_PATH=str(lib), PYTHONPATH=str(DATA.parent))  # fmt: skip
    assert (
        True,
        "torch-nvrtc-builtins-missing",
        'pip install --force-reinstall --no-deps "nvidia-cuda-nvrtc-cu12==12.4.127"',
    ) == (
        "failed to open libnvrtc-builtins.so.12.4" in data["message"],
        data["record"],
        data["command"],
    )


TRITON_WHEEL = "triton-3.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"

TRITON_SCRIPT = """
import triton
from environments import doctor_command, environment, print_diagnosis, stack, torch_build

# The machine: torch's CPU build (this interpreter's) on an H100.
env = environment(torch=torch_build("2.13.0+cpu", cuda=None), installed=stack(("torch", "2.13.0+cpu")))
try:
    triton.runtime.driver.active.get_current_device()
except RuntimeError as exc:
    print_diagnosis(exc, env, message=str(exc), expected=doctor_command(env, "cpu-torch-with-gpu"))
"""


def _beside_cpython311_wheel(tmp_path, wheel, script):
    """What ``script`` prints, run with the files of a CPython 3.11 ``wheel`` (and torch)."""
    pytest.importorskip("torch")
    if sys.version_info[:2] != (3, 11):
        pytest.skip(f"{wheel} is CPython 3.11's")
    site = _unpacked(wheel, tmp_path / "site-packages")
    return _child_json(tmp_path, script, PYTHONPATH=f"{site}{os.pathsep}{DATA.parent}")


def test_triton_without_an_active_driver_raised_by_real_triton_gets_the_cuda_torch(tmp_path):
    """Triton 3.1.0 beside a CPU torch finds no active driver; on an H100 the fix is the doctor's
    cpu-torch-with-gpu command (triton's NVIDIA backend is active when torch has CUDA)."""
    data = _beside_cpython311_wheel(tmp_path, TRITON_WHEEL, TRITON_SCRIPT)
    assert (
        "0 active drivers ([]). There should only be one.",
        "triton-no-active-driver",
        data["expected"],
    ) == (data["message"], data["record"], data["command"])


XFORMERS_SDIST = "xformers-0.0.20.tar.gz"

XFORMERS_SCRIPT = """
import json
import torch
import errkb
import xformers.ops
from errkb.options import Options

q = torch.zeros(1, 4, 2, 8)  # CPU, float32: no kernel of the release takes them
try:
    xformers.ops.memory_efficient_attention(q, q, q)
except NotImplementedError as exc:
    finding = errkb.diagnose(exc, options=Options(probes=False, timeout=60.0)).findings[0]
    print(json.dumps({"message": str(exc), "record": finding.record.id}))
"""


def test_xformers_without_kernels_for_the_inputs_raised_by_real_xformers(tmp_path):
    """xformers 0.0.20's own dispatcher (its Python code, no compiled library) on CPU tensors."""
    pytest.importorskip("torch")
    tree = _unpacked(XFORMERS_SDIST, tmp_path) / "xformers-0.0.20"
    data = _child_json(tmp_path, XFORMERS_SCRIPT, PYTHONPATH=str(tree))
    assert (True, "xformers-no-operator-for-inputs") == (
        data["message"].startswith("No operator found for `memory_efficient_attention_forward`"),
        data["record"],
    )


BNB_WHEEL = "bitsandbytes-0.45.5-py3-none-manylinux_2_24_x86_64.whl"

BNB_SCRIPT = """
import bitsandbytes.cextension as cextension
from environments import doctor_command, environment, print_diagnosis, stack, torch_build

# The machine: torch's CPU build (this interpreter's) on an H100, bitsandbytes 0.45.5.
installed = stack(("torch", "2.13.0+cpu"), ("bitsandbytes", "0.45.5"))
env = environment(torch=torch_build("2.13.0+cpu", cuda=None), installed=installed)
try:
    cextension.get_native_library()
except OSError as exc:
    print_diagnosis(exc, env, message=str(exc), expected=doctor_command(env, "cpu-torch-with-gpu"))
"""


def test_bnb_library_file_missing_raised_by_real_bitsandbytes_gets_the_cuda_torch(tmp_path):
    """bitsandbytes 0.45.5 (its wheel, less libbitsandbytes_cpu.so) beside a CPU torch looks for
    its CPU library; on an H100 the fix is the doctor's CUDA torch."""
    pytest.importorskip("torch")
    site = _unpacked(BNB_WHEEL, tmp_path / "site-packages")
    (site / "bitsandbytes" / "libbitsandbytes_cpu.so").unlink()
    data = _child_json(tmp_path, BNB_SCRIPT, PYTHONPATH=f"{site}{os.pathsep}{DATA.parent}")
    assert (True, "bitsandbytes-native-library-file-missing", data["expected"]) == (
        data["message"].endswith(
            "bitsandbytes/libbitsandbytes_cpu.so: cannot open shared object file: No such file or "
            "directory"
        ),
        data["record"],
        data["command"],
    )


TORCHAUDIO_WHEEL = "torchaudio-2.5.1-cp311-cp311-manylinux1_x86_64.whl"

TORCHAUDIO_SCRIPT = """
from environments import environment, print_diagnosis, stack
from errkb.probes.stack import Broken

# The machine: torch 2.13.0 installed, torchaudio 2.5.1 requiring torch==2.5.1 (its wheel's pin).
pin = Broken(distribution="torchaudio", version="2.5.1", requirement="torch==2.5.1",
             required="torch", installed="2.13.0+cu126")
env = environment(installed=stack(("torch", "2.13.0+cu126"), ("torchaudio", "2.5.1"), broken=(pin,)))
try:
    import torchaudio
except OSError as exc:
    print_diagnosis(exc, env, cause=str(exc.__cause__))
"""


def test_torchaudio_built_for_another_torch_raised_by_the_real_loader(tmp_path):
    """torchaudio 2.5.1's own library (its wheel) under this torch: a real undefined symbol of
    torch's C++ library (its CUDA libraries stood in by empty ones); the pinned torch is the fix."""
    from environments import compile_library

    pytest.importorskip("torch")
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the torchaudio wheel read is CPython 3.11's")
    site = _unpacked(TORCHAUDIO_WHEEL, tmp_path / "site-packages")
    stubs = tmp_path / "stubs"
    for name in ("libtorch_cuda.so", "libc10_cuda.so", "libcudart.so.12"):
        compile_library("", stubs / name)
    data = _child_json(tmp_path, TORCHAUDIO_SCRIPT, LD_LIBRARY_PATH=str(stubs),
                       PYTHONPATH=f"{site}{os.pathsep}{DATA.parent}")  # fmt: skip
    assert (True, "torchaudio-extension-built-for-other-torch", 'pip install "torch==2.5.1"') == (
        "libtorchaudio.so: undefined symbol: _ZN" in data["cause"],
        data["record"],
        data["command"],
    )


GPU_BUILD_SCRIPT = """
from environments import doctor_command, environment, print_diagnosis, stack, torch_build

# The machine: this interpreter's CPU torch on an H100, PyPI's torchaudio 2.5.1 (a CUDA build).
installed = stack(("torch", "2.13.0+cpu"), ("torchaudio", "2.5.1"))
env = environment(torch=torch_build("2.13.0+cpu", cuda=None), installed=installed)
try:
    import torchaudio
except OSError as exc:
    print_diagnosis(exc, env, cause=str(exc.__cause__), expected=doctor_command(env, "cpu-torch-with-gpu"))
"""


def test_a_cuda_build_of_torchaudio_under_the_cpu_torch_gets_the_cuda_torch(tmp_path):
    """PyPI's torchaudio 2.5.1 links libtorch_cuda.so, which the CPU torch lacks: the real
    loader's error; on an H100 the fix is the doctor's CUDA torch."""
    data = _beside_cpython311_wheel(tmp_path, TORCHAUDIO_WHEEL, GPU_BUILD_SCRIPT)
    assert (
        "libtorch_cuda.so: cannot open shared object file: No such file or directory",
        "torch-extension-needs-gpu-build-of-torch",
        data["expected"],
    ) == (data["cause"], data["record"], data["command"])
