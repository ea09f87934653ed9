"""errkb serve under attack: a real server on loopback, hostile requests, and the CLI's parsers.

Every case of issue 26 is here, with more of the same kinds and a hypothesis fuzz over the
request schema. Whatever is sent, the answer is a 2xx or a JSON 4xx (a 503 only where the time
bound is the point), it comes within the bound, and the server's peak memory stays under 300 MB
through the whole module. The server is ``errkb serve`` in a child process, met over real
sockets (http.client, and raw bytes where a client library would refuse to send them).
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from helpers import LLAMA, SEED_MESSAGE, _child_env, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

#: The server's time bound in this module, and how much later than it an answer may come.
TIMEOUT = 5.0
SLACK = 3.0
#: The peak memory the server may reach through the module (the issue's 10^8 layers: 1.6 GB).
MAX_RSS = 300 * 2**20
JSON = (("Content-Type", "application/json"),)
PLAIN = (("Content-Type", "text/plain"), ("X-Errkb-Client", "test"))
GZIP = (("Content-Type", "application/gzip"), ("X-Errkb-Client", "test"))
#: A token no latin-1 header decoding could match (issue 26, item 6).
TOKEN = "tøken-ü-€"
LINUX = Path("/proc/self/stat").exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``errkb serve`` in a child process: its port, its log, its memory and CPU time."""

    def __init__(self, tmp: Path, *args: str, quiet: bool = True) -> None:
        self.port = _free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.log = tmp / f"serve-{self.port}.log"
        argv = [sys.executable, "-m", "errkb", "serve", "--port", str(self.port), *args]
        argv += ["--quiet"] if quiet else []
        with self.log.open("wb") as out:
            self.child = subprocess.Popen(argv, stdout=out, stderr=out, env=_child_env(None))
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError):
                if ask(self, "GET", "/healthz")[0] == 200:
                    return
            if self.child.poll() is not None or time.monotonic() > deadline:
                self.stop()
                pytest.fail(f"errkb serve did not start: {self.log.read_text()}")
            time.sleep(0.1)

    def stop(self) -> None:
        self.child.terminate()
        try:
            self.child.wait(10)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()

    def peak_rss(self) -> int:
        """The most memory the process has held (VmHWM), in bytes."""
        for line in Path(f"/proc/{self.child.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmHWM")

    def cpu_seconds(self) -> float:
        """User and system CPU time of the process so far."""
        fields = Path(f"/proc/{self.child.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ask(
    server: Server,
    method: str,
    path: str,
    body: bytes | None = None,
    headers: tuple[tuple[str, str], ...] = (),
    *,
    host: str | None = "",
) -> tuple[int, dict[str, str], bytes, float]:
    """One request as sent, headers in order and repeated as given; (status, headers, body, s).

    ``host`` None sends no Host header; "" sends the server's own address.
    """
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    started = time.monotonic()
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        if host is not None:
            connection.putheader("Host", host or server.host)
        for name, value in headers:
            connection.putheader(name, value.encode("utf-8") if isinstance(value, str) else value)
        framed = {n.lower() for n, _ in headers} & {"content-length", "transfer-encoding"}
        if body is not None and not framed:
            connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        data = response.read()
        return (
            response.status,
            {k.lower(): v for k, v in response.getheaders()},
            data,
            time.monotonic() - started,
        )
    finally:
        connection.close()


def answered(reply: tuple[int, dict[str, str], bytes, float], *, allow_503: bool = False) -> dict:
    """A 2xx or a JSON 4xx (503 when allowed), within the bound; the JSON body."""
    status, headers, data, seconds = reply
    assert seconds < TIMEOUT + SLACK, f"answered after {seconds:.1f} s"
    ok = 200 <= status < 300 or 400 <= status < 500 or (allow_503 and status == 503)
    assert ok, f"{status}: {data[:300]!r}"
    if status >= 400:
        assert headers["content-type"] == "application/json"
        body = json.loads(data)
        assert status == body["status"]
        assert isinstance(body["error"], str)
        assert "Traceback" not in body["error"]
        return body
    return json.loads(data) if headers.get("content-type") == "application/json" else {}


def explain(server: Server, body: object, *extra: tuple[str, str]) -> tuple:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return ask(server, "POST", "/v1/explain", data, (*JSON, *extra))


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    if not LINUX:
        pytest.skip("reads the server's memory and CPU time from /proc")
    running = Server(
        tmp_path_factory.mktemp("hostile"),
        "--timeout",
        str(TIMEOUT),
        "--threads",
        "2",
        "--header-timeout",
        "2",
        quiet=False,
    )
    yield running
    running.stop()


