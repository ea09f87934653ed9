"""errkb doctor in child processes: this machine, and a machine injected around a real errkb.

The injected machine is real parts in temporary folders: the stand-in NVML as
libnvidia-ml.so.1 on LD_LIBRARY_PATH (an RTX 5090, driver 570, a process holding memory), a
torch package built for CUDA 12.6 and sm_50..sm_90 on PYTHONPATH, dist-info folders (vLLM
pinning another torch) and flash-attn's binary built here against a torch symbol that is not
there. errkb doctor reads it all as it would read a user's machine.
"""

from __future__ import annotations

import json
import sysconfig

import pytest
from environments import compile_library, fake_nvml_env, write_dist, write_fake_torch
from helpers import run_cli

from errkb.advisors.environment.verdicts import rebuild_command

WHL = "https://download.pytorch.org/whl"


def test_this_machine(tmp_path):
    """On the machine the tests run on: the JSON object, and the exit status it implies."""
    done = run_cli("doctor", "--json", timeout=300)
    data = json.loads(done.stdout)
    codes = [v["code"] for v in data["verdicts"]]
    assert ("errkb.doctor/1", 1 if data["broken"] else 0) == (data["schema"], done.returncode)
    if data["environment"]["nvml"] is None:  # no NVIDIA driver here: said plainly
        assert "no-gpu" in codes


def test_this_machine_without_a_gpu_says_so_plainly():
    """With no NVML on the machine, the first screen says there is no NVIDIA GPU."""
    done = run_cli("doctor", "--no-color", env={"LD_LIBRARY_PATH": "/nonexistent"}, timeout=300)
    text = done.stdout.decode()
    if "NVML: not read" not in text:
        pytest.skip("this machine has an NVIDIA driver")
    assert "errkb: No NVIDIA GPU: the GPU checks were skipped [note]" in text


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """The injected machine's environment variables."""
    root = tmp_path_factory.mktemp("machine")
    site = root / "site"
    write_fake_torch(
        site, "2.13.0+cu126", cuda="12.6", archs="sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
    )
    write_dist(site, "vllm", "0.6.3", ("torch==2.4.0",))
    binary = compile_library(
        "extern void _ZN3c104cuda9SetDeviceEa(signed char);\n"
        "void *PyInit_flash_attn_2_cuda(void) { _ZN3c104cuda9SetDeviceEa(0); return 0; }\n",
        root / "build" / "flash_attn_2_cuda.so",
    )
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    write_dist(
        site, "flash-attn", "2.7.4.post1", ("torch",), files={f"flash_attn_2_cuda{suffix}": binary}
    )
    return {
        "PYTHONPATH": str(site),
        **fake_nvml_env(
            root / "nvml",
            "NVIDIA GeForce RTX 5090|12.0|34190917632|30000000000",
            "570.86.15",
            12080,
        ),
        "FAKE_NVML_PROCS": "0:4242:2147483648:python3",
        "HOME": "/home/alice",
        "USER": "alice",
        "LOGNAME": "alice",
        "MASTER_ADDR": "https://bob:s3cretpassword@example.org",
        "NCCL_DEBUG_FILE": "/home/alice/nccl.log",
    }


def test_the_injected_machine_s_verdicts(machine):
    """The GPU is not in torch's build, vLLM pins another torch, flash-attn needs a rebuild."""
    done = run_cli("doctor", "--json", env=machine, timeout=300)
    data = json.loads(done.stdout)
    verdicts = {v["code"]: v["commands"] for v in data["verdicts"]}
    assert (1, True) == (done.returncode, data["broken"])
    assert {
        "gpu-arch-unsupported": [
            f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129"
        ],
        "requirement-broken": ['pip install "torch==2.4.0"'],
        "extension-other-torch": [rebuild_command("flash-attn", "2.7.4.post1")],
    } == verdicts


