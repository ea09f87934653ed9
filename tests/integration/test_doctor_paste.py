"""A pasted environment through every surface: errkb doctor --from-paste, errkb explain, errkb serve.

Child processes run the real CLI; the console's API is a real ``errkb serve`` on loopback. The
pastes are the real outputs of tests/data/environments (README.md there gives each source).
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from helpers import DATA, _child_env, run_cli

ENVS = DATA / "environments"
RTX_5090D = ENVS / "pytorch-150733-collect-env-rtx5090d.txt"
CU129 = (
    "pip install --force-reinstall torch==2.13.0 --index-url https://download.pytorch.org/whl/cu129"
)


def test_doctor_from_paste_exits_1_with_the_command_for_the_pasted_machine():
    """The RTX 5090 D of pytorch#150733 is broken there: exit 1, the cu129 build shown."""
    done = run_cli("doctor", "--from-paste", str(RTX_5090D), "--no-color", "--width", "100")
    out = done.stdout.decode()
    assert 1 == done.returncode, done.stderr.decode()
    assert CU129 in out
    assert "nothing of this machine was read" in " ".join(out.split())


def test_doctor_from_paste_of_this_machines_collect_env_exits_0():
    """Our own collect_env: a CPU torch and no GPU, nothing broken."""
    done = run_cli("doctor", "--from-paste", str(ENVS / "local-collect-env.txt"), "--json")
    assert 0 == done.returncode, done.stderr.decode()
    data = json.loads(done.stdout)
    assert (False, ["collect_env"]) == (data["broken"], data["pasted"]["tools"])


def test_doctor_from_paste_reads_standard_input():
    """'-' reads the paste from stdin, as a support engineer pipes an issue's text."""
    done = run_cli(
        "doctor", "--from-paste", "-", "--format", "markdown", stdin=RTX_5090D.read_bytes()
    )
    assert 1 == done.returncode, done.stderr.decode()
    out = done.stdout.decode()
    assert out.startswith("### errkb doctor, from the pasted `collect_env`: 1 broken, 0 warnings")
    assert f"```\n{CU129}\n```" in out


def test_doctor_from_paste_of_bitsandbytes_cpu_library_beside_a_cuda_torch():
    """bitsandbytes#779's CPU library beside vllm#13497's collect_env (torch 2.5.1+cu121, an RTX
    4090): broken there, the bitsandbytes release with a library for CUDA 12.1 shown."""
    text = b"\n".join(
        (ENVS / n).read_bytes()
        for n in ("vllm-13497-collect-env-4090.txt", "bitsandbytes-779-cpu-library.txt")
    )
    done = run_cli("doctor", "--from-paste", "-", "--json", stdin=text)
    data = json.loads(done.stdout)
    verdicts = {v["code"]: v["commands"] for v in data["verdicts"]}
    assert (1, ["pip install --force-reinstall --no-deps bitsandbytes==0.48.2"]) == (
        done.returncode,
        verdicts.get("bitsandbytes-cpu-library"),
    )


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ("missing.txt", "cannot read 'missing.txt'"),
        (str(DATA / "pasted" / "short-oom-first-sentences.txt"), "holds no output of collect_env"),
    ],
    ids=["unreadable", "no-report"],
)
def test_doctor_from_paste_of_no_report_is_a_usage_error(given, said):
    """A file that cannot be read, or holds no report tool's output: exit 2, said on stderr."""
    done = run_cli("doctor", "--from-paste", given)
    assert (2, "") == (done.returncode, done.stdout.decode())
    assert said in done.stderr.decode()


def test_explain_shows_the_pastes_facts_under_their_source():
    """errkb explain of the issue's text: the facts read from it are labelled 'the paste'."""
    done = run_cli("explain", "--no-color", "--width", "100", "-", stdin=RTX_5090D.read_bytes())
    out = done.stdout.decode()
    assert 0 == done.returncode, done.stderr.decode()
    assert "the paste: gpu = NVIDIA GeForce RTX 5090 D (sm_120); driver = 570.124.04" in out
    assert CU129 in " ".join(out.split())


def _post(url: str, payload: dict) -> tuple[int, dict]:
    request = urllib.request.Request(url, data=json.dumps(payload).encode())
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=60) as response:
        return response.status, json.loads(response.read())


def test_the_console_api_judges_the_pasted_machine():
    """A real errkb serve on loopback: /v1/explain of the issue's text, the paste's facts."""
    pytest.importorskip("starlette")
    pytest.importorskip("uvicorn")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "errkb", "serve", "--port", str(port), "--quiet"]
    server = subprocess.Popen(command, env=_child_env(None), stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):  # up to a minute for the server to listen
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{base}/healthz", timeout=5).close()
                break
            time.sleep(0.1)
        status, data = _post(f"{base}/v1/explain", {"text": RTX_5090D.read_text(encoding="utf-8")})
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert 200 == status
    pasted = {f["name"]: f["value"] for f in data["facts"] if f["source"] == "paste"}
    assert "NVIDIA GeForce RTX 5090 D (sm_120)" == pasted["gpu"]
    assert CU129 == data["solutions"][0]["settings"]["command"]