@pytest.fixture(scope="module")
def token_server(tmp_path_factory):
    if not LINUX:
        pytest.skip("reads the server's memory and CPU time from /proc")
    tmp = tmp_path_factory.mktemp("token")
    token_file = tmp / "token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    running = Server(tmp, "--token-file", str(token_file), "--timeout", str(TIMEOUT), quiet=False)
    yield running
    running.stop()


def _config(**figures) -> dict:
    return {**LLAMA, **figures}


# -- issue 26, item 1: one small request froze the server ---------------------------------------


@pytest.mark.parametrize("layers", [10**8, 10**9, 10**300])
def test_absurd_layer_counts_are_422_naming_the_field_and_range(server, layers):
    """The issue's 900-byte request (10^8 layers), 10^9 and 10^300: 422 at once, not a freeze."""
    body = {"text": SEED_MESSAGE, "what_if": {"model_config": _config(num_hidden_layers=layers)}}
    assert len(json.dumps(body)) < 1300
    error = answered(explain(server, body))
    field = "what_if.model_config.num_hidden_layers"
    assert (422, field) == (error["status"], error["field"])
    assert f"{field}: expected a positive integer from 1 to 1,024, got " in error["error"]


def test_health_answers_while_layer_bombs_arrive(server):
    """Eight 10^8-layer requests at once: /healthz still answers, each bomb a 422."""
    body = {"text": SEED_MESSAGE, "what_if": {"model_config": _config(num_hidden_layers=10**8)}}
    replies: list[tuple] = []
    threads = [
        threading.Thread(target=lambda: replies.append(explain(server, body))) for _ in range(8)
    ]
    for t in threads:
        t.start()
    health = ask(server, "GET", "/healthz")
    for t in threads:
        t.join()
    assert 200 == health[0]
    assert [422] * 8 == [r[0] for r in replies]


# -- item 2: any web page could make a loopback server work --------------------------------------


@pytest.mark.parametrize(
    "kind",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", None],
)
def test_explain_needs_the_json_content_type(server, kind):
    """The no-cors types a page may send cross-origin (and none at all): 415."""
    headers = (("Content-Type", kind),) if kind else ()
    body = json.dumps({"text": SEED_MESSAGE}).encode()
    error = answered(ask(server, "POST", "/v1/explain", body, headers))
    assert (415, "Content-Type") == (error["status"], error["field"])


def test_the_issues_cross_origin_bomb_is_refused_before_any_work(server):
    """A page elsewhere sent text/plain with 10^7 layers: 403 for its Origin, no work done."""
    body = json.dumps({"text": "x", "what_if": {"model_config": _config(num_hidden_layers=10**7)}})
    reply = ask(
        server,
        "POST",
        "/v1/explain",
        body.encode(),
        (("Content-Type", "text/plain"), ("Origin", "https://evil.example")),
    )
    assert (403, "Origin") == (answered(reply)["status"], answered(reply)["field"])


@pytest.mark.parametrize(
    "origin",
    [
        "https://evil.example",
        "null",
        "http://127.0.0.1:1",
        "http://localhost.evil.example",
        "file://",
        "http://127.0.0.1.nip.io",
    ],
)
def test_a_foreign_origin_is_403(server, origin):
    """Any Origin but the server's own: 403, on the API and the page alike."""
    for method, path, body in (
        ("POST", "/v1/explain", json.dumps({"text": SEED_MESSAGE}).encode()),
        ("GET", "/v1/records?limit=1", None),
    ):
        error = answered(ask(server, method, path, body, (*JSON, ("Origin", origin))))
        assert (403, "Origin") == (error["status"], error["field"])


def test_the_servers_own_origin_is_let_through(server):
    """The console page's own Origin (http://127.0.0.1:PORT): answered."""
    reply = explain(server, {"text": SEED_MESSAGE}, ("Origin", f"http://{server.host}"))
    assert answered(reply)["matches"]


@pytest.mark.parametrize(
    "host", ["evil.example", "localhost.evil.example", "127.0.0.1.nip.io", "attacker.test:8000"]
)
def test_a_rebound_name_in_host_is_403(server, host):
    """DNS rebinding: the browser sends the attacker's name as Host; refused on every path."""
    for path in ("/v1/model-shapes", "/", "/healthz"):
        error = answered(ask(server, "GET", path, host=host))
        assert (403, "Host") == (error["status"], error["field"])


@pytest.mark.parametrize(
    "host", ["localhost", "LOCALHOST:80", "127.0.0.1", "[::1]:1234", "x.localhost"]
)
def test_loopback_names_in_host_are_served(server, host):
    """Loopback names and addresses, with or without a port: served."""
    assert 200 == ask(server, "GET", "/v1/model-shapes", host=host)[0]


