"""The environment advisor in a child process, with the environment probe reading a real machine.

The machine is injected around real parts: the stand-in NVML as libnvidia-ml.so.1 on
LD_LIBRARY_PATH (an RTX 5090 under driver 570), and this virtual environment's real torch, the
CPU build, which raises "Torch not compiled with CUDA enabled" for real. The advisor's command
must be the one ``errkb doctor`` prints for the same machine.
"""

from __future__ import annotations

import json

import pytest
from environments import fake_nvml_env
from helpers import run_cli, run_python

CHILD = """
import json, torch, errkb
try:
    torch.zeros(1, device="cuda")
except AssertionError as exc:
    finding = errkb.diagnose(exc).findings[0]
print(json.dumps({
    "record": finding.record.id,
    "command": finding.solutions[0].settings.get("command"),
    "probed": sorted(f.name for f in finding.facts if f.source == "probe"),
}))
"""


@pytest.fixture(scope="module")
def machine(tmp_path_factory):
    """An RTX 5090 under driver 570 (CUDA 12.8), through the stand-in NVML."""
    root = tmp_path_factory.mktemp("machine")
    return fake_nvml_env(
        root / "nvml", "NVIDIA GeForce RTX 5090|12.0|34190917632|30000000000", "570.86.15", 12080
    )


def test_cpu_torch_on_an_rtx_5090_gets_the_doctor_s_command(machine):
    """Real torch's CPU build raises it; the probe reads NVML and the imported torch."""
    probe = run_python("import torch; print(torch.version.cuda)", env=machine)
    if probe.stdout.decode().strip() != "None":
        pytest.skip("this virtual environment's torch is not the CPU build")
    done = run_python(CHILD, env=machine, timeout=300)
    data = json.loads(done.stdout)
    doctor = json.loads(run_cli("doctor", "--json", env=machine, timeout=300).stdout)
    commands = {v["code"]: " && ".join(v["commands"]) for v in doctor["verdicts"]}
    assert (
        "torch-torch-not-compiled-with-cuda",
        commands["cpu-torch-with-gpu"],
        ["driver", "gpu", "torch"],
    ) == (data["record"], data["command"], data["probed"])
    assert "--index-url https://download.pytorch.org/whl/cu129" in data["command"]