def test_the_injected_machine_s_facts(machine):
    """The facts are those injected: NVML's GPU, driver and process, the torch build."""
    data = json.loads(run_cli("doctor", "--json", env=machine, timeout=300).stdout)
    env = data["environment"]
    assert (
        "570.86.15",
        ["NVIDIA GeForce RTX 5090"],
        [4242],
        "12.6",
    ) == (
        env["nvml"]["driver_version"],
        [d["name"] for d in env["nvml"]["devices"]],
        [p["pid"] for p in env["nvml"]["processes"]],
        env["torch"]["cuda"],
    )


def test_markdown_for_an_issue_masks_secrets_and_the_user(machine):
    """--format markdown --hide-user: no password, no home folder, no user name."""
    done = run_cli("doctor", "--format", "markdown", "--hide-user", env=machine, timeout=300)
    text = done.stdout.decode()
    assert (1, False, False, True, True) == (
        done.returncode,
        "s3cretpassword" in text,
        "alice" in text,
        "\\~/nccl.log" in text,
        text.startswith("### errkb doctor: 3 broken, 0 warnings"),
    )


def test_usage_error_is_status_2():
    """An unknown format is a usage error."""
    assert 2 == run_cli("doctor", "--format", "yaml").returncode


def test_a_driver_under_cuda_13_s_minimum_through_the_stand_in_nvml(tmp_path):
    """Driver 575.57.08 (CUDA 12.9) read through NVML, a torch built for CUDA 13.0: the driver
    needed on Linux (>= 580.65.06) and the torch build this driver runs in full (cu129)."""
    site = tmp_path / "site"
    write_fake_torch(site, "2.13.0+cu130", cuda="13.0", archs="sm_75 sm_80 sm_86 sm_90 sm_100")
    env = {
        "PYTHONPATH": str(site),
        **fake_nvml_env(tmp_path / "nvml", "NVIDIA H100 80GB HBM3|9.0|85520809984|80000000000",
                        "575.57.08", 12090),
    }  # fmt: skip
    data = json.loads(run_cli("doctor", "--json", env=env, timeout=300).stdout)
    (verdict,) = [v for v in data["verdicts"] if v["code"] == "driver-too-old"]
    assert (
        [f"pip install --force-reinstall torch==2.13.0 --index-url {WHL}/cu129"],
        True,
        True,
    ) == (
        verdict["commands"],
        ">= 580.65.06 (Linux)" in verdict["fix"],
        "the driver is 575.57.08" in verdict["why"],
    )


def test_bitsandbytes_cpu_library_under_a_cuda_torch_through_the_real_probes(tmp_path):
    """bitsandbytes 0.45.5 with only its CPU library (built here), torch built for CUDA 12.4, an
    RTX 4090 through the stand-in NVML: the release with a library for CUDA 12.4 is the fix."""
    site = tmp_path / "site"
    write_fake_torch(
        site, "2.5.1+cu124", cuda="12.4", archs="sm_50 sm_60 sm_70 sm_75 sm_80 sm_86 sm_90"
    )
    cpu = compile_library("int cquantize_blockwise_cpu_fp32(void) { return 0; }\n",
                          tmp_path / "build" / "libbitsandbytes_cpu.so")  # fmt: skip
    write_dist(site, "bitsandbytes", "0.45.5", ("torch",),
               files={"bitsandbytes/libbitsandbytes_cpu.so": cpu})  # fmt: skip
    env = {
        "PYTHONPATH": str(site),
        **fake_nvml_env(tmp_path / "nvml", "NVIDIA GeForce RTX 4090|8.9|25757220864|24000000000",
                        "550.163.01", 12040),
    }  # fmt: skip
    done = run_cli("doctor", "--json", env=env, timeout=300)
    data = json.loads(done.stdout)
    verdicts = {v["code"]: v for v in data["verdicts"]}
    assert (1, ["pip install --force-reinstall --no-deps bitsandbytes==0.48.2"], True) == (
        done.returncode,
        verdicts["bitsandbytes-cpu-library"]["commands"],
        "torch 2.5.1+cu124 is built for CUDA 12.4" in verdicts["bitsandbytes-cpu-library"]["why"],
    )