def test_a_request_without_host_is_400(server):
    """HTTP/1.0 allows leaving Host out; the server names no host then: refused."""
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=30)
    with sock:
        sock.sendall(b"GET /v1/model-shapes HTTP/1.0\r\n\r\n")
        data = sock.makefile("rb").read()
    assert data.startswith(b"HTTP/1.1 400")
    assert b'"status":400' in data


def test_a_scan_needs_a_log_type_and_the_client_header(server):
    """text/plain without X-Errkb-Client is what any page can send: 403; JSON: 415."""
    log = b"ValueError: " + SEED_MESSAGE.encode() + b"\n"
    no_header = answered(ask(server, "POST", "/v1/scan", log, (("Content-Type", "text/plain"),)))
    assert (403, "X-Errkb-Client") == (no_header["status"], no_header["field"])
    wrong = answered(ask(server, "POST", "/v1/scan", log, JSON))
    assert (415, "Content-Type") == (wrong["status"], wrong["field"])
    assert answered(ask(server, "POST", "/v1/scan", log, PLAIN))["groups"]


# -- item 3: four inputs gave a plain-text 500 ---------------------------------------------------


def test_json_nested_970_deep_is_422(server):
    """970 levels of nesting (RecursionError before): 422 naming the body."""
    deep = b'{"text": "x", "what_if": ' + b'{"a": ' * 970 + b"1" + b"}" * 970 + b"}"
    error = answered(explain(server, deep))
    assert (422, "body") == (error["status"], error["field"])
    assert "nested deeper than 32 levels" in error["error"]


def test_json_nested_past_the_recursion_limit_is_422(server):
    """Deeper than Python's own limit: still 422, not 500."""
    deep = b'{"text": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert 422 == answered(explain(server, deep))["status"]


def test_three_hundred_nines_tib_is_422_naming_the_range(server):
    """what_if.gpu_memory of 300 nines and TiB (OverflowError before): 422 with the range."""
    error = answered(explain(server, {"text": "x", "what_if": {"gpu_memory": "9" * 300 + "TiB"}}))
    assert (422, "what_if.gpu_memory") == (error["status"], error["field"])
    assert "expected a size from 512 MiB to 4 TiB" in error["error"]


def test_a_frame_with_a_4301_digit_line_number_is_diagnosed(server):
    """A traceback frame whose line number has 4,301 digits (ValueError before): read, 200."""
    text = (
        "Traceback (most recent call last):\n"
        f'  File "serve.py", line {"9" * 4301}, in main\n'
        f"ValueError: {SEED_MESSAGE}\n"
    )
    diagnosis = answered(explain(server, {"text": text}))
    assert "vllm-kv-cache-max-seq-len" == diagnosis["matches"][0]["id"]


# -- item 5: absurd but accepted figures ----------------------------------------------------------


@pytest.mark.parametrize(
    ("what_if", "field", "said"),
    [
        ({"gpu_memory": 10**300}, "what_if.gpu_memory", "from 512 MiB to 4 TiB"),
        ({"gpu_memory": 1}, "what_if.gpu_memory", "from 512 MiB to 4 TiB"),
        ({"gpu_memory": "1B"}, "what_if.gpu_memory", "from 512 MiB to 4 TiB"),
        ({"gpu_memory": "5TiB"}, "what_if.gpu_memory", "from 512 MiB to 4 TiB"),
        ({"gpu_memory": "-1GiB"}, "what_if.gpu_memory", "such as 24GiB"),
        ({"gpu_memory": "24 gigs"}, "what_if.gpu_memory", "unknown size unit"),
        ({"gpu_memory": ""}, "what_if.gpu_memory", "such as 24GiB"),
        ({"gpu_memory": 2.5e10}, "what_if.gpu_memory", "a size"),
        ({"gpu_memory": [24]}, "what_if.gpu_memory", "a size"),
        ({"block_size": 10**300}, "what_if.block_size", "from 1 to 65,536"),
        ({"block_size": 65537}, "what_if.block_size", "from 1 to 65,536"),
        ({"block_size": -16}, "what_if.block_size", "positive integer"),
        ({"block_size": 16.0}, "what_if.block_size", "positive integer"),
        ({"block_size": "16"}, "what_if.block_size", "positive integer"),
        ({"tensor_parallel_size": 1025}, "what_if.tensor_parallel_size", "from 1 to 1,024"),
        ({"tensor_parallel_size": 0}, "what_if.tensor_parallel_size", "positive integer"),
        ({"gpu_memory_utilization": 0}, "what_if.gpu_memory_utilization", "above 0"),
        ({"gpu_memory_utilization": 1.0001}, "what_if.gpu_memory_utilization", "at most 1"),
        ({"gpu_memory_utilization": -0.5}, "what_if.gpu_memory_utilization", "above 0"),
        ({"gpu_memory_utilization": True}, "what_if.gpu_memory_utilization", "a number"),
        ({"gpu_memory_utilization": 1e308}, "what_if.gpu_memory_utilization", "at most 1"),
        ({"kv_cache_dtype": "x" * 41}, "what_if.kv_cache_dtype", "dtype name"),
        ({"dtype": "bf16\n"}, "what_if.dtype", "dtype name"),
        ({"model": "/etc/passwd"}, "what_if.model", "reads no file"),
        ({"x" * 5000: 1}, "what_if." + "x" * 37 + "...", "unknown field"),
    ],
)
def test_absurd_what_if_figures_are_422(server, what_if, field, said):
    """Each what-if figure out of its plausible range or kind: 422 naming it and the range."""
    error = answered(explain(server, {"text": SEED_MESSAGE, "what_if": what_if}))
    assert (422, field) == (error["status"], error["field"])
    assert said in error["error"]
    assert len(error["error"]) < 400


