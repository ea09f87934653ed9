"""errkb serve against the real thing: the CLI in a child process, uvicorn on loopback.

The API's numbers must be the CLI's for the same input; the bind and token rules are checked
on a real server started by ``errkb serve`` in a child process.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
from helpers import (
    DEEPSEEK_V3,
    GEMMA3,
    LLAMA,
    NO_BLOCKS_MESSAGE,
    SEED_MESSAGE,
    _child_env,
    run_cli,
    run_python,
    serve_log,
)

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")
from starlette.testclient import TestClient

from errkb.probes.model import GIVEN_CONFIG
from errkb.serve import create_app

_FLAGS = {
    "gpu_memory": "--gpu-memory",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "block_size": "--block-size",
    "kv_cache_dtype": "--kv-cache-dtype",
    "tensor_parallel_size": "--tensor-parallel-size",
    "dtype": "--dtype",
}
CASES = {
    "llama-80g-fp8-tp2": (
        SEED_MESSAGE,
        {
            "gpu_memory": "80GiB",
            "gpu_memory_utilization": 0.9,
            "block_size": 16,
            "kv_cache_dtype": "fp8",
            "tensor_parallel_size": 2,
            "dtype": "bfloat16",
        },
        LLAMA,
    ),
    "llama-24g": (SEED_MESSAGE, {"gpu_memory": "24GiB", "gpu_memory_utilization": 0.85}, LLAMA),
    "gemma3-no-blocks": (
        f"ValueError: {NO_BLOCKS_MESSAGE}",
        {"gpu_memory": "48GiB", "block_size": 32},
        GEMMA3,
    ),
    "deepseek-float32": (SEED_MESSAGE, {"gpu_memory": "141GiB", "dtype": "float32"}, DEEPSEEK_V3),
    "no-config": (SEED_MESSAGE, {"gpu_memory": "16GiB"}, None),
    "no-what-if": (SEED_MESSAGE, {}, None),
}


@pytest.fixture(scope="module")
def client():
    return TestClient(create_app(), base_url="http://127.0.0.1:8000")


def _cli_args(what_if: dict, config_path) -> list[str]:
    args = []
    for key, value in what_if.items():
        args += [_FLAGS[key], str(value)]
    if config_path is not None:
        args += ["--model", str(config_path)]
    return args


@pytest.mark.parametrize("case", list(CASES))
def test_what_if_numbers_equal_the_clis(client, tmp_path, case):
    text, what_if, config = CASES[case]
    path = None
    if config is not None:
        path = tmp_path / "config.json"
        path.write_text(json.dumps(config), encoding="utf-8")
    done = run_cli("explain", "--json", "--no-probes", *_cli_args(what_if, path), text)
    assert done.returncode == 0, done.stderr.decode()
    cli = done.stdout.decode()
    if path is not None:
        # The one difference: where the config was read from, a file or the request.
        assert str(path) in cli
        cli = cli.replace(json.dumps(str(path))[1:-1], GIVEN_CONFIG)
    body: dict = {"text": text}
    if what_if or config:
        body["what_if"] = {**what_if, **({"model_config": config} if config else {})}
    response = client.post("/v1/explain", json=body)
    assert response.status_code == 200
    served = response.json()
    assert served == json.loads(cli)
    assert served["matches"], "the case must match, or the comparison proves little"
    if config is not None:
        assert any(f["source"] == "model-config" for f in served["facts"])


def test_markdown_equals_the_clis_format_markdown(client):
    done = run_cli(
        "explain", "--format", "markdown", "--no-probes", "--gpu-memory", "24GiB", SEED_MESSAGE
    )
    assert done.returncode == 0, done.stderr.decode()
    served = client.post(
        "/v1/explain?format=markdown",
        json={"text": SEED_MESSAGE, "what_if": {"gpu_memory": "24GiB"}},
    )
    assert served.text == done.stdout.decode()
    assert served.text.startswith("### errkb: ")


def test_the_clis_json_flag_and_format_json_agree():
    by_flag = run_cli("explain", "--json", "--no-probes", SEED_MESSAGE)
    by_format = run_cli("explain", "--format", "json", "--no-probes", SEED_MESSAGE)
    assert by_flag.returncode == by_format.returncode == 0
    assert by_flag.stdout == by_format.stdout


def test_scan_upload_equals_errkb_scan_of_the_file(client, tmp_path):
    log = (serve_log(2000) + f"ValueError: {NO_BLOCKS_MESSAGE}\n").encode()
    path = tmp_path / "serve.log.gz"
    path.write_bytes(gzip.compress(log))
    done = run_cli("scan", "--json", str(path))
    assert done.returncode == 0, done.stderr.decode()
    cli = json.loads(done.stdout)
    served = client.post(
        "/v1/scan",
        content=path.read_bytes(),
        headers={"Content-Type": "application/gzip", "X-Errkb-Client": "test"},
    ).json()
    assert cli.pop("path") == str(path)
    # One source each, named by where it came from: the path (its host the folder), or the
    # console's upload (no host); the rest is the same.
    [upload], [file] = served.pop("sources"), cli.pop("sources")
    assert ("upload", None) == (upload.pop("source"), upload.pop("host"))
    assert (str(path), "tmp") == (file.pop("source"), file.pop("host"))
    assert upload == file
    for group in served["groups"]:
        assert (["upload"], [""]) == (group.pop("sources"), list(group.pop("hosts")))
    for group in cli["groups"]:
        assert ([str(path)], ["tmp"]) == (group.pop("sources"), list(group.pop("hosts")))
    assert served == {**cli, "notes": []}
    assert served["groups"]


def test_starlette_is_not_imported_by_errkb_or_other_commands():
    code = (
        "import sys, errkb; errkb.install(); "
        "from errkb.cli import main; main(['list', '--json']); "
        "print('starlette' in sys.modules, 'uvicorn' in sys.modules, file=sys.stderr)"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr.decode()
    assert done.stderr.decode().strip().splitlines()[-1] == "False False"


# -- a real server ------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str | None = None, body: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@contextlib.contextmanager
def _server(*args: str, env: dict[str, str] | None = None):
    port = _free_port()
    child = subprocess.Popen(
        [sys.executable, "-m", "errkb", "serve", "--port", str(port), "--quiet", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_child_env(env),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                if _get(f"{base}/healthz")[0] == 200:
                    break
            if child.poll() is not None or time.monotonic() > deadline:
                _, err = child.communicate(timeout=10)
                pytest.fail(f"errkb serve did not start: {err.decode()}")
            time.sleep(0.1)
        yield base
    finally:
        child.terminate()
        child.communicate(timeout=30)


def test_a_real_server_on_loopback_with_a_token():
    with _server("--token", "tok-1") as base:
        assert _get(f"{base}/v1/records?limit=1")[0] == 401
        assert _get(f"{base}/v1/records?limit=1", token="wrong")[0] == 401
        status, body = _get(f"{base}/v1/records?limit=1", token="tok-1")
        assert status == 200
        assert json.loads(body)["limit"] == 1
        explain = json.dumps({"text": SEED_MESSAGE}).encode()
        status, body = _get(f"{base}/v1/explain", token="tok-1", body=explain)
        assert status == 200
        assert json.loads(body)["matches"][0]["id"] == "vllm-kv-cache-max-seq-len"


def test_a_real_server_without_a_token_on_loopback_is_open():
    with _server() as base:
        assert _get(f"{base}/v1/model-shapes")[0] == 200


def test_off_loopback_without_a_token_it_refuses_to_start():
    done = run_cli("serve", "--host", "0.0.0.0", "--port", str(_free_port()), timeout=60)
    assert done.returncode == 2
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1
    assert "refusing to listen on 0.0.0.0 without a token" in lines[0]
    assert "ERRKB_SERVE_TOKEN" in lines[0]


def test_off_loopback_the_token_from_the_environment_is_enough_and_asked_for():
    with _server("--host", "0.0.0.0", env={"ERRKB_SERVE_TOKEN": "from-env"}) as base:
        assert _get(f"{base}/v1/model-shapes")[0] == 401
        assert _get(f"{base}/v1/model-shapes", token="from-env")[0] == 200
        assert _get(f"{base}/healthz")[0] == 200


def test_a_bad_timeout_is_usage():
    done = run_cli("serve", "--timeout", "0", timeout=60)
    assert done.returncode == 2
    assert "--timeout must be above 0" in done.stderr.decode()


def test_without_the_serve_extra_it_says_what_to_install():
    code = (
        "import sys; sys.modules['uvicorn'] = None; "
        "from errkb.cli import main; sys.exit(main(['serve']))"
    )
    done = run_python(code, timeout=60)
    assert done.returncode == 2
    assert "pip install 'errkb[serve]'" in done.stderr.decode()


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.4", False),
        ("example.internal", False),
    ],
)
def test_what_counts_as_loopback(host, loopback):
    from errkb.cli.serve import is_loopback

    assert is_loopback(host) is loopback
