"""errkb.probes.gpu: GPUs read through NVML with ctypes, honouring CUDA_VISIBLE_DEVICES.

The NVML library is a stand-in compiled here from tests/data/nvml/fake_nvml.c (two fixed
GPUs), loaded through ctypes exactly as the driver's libnvidia-ml would be.
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers import DATA

from errkb.probes import gpu


@pytest.fixture(scope="module")
def fake_nvml(tmp_path_factory):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("needs a C compiler to build the stand-in NVML library")
    out = tmp_path_factory.mktemp("nvml") / "libfake-nvml.so"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(out), str(DATA / "nvml" / "fake_nvml.c")], check=True
    )
    return str(out)


@pytest.fixture
def nvml(fake_nvml, monkeypatch):
    monkeypatch.setattr(gpu, "_NVML_NAMES", (fake_nvml,))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    return monkeypatch


def test_nvml_reads_every_gpu(nvml):
    """Both GPUs, with their names, total and free bytes and compute capability."""
    reading = gpu._nvml()
    assert reading is not None
    assert [
        (0, "NVIDIA H100 80GB HBM3", 85520809984, 80000000000, (9, 0)),
        (1, "NVIDIA A10G", 23836033024, 1000000000, (8, 6)),
    ] == [(d.index, d.name, d.total_bytes, d.free_bytes, d.capability) for d in reading.devices]


@pytest.mark.parametrize(
    ("visible", "names"),
    [
        ("1", ["NVIDIA A10G"]),
        ("1,0", ["NVIDIA A10G", "NVIDIA H100 80GB HBM3"]),
        ("GPU-bbbb", ["NVIDIA A10G"]),
        ("", []),
        ("0,7,1", ["NVIDIA H100 80GB HBM3"]),  # CUDA stops at the first invalid entry
    ],
)
def test_cuda_visible_devices_is_honoured(nvml, visible, names):
    """Device 0 is the first visible GPU, as torch numbers them."""
    nvml.setenv("CUDA_VISIBLE_DEVICES", visible)
    reading = gpu._nvml()
    assert reading is not None
    assert names == [d.name for d in reading.devices]
    assert list(range(len(names))) == [d.index for d in reading.devices]


def test_a_mig_instance_is_not_read_this_way(nvml):
    """MIG instances are not the devices NVML lists: no reading rather than a wrong one."""
    nvml.setenv("CUDA_VISIBLE_DEVICES", "MIG-0f6e6f5c-0000-0000-0000-000000000000")
    assert gpu._nvml() is None


def test_probe_uses_nvml_when_the_program_never_imported_torch(nvml):
    """probe_gpus in a program without torch: NVML answers, torch is not needed."""
    nvml.delitem(__import__("sys").modules, "torch", raising=False)
    reading = gpu.probe_gpus(timeout=10, import_torch=False)
    assert 2 == len(reading.devices)


def test_read_nvml_gives_the_driver_and_the_processes(nvml):
    """The stand-in driver's version, its CUDA version and who holds memory on which GPU."""
    nvml.setenv("FAKE_NVML_GPUS", "NVIDIA GeForce RTX 5090|12.0|34190917632|30000000000")
    nvml.setenv("FAKE_NVML_DRIVER", "570.86.15")
    nvml.setenv("FAKE_NVML_CUDA", "12080")
    nvml.setenv("FAKE_NVML_PROCS", "0:4242:2147483648:python3;0:77:1048576:Xorg")
    reading = gpu.read_nvml()
    assert reading is not None
    assert (
        "570.86.15",
        12080,
        [("NVIDIA GeForce RTX 5090", (12, 0))],
        [(0, 4242, 2147483648, "python3"), (0, 77, 1048576, "Xorg")],
    ) == (
        reading.driver_version,
        reading.cuda_driver_version,
        [(d.name, d.capability) for d in reading.devices],
        [(p.device, p.pid, p.used_bytes, p.name) for p in reading.processes],
    )


def test_more_processes_than_the_first_buffer_holds(nvml):
    """NVML's 'insufficient size' answer is followed by a larger buffer: all 16 are read."""
    nvml.setenv("FAKE_NVML_PROCS", ";".join(f"1:{1000 + i}:{i}:p{i}" for i in range(16)))
    reading = gpu.read_nvml()
    assert reading is not None
    assert list(range(1000, 1016)) == [p.pid for p in reading.processes]


def test_other_processes_are_named_with_their_memory_not_this_one(nvml):
    """What a program that imported torch reads of the others on each card: pids and bytes."""
    import os

    nvml.setenv(
        "FAKE_NVML_PROCS", f"0:4242:2147483648:python3;0:{os.getpid()}:1048576:me;1:77:4096:Xorg"
    )
    others = gpu._other_processes()
    assert [(4242, 2147483648)] == others[0]
    assert [(77, 4096)] == others[1]


def test_without_a_driver_nvml_is_not_loaded_and_ctypes_not_imported(fake_nvml, tmp_path):
    """On Linux with no NVIDIA driver (no /dev/nvidiactl, /proc/driver/nvidia or WSL's
    /dev/dxg) NVML cannot answer: the library is not looked for (no ctypes, none of the
    loader's tries through its folders). A library on LD_LIBRARY_PATH is still tried."""
    import os
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("the driver's device nodes are Linux's")
    folder = tmp_path / "lib"
    folder.mkdir()
    shutil.copy(fake_nvml, folder / "libnvidia-ml.so.1")
    program = (
        "import sys\n"
        "from errkb.probes import gpu\n"
        f"gpu._DRIVER_NODES = ({str(tmp_path / 'no-such-node')!r},)\n"
        "reading = gpu.read_nvml()\n"
        "print(reading is None, 'ctypes' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}

    def run(**extra: str) -> list[str]:
        out = subprocess.run(
            [sys.executable, "-c", program],
            check=False,
            env={**env, **extra},
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.split()

    assert run() == ["True", "False"]
    assert run(LD_LIBRARY_PATH=str(folder)) == ["False", "True"]  # the stand-in answered
    # A driver's node present: the library is looked for, through ctypes.
    program = program.replace(repr(str(tmp_path / "no-such-node")), repr(str(folder)))
    assert run()[1] == "True"


def test_without_a_driver_no_thread_is_started_to_learn_it(monkeypatch, tmp_path):
    """A program without torch on a machine with no NVIDIA driver (and no LD_LIBRARY_PATH to
    look in) is told so without a bounded thread: the hook's diagnosis waits on none. With a
    LD_LIBRARY_PATH folder, which may be a network one, the look stays in the thread."""
    import sys

    if not sys.platform.startswith("linux"):
        pytest.skip("the driver's device nodes are Linux's")
    monkeypatch.setattr(gpu, "_DRIVER_NODES", (str(tmp_path / "no-such-node"),))
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    monkeypatch.delenv("LD_LIBRARY_PATH", raising=False)
    started = []
    real = gpu.run_bounded
    monkeypatch.setattr(
        gpu, "run_bounded", lambda func, *a: started.append(func.__name__) or real(func, *a)
    )
    reading = gpu.probe_gpus(timeout=10, import_torch=False)
    assert ([], ()) == (started, reading.devices)
    assert "NVML (the NVIDIA driver's libnvidia-ml) is not available" in (reading.error or "")
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    assert reading == gpu.probe_gpus(timeout=10, import_torch=False)
    assert ["_nvml"] == started