@pytest.mark.parametrize(
    ("figures", "name", "said"),
    [
        ({"num_hidden_layers": 0}, "num_hidden_layers", "positive integer"),
        ({"num_hidden_layers": 1025}, "num_hidden_layers", "from 1 to 1,024"),
        ({"num_hidden_layers": 32.0}, "num_hidden_layers", "positive integer"),
        ({"num_hidden_layers": True}, "num_hidden_layers", "positive integer"),
        ({"num_hidden_layers": [32]}, "num_hidden_layers", "positive integer"),
        ({"n_layer": 10**8}, "n_layer", "from 1 to 1,024"),
        ({"num_attention_heads": 10**6}, "num_attention_heads", "from 1 to 1,024"),
        ({"num_key_value_heads": 64}, "num_key_value_heads", "at most num_attention_heads (32)"),
        ({"num_key_value_heads": 0}, "num_key_value_heads", "positive integer"),
        ({"head_dim": 10**6}, "head_dim", "from 1 to 4,096"),
        ({"hidden_size": 10**9}, "hidden_size", "from 1 to 131,072"),
        ({"hidden_size": 16}, "hidden_size", "at least num_attention_heads"),
        ({"vocab_size": 10**9}, "vocab_size", "from 1 to 16,777,216"),
        ({"max_position_embeddings": 10**12}, "max_position_embeddings", "134,217,728"),
        ({"kv_lora_rank": 10**9}, "kv_lora_rank", "from 1 to 65,536"),
        ({"qk_rope_head_dim": "64"}, "qk_rope_head_dim", "an integer"),
        ({"sliding_window": 10**12}, "sliding_window", "134,217,728"),
        ({"sliding_window_pattern": 10**6}, "sliding_window_pattern", "from 1 to 1,024"),
        ({"attn_layer_period": 0}, "attn_layer_period", "positive integer"),
        ({"attn_layer_offset": -1}, "attn_layer_offset", "from 0 to 1,023"),
    ],
)
def test_absurd_model_config_figures_are_422(server, figures, name, said):
    """Each figure of a pasted config.json out of its range or kind: 422 naming it."""
    what_if = {"model_config": _config(**figures)}
    error = answered(explain(server, {"text": SEED_MESSAGE, "what_if": what_if}))
    field = f"what_if.model_config.{name}"
    assert (422, field) == (error["status"], error["field"])
    assert said in error["error"]


def test_a_text_config_with_absurd_layers_is_422(server):
    """The figure inside a multimodal config's text_config is checked too."""
    config = {"model_type": "llava", "text_config": _config(num_hidden_layers=10**8)}
    error = answered(explain(server, {"text": "x", "what_if": {"model_config": config}}))
    assert "what_if.model_config.text_config.num_hidden_layers" == error["field"]


def test_a_text_config_without_figures_is_422_not_a_transformers_import(server):
    """llava's config without layer counts: the server asks for them, never imports transformers."""
    config = {"model_type": "llava", "text_config": {"model_type": "llama"}}
    error = answered(explain(server, {"text": "x", "what_if": {"model_config": config}}))
    assert ("what_if.model_config.text_config", 422) == (error["field"], error["status"])


def test_a_layer_list_past_the_config_bound_is_422(server):
    """layer_types of 100,000 entries: the 256 KiB bound on a config refuses it."""
    config = _config(layer_types=["full_attention"] * 100_000)
    error = answered(explain(server, {"text": "x", "what_if": {"model_config": config}}))
    assert ("what_if.model_config", 422) == (error["field"], error["status"])


def test_a_config_nested_17_deep_is_422(server):
    """A config deeper than 16 levels: refused, naming the config."""
    nested: dict = {"a": 1}
    for _ in range(17):
        nested = {"a": nested}
    error = answered(explain(server, {"text": "x", "what_if": {"model_config": _config(x=nested)}}))
    assert "nested deeper than 16 levels" in error["error"]


def test_figures_in_range_still_give_the_fix(server):
    """The plausible ranges refuse no real figure: Llama 3.1 8B on 24 GiB gives its fix."""
    what_if = {"gpu_memory": "24GiB", "block_size": 16, "model_config": LLAMA}
    diagnosis = answered(explain(server, {"text": SEED_MESSAGE, "what_if": what_if}))
    facts = {f["name"]: f for f in diagnosis["facts"]}
    assert "computed" == facts["max_model_len_that_fits"]["source"]
    assert "model-config" == facts["num_kv_heads"]["source"]


# -- JSON that is not JSON, and bodies out of bounds ----------------------------------------------


@pytest.mark.parametrize(
    ("raw", "status"),
    [
        (b'{"text": NaN}', 400),
        (b'{"text": "x", "what_if": {"gpu_memory_utilization": Infinity}}', 400),
        (b'{"text": "x", "what_if": {"block_size": ' + b"9" * 5000 + b"}}", 400),
        (b"\xff\xfe{}", 400),
        (b"", 400),
        (b"null", 422),
        (b'"text"', 422),
        (b'{"text": {"a": 1}}', 422),
        (b'{"text": "\\ud800"}', 200),
        (b'{"text": "x\\u0000\\u001b[31m\\u202e"}', 200),
        (b'{"text": "x", "text": "y"}', 200),
    ],
)
def test_bodies_that_are_not_what_json_promised(server, raw, status):
    """NaN, Infinity, a 5,000-digit number, bad UTF-8, surrogates, controls: never a 500."""
    assert status == explain(server, raw)[0]
    answered(explain(server, raw))


def test_a_body_over_ten_mib_is_413_by_its_length_or_counted(server):
    """Announced over the JSON limit: 413 before a byte is read; chunked: 413 when counted."""
    announced = (*JSON, ("Content-Length", str(10 * 2**20 + 1)))
    assert 413 == answered(ask(server, "POST", "/v1/explain", None, announced))["status"]
    big = b'{"text": "' + b"x" * (10 * 2**20 + 10) + b'"}'
    chunks = b"".join(
        b"%x\r\n%s\r\n" % (len(big[i : i + 2**20]), big[i : i + 2**20])
        for i in range(0, len(big), 2**20)
    )
    chunked = (*JSON, ("Transfer-Encoding", "chunked"))
    reply = ask(server, "POST", "/v1/explain", chunks + b"0\r\n\r\n", chunked)
    assert 413 == answered(reply)["status"]


@pytest.mark.parametrize(
    ("length", "status"), [("abc", 400), ("-1", 400), ("5, 6", 400), ("1" * 30, 400)]
)
def test_a_broken_content_length_is_a_json_4xx(server, length, status):
    """h11 refuses the head, a 30-digit length too: a JSON 400, as every other error."""
    reply = ask(server, "POST", "/v1/explain", None, (*JSON, ("Content-Length", length)))
    assert status == answered(reply)["status"]


def test_a_head_over_h11s_limit_is_a_json_400(server):
    """A head past 16 KiB, still unfinished (h11 holds no more): a JSON 400, then closed."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {server.host}\r\nX-Big: ".encode())
        sock.sendall(b"a" * 20000)
        answer = sock.makefile("rb").read()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    assert b"content-type: application/json" in head.lower()
    assert 400 == json.loads(body)["status"]


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/v1/records?limit=" + "9" * 5000, 422),
        ("/v1/records?offset=" + "9" * 5000, 422),
        ("/v1/records?offset=1000000000000000000", 200),
        ("/v1/records?limit=-1", 422),
        ("/v1/records/" + "a" * 10000, 404),
        ("/v1/records/%00%0a%1b", 404),
        ("/static/..%2f..%2fetc%2fpasswd", 404),
        ("/static/%2e%2e", 404),
        ("/v1/explain?format=xml", 405),
        ("/nowhere", 404),
    ],
)
def test_hostile_paths_and_queries(server, path, status):
    """Huge numbers in the query, traversal in the path, bytes in the id: a JSON 4xx or 200."""
    reply = ask(server, "GET", path)
    assert status == reply[0]
    answered(reply)


def test_a_preflight_gets_no_cors_grant(server):
    """OPTIONS from another origin: refused, no Access-Control-Allow-Origin, so no cross post."""
    reply = ask(
        server,
        "OPTIONS",
        "/v1/explain",
        None,
        (("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST")),
    )
    assert 403 == answered(reply)["status"]
    assert "access-control-allow-origin" not in reply[1]


# -- item 6: tokens, the access log, the flags, slow clients --------------------------------------


def test_a_non_ascii_token_matches_as_utf8_bytes(token_server):
    """The token from --token-file, sent as its UTF-8 bytes: let through; latin-1 bytes: 401."""
    good = (("Authorization", b"Bearer " + TOKEN.encode("utf-8")),)
    assert 200 == ask(token_server, "GET", "/v1/model-shapes", None, good)[0]
    wrong = (("Authorization", b"Bearer " + TOKEN.encode("latin-1", "replace")),)
    error = answered(ask(token_server, "GET", "/v1/model-shapes", None, wrong))
    assert 401 == error["status"]
    assert "refused" in error["error"]


def test_two_authorization_headers_are_400(token_server):
    """Two Authorization headers (the last used to win): 400, whichever is right."""
    right = ("Authorization", b"Bearer " + TOKEN.encode())
    for pair in ((right, ("Authorization", "Bearer x")), (("Authorization", "Bearer x"), right)):
        error = answered(ask(token_server, "GET", "/v1/model-shapes", None, pair))
        assert 400 == error["status"]
        assert "Authorization" in error["error"]


@pytest.mark.parametrize("given", ["", "Bearer", "Bearer ", "Basic dG9rZW4=", "bearer" + " " * 300])
def test_malformed_authorization_is_401(token_server, given):
    """No scheme, no value, another scheme: 401 with WWW-Authenticate."""
    reply = ask(token_server, "GET", "/v1/records", None, (("Authorization", given),))
    assert 401 == answered(reply)["status"]
    assert "Bearer" == reply[1]["www-authenticate"]


def test_a_token_in_the_query_is_refused_and_never_logged(token_server):
    """?token= is no way in, and the access log writes the path without the query."""
    secret = "query-secret-4f7a"
    reply = ask(token_server, "GET", f"/v1/records?token={secret}&limit=1")
    assert 401 == reply[0]
    ask(token_server, "GET", "/healthz?token=" + secret)
    time.sleep(0.2)  # the access log line is written after the answer
    log = token_server.log.read_text(errors="replace")
    assert '"GET /v1/records HTTP/1.1" 401' in log
    assert "query-secret" not in log


def test_the_token_file_keeps_the_token_out_of_the_command_line(token_server):
    """ps shows the file's path, never the token."""
    argv = Path(f"/proc/{token_server.child.pid}/cmdline").read_bytes()
    assert b"--token-file" in argv
    assert TOKEN.encode() not in argv


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "0", "-1", "1e999"])
def test_a_timeout_that_is_no_bound_is_usage(value):
    """--timeout nan started and answered 500 to everything; now exit 2, one line."""
    done = run_cli("serve", f"--timeout={value}", "--port", str(_free_port()), timeout=60)
    assert 2 == done.returncode
    lines = done.stderr.decode().strip().splitlines()
    assert 1 == len(lines)
    assert "--timeout must be above 0 seconds and finite" in lines[0]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--threads", "0"), "--threads: expected 1 to 64"),
        (("--header-timeout", "nan"), "--header-timeout must be above 0"),
        (("--port", "70000"), "--port: expected 0 to 65535"),
        (("--token", "a", "--token-file", "b"), "not both"),
        (("--token-file", "/nonexistent/token"), "--token-file: cannot read"),
        (("--host", "[]"), "--host: expected an address"),
    ],
)
def test_serve_flags_that_cannot_work_are_usage(args, said):
    """Each unusable serve flag: exit 2 and one line naming it."""
    done = run_cli("serve", *args, timeout=60)
    assert 2 == done.returncode
    assert said in done.stderr.decode()


def test_an_empty_token_file_is_usage(tmp_path):
    """A token file with nothing in it would mean no token: refused."""
    empty = tmp_path / "token"
    empty.write_text("\n")
    done = run_cli("serve", "--host", "0.0.0.0", "--token-file", str(empty), timeout=60)
    assert 2 == done.returncode
    assert "is empty" in done.stderr.decode()


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.skipif(not _ipv6_loopback(), reason="no IPv6 loopback on this machine")
@pytest.mark.parametrize("host", ["[::1]", "::1"])
def test_an_ipv6_host_prints_a_valid_url_and_serves(host):
    """--host '[::1]' printed http://[[::1]]:PORT/ and exited 3; with or without brackets now."""
    port = _free_port()
    child = subprocess.Popen(
        [sys.executable, "-m", "errkb", "serve", "--host", host, "--port", str(port), "--quiet"],
        stderr=subprocess.PIPE,
        env=_child_env(None),
    )
    try:
        first = child.stderr.readline().decode()
        assert f"errkb: serving on http://[::1]:{port}/ (no token: loopback only)\n" == first
        deadline = time.monotonic() + 60
        while True:
            try:
                connection = http.client.HTTPConnection("::1", port, timeout=10)
                connection.request("GET", "/healthz", headers={"Host": f"[::1]:{port}"})
                assert 200 == connection.getresponse().status
                break
            except OSError:
                assert time.monotonic() < deadline
                assert child.poll() is None
                time.sleep(0.1)
    finally:
        child.terminate()
        child.wait(30)


@pytest.mark.parametrize(
    "sent", [b"", b"GET / HTTP/1.1\r\n", b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-A: b"]
)
def test_a_client_that_never_finishes_its_headers_is_closed(server, sent):
    """Nothing, half a request line, half the headers: closed after --header-timeout (2 s)."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(sent)
        assert b"" == sock.recv(100)  # closed by the server, not by the 30 s timeout here


def test_a_keep_alive_connection_that_sends_half_a_second_request_is_closed(server):
    """After one answer, one byte of the next request stops uvicorn's keep-alive timer: closed."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(f"GET /healthz HTTP/1.1\r\nHost: {server.host}\r\n\r\n".encode())
        reader = sock.makefile("rb")
        assert reader.readline().startswith(b"HTTP/1.1 200")
        length = 0
        while (line := reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode().partition(":")
            length = int(value) if name.lower() == "content-length" else length
        assert b"ok" in reader.read(length)
        sock.sendall(b"G")
        assert b"" == reader.read(1)  # closed by the server, not by the 30 s timeout here


# -- the last resort ------------------------------------------------------------------------------


def test_a_client_that_goes_away_mid_request_leaves_no_error(server):
    """A client that sends half a body and closes: nothing logged as an error, server fine."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(
            f"POST /v1/explain HTTP/1.1\r\nHost: {server.host}\r\n"
            'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"text": '.encode()
        )
    assert 200 == ask(server, "GET", "/healthz")[0]
    assert "Traceback" not in server.log.read_text(errors="replace")


# -- the fuzz -----------------------------------------------------------------------------------

_FIGURE = st.one_of(
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1, 16, 1024, 1025, 10**8, 10**300]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=3),
)
_CONFIG = st.dictionaries(
    st.sampled_from(
        [
            "num_hidden_layers",
            "n_layer",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "hidden_size",
            "vocab_size",
            "max_position_embeddings",
            "sliding_window",
            "sliding_window_pattern",
            "kv_lora_rank",
            "qk_rope_head_dim",
            "attn_layer_period",
            "model_type",
            "layer_types",
            "torch_dtype",
        ]
    ),
    _FIGURE,
    max_size=8,
).map(lambda extra: {**LLAMA, **extra})
_WHAT_IF = st.fixed_dictionaries(
    {},
    optional={
        "gpu_memory": st.one_of(_FIGURE, st.sampled_from(["24GiB", "1B", "9" * 300 + "TiB"])),
        "gpu_memory_utilization": _FIGURE,
        "block_size": _FIGURE,
        "kv_cache_dtype": _FIGURE,
        "tensor_parallel_size": _FIGURE,
        "dtype": _FIGURE,
        "model_config": st.one_of(_CONFIG, _FIGURE),
        "unknown": _FIGURE,
    },
)
_BODY = st.fixed_dictionaries(
    {"text": st.one_of(st.just(SEED_MESSAGE), st.text(max_size=200), _FIGURE)},
    optional={"what_if": st.one_of(_WHAT_IF, _FIGURE)},
)
#: Seconds the fuzz may run; it stops sending when they are spent.
FUZZ_SECONDS = 60.0
_fuzz_started: list[float] = []


@settings(
    max_examples=1500,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(body=_BODY)
def test_fuzz_the_request_schema(server, body):
    """Hypothesis over text and what_if, within a time budget: a 2xx or a JSON 4xx, in time."""
    _fuzz_started.append(_fuzz_started[0] if _fuzz_started else time.monotonic())
    if time.monotonic() - _fuzz_started[0] > FUZZ_SECONDS:
        return
    reply = explain(server, json.dumps(body, allow_nan=False).encode())
    answered(reply)
    if reply[0] == 422:
        field = json.loads(reply[2])["field"]
        assert field == "text" or field.startswith(("what_if", "body")), field


# -- item 4: work went on after the 503 -----------------------------------------------------------


def _bomb() -> bytes:
    """About 1.2 GB of log text in about a megabyte of gzip: 72 members of 16 MiB."""
    member = gzip.compress(b"INFO all good\n" * (16 * 2**20 // 14), compresslevel=9)
    return member * 72


def test_after_a_503_for_a_bomb_scan_the_cpu_time_stops_growing(tmp_path):
    """Four bombs at once on a 2 s bound: four 503s, and a second later no more CPU is spent."""
    if not LINUX:
        pytest.skip("reads the server's CPU time from /proc")
    bombed = Server(tmp_path, "--timeout", "2", "--threads", "2")
    try:
        bomb = _bomb()
        replies: list[tuple] = []
        threads = [
            threading.Thread(
                target=lambda: replies.append(ask(bombed, "POST", "/v1/scan", bomb, GZIP))
            )
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert [503] * 4 == [r[0] for r in replies]
        for reply in replies:
            answered(reply, allow_503=True)
        time.sleep(1.0)
        before = bombed.cpu_seconds()
        time.sleep(1.0)
        spent = bombed.cpu_seconds() - before
        assert spent < 0.1, f"the server spent {spent:.2f} s of CPU in the second after"
        assert 200 == ask(bombed, "GET", "/healthz")[0]
    finally:
        bombed.stop()


def test_a_slow_upload_is_stopped_at_the_bound(server):
    """A scan whose client sends a byte a second: 503 at the bound, not when the client stops."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=60) as sock:
        sock.sendall(
            f"POST /v1/scan HTTP/1.1\r\nHost: {server.host}\r\nContent-Type: text/plain\r\n"
            "X-Errkb-Client: test\r\nContent-Length: 100000\r\n\r\n".encode()
        )
        started = time.monotonic()
        answer = b""
        while not answer and time.monotonic() - started < 30:
            sock.sendall(b"x")
            if select.select([sock], [], [], 1.0)[0]:
                answer = sock.recv(4096)
        assert answer.startswith(b"HTTP/1.1 503")
        assert time.monotonic() - started < TIMEOUT + SLACK


# -- the CLI's parsers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (
            ("--gpu-memory", "9" * 300 + "TiB"),
            "--gpu-memory: expected a size from 512 MiB to 4 TiB",
        ),
        (("--gpu-memory", "1B"), "--gpu-memory: expected a size from 512 MiB to 4 TiB"),
        (("--block-size", "1" + "0" * 300), "--block-size: expected a positive integer from 1"),
        (("--block-size", "0"), "--block-size: expected a positive integer, got 0"),
        (("--gpu-memory-utilization", "nan"), "--gpu-memory-utilization: expected a number"),
        (("--gpu-memory-utilization", "2"), "--gpu-memory-utilization: expected a number above 0"),
        (("--tensor-parallel-size", "2000"), "--tensor-parallel-size: expected a positive integer"),
    ],
)
def test_the_clis_figures_are_bounded_too(flags, said):
    """explain's evidence flags out of range: exit 2 and one line naming the flag and range."""
    done = run_cli("explain", "--no-probes", SEED_MESSAGE, *flags)
    assert (2, b"") == (done.returncode, done.stdout)
    assert 1 == len(done.stderr.decode().strip().splitlines())
    assert said in done.stderr.decode()


def test_the_clis_model_with_absurd_layers_is_usage(tmp_path):
    """--model config.json with 10^8 layers: exit 2, the field and its range."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_config(num_hidden_layers=10**8)))
    done = run_cli("explain", "--no-probes", SEED_MESSAGE, "--model", str(path))
    assert 2 == done.returncode
    assert "field 'num_hidden_layers': expected a positive integer from 1 to 1,024" in (
        done.stderr.decode()
    )


def test_the_cli_reads_a_frame_with_a_4301_digit_line(tmp_path):
    """The CLI crashed on the same frame as the server: it diagnoses the message now."""
    text = (
        "Traceback (most recent call last):\n"
        f'  File "serve.py", line {"9" * 4301}, in main\n'
        f"ValueError: {SEED_MESSAGE}\n"
    )
    done = run_cli("explain", "--no-probes", "--json", "-", stdin=text.encode())
    assert 0 == done.returncode, done.stderr.decode()
    assert "vllm-kv-cache-max-seq-len" == json.loads(done.stdout)["matches"][0]["id"]


# -- through it all -------------------------------------------------------------------------------


def test_no_request_made_a_500_and_memory_stayed_under_300_mb(server):
    """Last in the module: the server's peak memory through every request above, and its log."""
    assert server.child.poll() is None
    assert server.peak_rss() < MAX_RSS, f"peak {server.peak_rss() / 2**20:.0f} MiB"
    log = server.log.read_text(errors="replace")
    assert " 500 " not in log
    assert "Traceback" not in log
