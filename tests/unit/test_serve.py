"""errkb serve's API in process (Starlette's TestClient): every endpoint, every limit.

The server runs the real diagnosis, scan and registry; the slow request is honestly slow (a
log of several megabytes against a bound of a few milliseconds), the bomb a real gzip bomb.
"""

from __future__ import annotations

import gzip
import io
import json
import threading
import time

import pytest
from helpers import DEEPSEEK_V3, GEMMA3, LLAMA, SEED_MESSAGE, serve_log

pytest.importorskip("starlette")
from starlette.testclient import TestClient

from errkb._scanreport import report
from errkb.probes.model import model_shape
from errkb.registry import default_registry
from errkb.scan import scan_part
from errkb.serve import CSP, MODEL_SHAPES, create_app
from errkb.serve._fields import WHAT_IF

WHAT_IF_80G = {
    "gpu_memory": "80GiB",
    "gpu_memory_utilization": 0.9,
    "block_size": 16,
    "kv_cache_dtype": "fp8",
    "tensor_parallel_size": 2,
    "dtype": "bfloat16",
    "model_config": LLAMA,
}


#: The headers the console page sends with a log upload (a scan needs both).
PLAIN = {"Content-Type": "text/plain", "X-Errkb-Client": "test"}
GZIP = {"Content-Type": "application/gzip", "X-Errkb-Client": "test"}
JSON = {"Content-Type": "application/json"}


def _client(app) -> TestClient:
    """A test client that calls the server as its own page does: by a loopback address."""
    return TestClient(app, base_url="http://127.0.0.1:8000")


@pytest.fixture(scope="module")
def registry():
    return default_registry()


@pytest.fixture(scope="module")
def client(registry):
    return _client(create_app(registry=registry))


def _fact(diagnosis, name):
    return next(f for f in diagnosis["facts"] if f["name"] == name)


# -- /v1/explain ------------------------------------------------------------------------------


def test_explain_gives_the_diagnosis_with_the_what_if_figures(client):
    response = client.post("/v1/explain", json={"text": SEED_MESSAGE, "what_if": WHAT_IF_80G})
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    diagnosis = response.json()
    assert diagnosis["schema"] == "errkb.diagnosis/1"
    assert diagnosis["matches"][0]["id"] == "vllm-kv-cache-max-seq-len"
    assert _fact(diagnosis, "gpu_memory_total") == {
        "name": "gpu_memory_total",
        "value": 80 * 2**30,
        "unit": "bytes",
        "source": "flag",
    }
    assert _fact(diagnosis, "num_kv_heads")["note"] == "read from the model config given"
    # The server measured nothing of its own machine.
    assert any("probes are off" in n for n in diagnosis["notes"])


def test_explain_of_text_nothing_matches_is_the_empty_object(client):
    response = client.post("/v1/explain", json={"text": "all is well"})
    assert response.status_code == 200
    body = response.json()
    assert body["schema"] == "errkb.diagnosis/1"
    assert body["matches"] == []
    assert body["solutions"] == []


@pytest.mark.parametrize("how", ["query", "accept"])
def test_explain_in_markdown(client, how):
    kwargs = (
        {"params": {"format": "markdown"}}
        if how == "query"
        else {"headers": {"Accept": "text/markdown"}}
    )
    response = client.post(
        "/v1/explain", json={"text": SEED_MESSAGE, "what_if": {"gpu_memory": "24GiB"}}, **kwargs
    )
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/markdown; charset=utf-8"
    assert response.text.startswith("### errkb: ")
    assert "**Fix**: Lower max_model_len from 32768 to 12288" in response.text


def test_explain_markdown_long_form_has_the_record_documentation(client):
    short = client.post("/v1/explain?format=markdown", json={"text": SEED_MESSAGE}).text
    long = client.post("/v1/explain?format=markdown&detail=long", json={"text": SEED_MESSAGE}).text
    assert "**Solutions**" in long
    assert "**Solutions**" not in short


@pytest.mark.parametrize(
    ("body", "status", "field", "said"),
    [
        (b"{not json", 400, None, "not valid JSON"),
        (b"[1, 2]", 422, "body", "expected a JSON object"),
        (b"{}", 422, "text", "text: expected"),
        (b'{"text": "  "}', 422, "text", "text: expected"),
        (b'{"text": 3}', 422, "text", "text: expected"),
        (b'{"text": "x", "extra": 1}', 422, "extra", "extra: unknown field"),
        (b'{"text": "x", "what_if": 3}', 422, "what_if", "what_if: expected an object"),
        (
            b'{"text": "x", "what_if": {"gpu_memory_utilization": 1.5}}',
            422,
            "what_if.gpu_memory_utilization",
            "what_if.gpu_memory_utilization: expected a number above 0 and at most 1",
        ),
        (
            b'{"text": "x", "what_if": {"gpu_memory_utilization": "0.9"}}',
            422,
            "what_if.gpu_memory_utilization",
            "expected a number",
        ),
        (
            b'{"text": "x", "what_if": {"gpu_memory": "lots"}}',
            422,
            "what_if.gpu_memory",
            "what_if.gpu_memory: ",
        ),
        (
            b'{"text": "x", "what_if": {"block_size": 0}}',
            422,
            "what_if.block_size",
            "expected a positive integer, got 0",
        ),
        (
            b'{"text": "x", "what_if": {"tensor_parallel_size": true}}',
            422,
            "what_if.tensor_parallel_size",
            "expected a positive integer",
        ),
        (
            b'{"text": "x", "what_if": {"kv_cache_dtype": "fp8; rm -rf /"}}',
            422,
            "what_if.kv_cache_dtype",
            "expected a dtype name",
        ),
        (
            b'{"text": "x", "what_if": {"max_model_len": 4096}}',
            422,
            "what_if.max_model_len",
            "what_if.max_model_len: unknown field",
        ),
        (
            b'{"text": "x", "what_if": {"model": "/etc/passwd"}}',
            422,
            "what_if.model",
            "reads no file of its own machine",
        ),
        (
            b'{"text": "x", "what_if": {"model_config": "/root/config.json"}}',
            422,
            "what_if.model_config",
            "expected a JSON object",
        ),
        (
            (
                b'{"text": "x", "what_if": {"model_config": {"num_hidden_layers": "32", '
                b'"num_attention_heads": 32, "hidden_size": 4096}}}'
            ),
            422,
            "what_if.model_config.num_hidden_layers",
            'expected a positive integer, got "32"',
        ),
        (
            (
                b'{"text": "x", "what_if": {"model_config": {"num_hidden_layers": 32, '
                b'"num_attention_heads": -4, "hidden_size": 4096}}}'
            ),
            422,
            "what_if.model_config.num_attention_heads",
            "expected a positive integer, got -4",
        ),
        (
            b'{"text": "x", "what_if": {"model_config": {"model_type": "llama"}}}',
            422,
            "what_if.model_config",
            "no num_hidden_layers",
        ),
    ],
)
def test_explain_refuses_a_bad_body_naming_the_field(client, body, status, field, said):
    response = client.post(
        "/v1/explain", content=body, headers={"Content-Type": "application/json"}
    )
    assert response.status_code == status
    error = response.json()
    assert error["status"] == status
    assert said in error["error"]
    assert error.get("field") == field


def test_a_deep_or_huge_model_config_is_refused(client):
    deep: dict = {}
    inner = deep
    for _ in range(40):
        inner["x"] = {}
        inner = inner["x"]
    for config, said in (
        ({**LLAMA, "nest": deep}, "nested deeper than"),
        ({**LLAMA, "pad": "x" * 300_000}, "more than 262,144"),
    ):
        response = client.post(
            "/v1/explain", json={"text": "x", "what_if": {"model_config": config}}
        )
        assert response.status_code == 422
        assert said in response.json()["error"]


@pytest.mark.parametrize(("param", "value"), [("format", "xml"), ("detail", "medium")])
def test_explain_refuses_an_unknown_format_or_detail(client, param, value):
    response = client.post(f"/v1/explain?{param}={value}", json={"text": SEED_MESSAGE})
    assert response.status_code == 422
    assert response.json()["field"] == param


def test_a_body_over_the_limit_is_413_by_its_length_and_by_counting(registry):
    small = _client(create_app(registry=registry, max_json=1000))
    big = json.dumps({"text": "x" * 2000}).encode()
    announced = small.post("/v1/explain", content=big, headers={"Content-Type": "application/json"})
    assert announced.status_code == 413
    assert "the limit is 1,000" in announced.json()["error"]

    def chunked():  # no Content-Length: the server counts what it reads
        for i in range(0, len(big), 100):
            yield big[i : i + 100]

    counted = small.post("/v1/explain", content=chunked(), headers=JSON)
    assert counted.status_code == 413
    assert "over the limit of 1,000 bytes" in counted.json()["error"]
    # Under the limit, the same server answers.
    assert small.post("/v1/explain", json={"text": SEED_MESSAGE}).status_code == 200


def test_the_default_json_limit_is_ten_mib(client):
    body = b'{"text": "' + b"x" * (10 * 2**20) + b'"}'
    response = client.post("/v1/explain", content=body, headers=JSON)
    assert response.status_code == 413


def test_a_request_past_the_time_bound_is_503_and_the_server_goes_on(registry):
    # A log of several megabytes takes a real diagnosis far longer than 5 ms.
    log = serve_log(60_000) + SEED_MESSAGE + "\n"
    slow = _client(create_app(registry=registry, timeout=0.005))
    started = time.perf_counter()
    response = slow.post("/v1/explain", json={"text": log})
    assert response.status_code == 503
    assert "longer than the server's bound of 0.005 s" in response.json()["error"]
    assert time.perf_counter() - started < 5
    assert slow.get("/healthz").status_code == 200


def test_concurrent_requests_share_one_registry_and_agree(registry):
    app = _client(create_app(registry=registry))
    results: list[tuple[int, str]] = []

    def ask():
        for _ in range(5):
            r = app.post("/v1/explain", json={"text": SEED_MESSAGE, "what_if": WHAT_IF_80G})
            results.append((r.status_code, r.text))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 40
    assert {status for status, _ in results} == {200}
    assert len({text for _, text in results}) == 1


@pytest.mark.parametrize("shape", MODEL_SHAPES, ids=[s["name"] for s in MODEL_SHAPES])
def test_every_offered_shape_is_read_and_used(client, shape):
    model_shape(shape["config"], origin=shape["name"])
    assert shape["source"].startswith("https://huggingface.co/")
    response = client.post(
        "/v1/explain",
        json={
            "text": SEED_MESSAGE,
            "what_if": {"gpu_memory": "80GiB", "model_config": shape["config"]},
        },
    )
    assert response.status_code == 200
    assert _fact(response.json(), "attention_layers")["source"] == "model-config"


def test_the_shapes_the_tests_use_are_the_shapes_served():
    served = {s["name"]: s["config"] for s in MODEL_SHAPES}
    assert served["Llama-3.1-8B"] == LLAMA
    assert served["Gemma-3-27B"] == GEMMA3
    assert served["DeepSeek-V3"] == DEEPSEEK_V3


def test_model_shapes_endpoint(client):
    response = client.get("/v1/model-shapes")
    assert response.status_code == 200
    assert [s["name"] for s in response.json()["shapes"]] == [s["name"] for s in MODEL_SHAPES]


# -- /v1/scan --------------------------------------------------------------------------------


def _log() -> bytes:
    return serve_log(50).encode()


def _scanned(body: bytes, registry) -> dict:
    """What the lookup API's scan finds in ``body``, as the server's JSON."""
    return report(scan_part(io.BytesIO(body), source="upload", registry=registry), registry)


@pytest.mark.parametrize("form", ["plain", "gzip-magic", "gzip-header"])
def test_scan_finds_the_failure_in_an_upload(client, registry, form):
    body = _log() if form == "plain" else gzip.compress(_log())
    headers = {"Content-Encoding": "gzip"} if form == "gzip-header" else {}
    response = client.post("/v1/scan", content=body, headers={**PLAIN, **headers})
    assert response.status_code == 200
    found = response.json()
    assert found["schema"] == "errkb.scan/1"
    assert found["bytes"] == len(_log())
    assert found["notes"] == []
    assert found == {**_scanned(_log(), registry), "notes": []}
    seed = next(g for g in found["groups"] if g["id"] == "vllm-kv-cache-max-seq-len")
    assert seed["first_lines"] == [10, 30]


def test_scan_reads_gzip_members_one_after_another(client, registry):
    body = gzip.compress(_log()) + gzip.compress(_log())
    found = client.post("/v1/scan", content=body, headers=GZIP).json()
    assert found["bytes"] == 2 * len(_log())
    assert found == {**_scanned(_log() * 2, registry), "notes": []}


def test_a_gzip_bomb_is_cut_not_expanded(registry):
    # 64 members of 16 MiB each: 1 GiB of text in about 1 MB of gzip.
    member = gzip.compress(b"INFO all good\n" * (16 * 2**20 // 14), compresslevel=9)
    bomb = member * 64
    assert len(bomb) < 4 * 2**20
    limit = 2**20
    app = _client(create_app(registry=registry, max_upload=limit))
    started = time.perf_counter()
    response = app.post("/v1/scan", content=bomb, headers=GZIP)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200
    found = response.json()
    assert found["bytes"] == limit
    assert found["notes"] == [
        "the upload was cut at 1,048,576 bytes of text: what follows was not read"
    ]
    # Expanding the whole gigabyte would take many seconds; cutting takes a fraction of one.
    assert elapsed < 5


def test_a_plain_upload_is_cut_at_the_limit_too(registry):
    app = _client(create_app(registry=registry, max_upload=1000))
    found = app.post("/v1/scan", content=_log(), headers=PLAIN).json()
    assert found["bytes"] == 1000
    assert "cut at 1,000 bytes" in found["notes"][0]


def test_an_upload_exactly_at_the_limit_is_not_cut(registry):
    body = _log()
    for form in (body, gzip.compress(body)):
        app = _client(create_app(registry=registry, max_upload=len(body)))
        found = app.post("/v1/scan", content=form, headers=PLAIN).json()
        assert found["bytes"] == len(body)
        assert found["notes"] == []


@pytest.mark.parametrize(
    "body",
    [b"\x1f\x8b\x08\x00garbage", gzip.compress(_log())[:200]],
    ids=["garbage", "truncated"],
)
def test_broken_gzip_is_400(client, body):
    response = client.post("/v1/scan", content=body, headers=GZIP)
    assert response.status_code == 400
    assert "gzip" in response.json()["error"]


# -- /v1/records, /healthz, /openapi.json -------------------------------------------------------


def test_records_list_filters_and_pages(client, registry):
    everything = client.get("/v1/records?limit=1000").json()
    assert everything["total"] == len(registry)
    assert set(everything["records"][0]) == {"id", "slug", "title", "library", "tags"}
    page = client.get("/v1/records?limit=3&offset=2").json()
    assert [r["id"] for r in page["records"]] == [r["id"] for r in everything["records"][2:5]]
    assert (page["limit"], page["offset"]) == (3, 2)
    tagged = client.get("/v1/records?tag=kv-cache").json()
    assert tagged["total"] == len(registry.refs_with_tag("kv-cache")) > 0
    assert all("kv-cache" in r["tags"] for r in tagged["records"])
    vllm = client.get("/v1/records", params={"library": "vllm", "tag": "kv-cache"}).json()
    assert vllm["total"] > 0
    assert {r["library"] for r in vllm["records"]} == {"vllm"}


@pytest.mark.parametrize("query", ["limit=0", "limit=5000", "offset=-1", "limit=ten"])
def test_records_list_refuses_bad_paging(client, query):
    response = client.get(f"/v1/records?{query}")
    assert response.status_code == 422
    assert response.json()["field"] == query.split("=")[0]


def test_one_record_with_its_explanation(client, registry):
    record = registry.get("vllm-kv-cache-max-seq-len")
    body = client.get("/v1/records/vllm-kv-cache-max-seq-len").json()
    assert body["record"] == record.to_json()
    assert "errkb: " + record.title in body["explanation"]
    by_slug = client.get(f"/v1/records/{record.slug}")
    assert by_slug.status_code == 200
    markdown = client.get("/v1/records/vllm-kv-cache-max-seq-len?format=markdown")
    assert markdown.headers["content-type"] == "text/markdown; charset=utf-8"
    assert markdown.text.startswith("### errkb: ")


def test_an_unknown_record_is_404_with_a_message(client):
    response = client.get("/v1/records/no-such-record")
    assert response.status_code == 404
    assert response.json()["error"] == "no record has the id or slug 'no-such-record'"


def test_healthz(client, registry):
    from errkb._version import __version__

    assert client.get("/healthz").json() == {
        "status": "ok",
        "records": len(registry),
        "version": __version__,
    }


def test_an_unknown_endpoint_or_method_is_a_json_error(client):
    missing = client.get("/v2/explain")
    assert missing.status_code == 404
    assert "openapi.json" in missing.json()["error"]
    wrong = client.get("/v1/explain")
    assert wrong.status_code == 405


def test_the_openapi_document_describes_every_endpoint(client):
    doc = client.get("/openapi.json").json()
    assert doc["openapi"].startswith("3.")
    routes = {route.path for route in client.app.app.routes}  # the app inside the guard
    assert set(doc["paths"]) == routes
    for path, methods in doc["paths"].items():
        for operation in methods.values():
            assert "200" in operation["responses"], path
    explain = doc["paths"]["/v1/explain"]["post"]
    assert {"400", "401", "413", "422", "503"} <= set(explain["responses"])
    assert set(doc["components"]["schemas"]["WhatIf"]["properties"]) == set(WHAT_IF)
    assert "text/markdown" in explain["responses"]["200"]["content"]
    for ref in json.dumps(doc).split('"$ref": "#/components/schemas/')[1:]:
        assert ref.split('"')[0] in doc["components"]["schemas"]


# -- the token, the headers, the page ---------------------------------------------------------


def test_healthz_says_a_token_is_needed_only_where_one_is(registry, client):
    """/healthz answers without a token; on a token server it says one is needed."""
    app = _client(create_app(registry=registry, token="s3cret"))
    health = app.get("/healthz")
    assert 200 == health.status_code
    assert health.json()["token_required"] is True
    assert "token_required" not in client.get("/healthz").json()
    schema = client.get("/openapi.json").json()["components"]["schemas"]["Health"]
    assert {"type": "boolean", "const": True} == {
        k: v for k, v in schema["properties"]["token_required"].items() if k != "description"
    }


def test_with_a_token_every_v1_request_needs_it(registry):
    app = _client(create_app(registry=registry, token="s3cret"))
    for request in (
        lambda h: app.get("/v1/records", headers=h),
        lambda h: app.get("/v1/model-shapes", headers=h),
        lambda h: app.post("/v1/explain", json={"text": SEED_MESSAGE}, headers=h),
        lambda h: app.post("/v1/scan", content=_log(), headers={**PLAIN, **h}),
    ):
        missing = request({})
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"] == "Bearer"
        assert "needs a token" in missing.json()["error"]
        wrong = request({"Authorization": "Bearer nope"})
        assert wrong.status_code == 401
        assert "the right token" in wrong.json()["error"]
        assert request({"Authorization": "Bearer s3cret"}).status_code == 200
    # The health check and the page stay open: the page asks for the token itself.
    assert app.get("/healthz").status_code == 200
    assert app.get("/openapi.json").status_code == 200


@pytest.fixture
def static(tmp_path):
    (tmp_path / "index.html").write_text("<!doctype html><title>t</title>", encoding="utf-8")
    (tmp_path / "app.js").write_text("console.log(1)", encoding="utf-8")
    (tmp_path / "app.css").write_text("body{}", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("secret", encoding="utf-8")
    return tmp_path


def test_the_page_and_its_files_with_their_types_and_headers(registry, static):
    app = _client(create_app(registry=registry, static=static, token="t"))
    page = app.get("/")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.headers["content-security-policy"] == CSP
    assert page.headers["x-content-type-options"] == "nosniff"
    assert page.headers["referrer-policy"] == "no-referrer"
    assert app.get("/static/app.js").headers["content-type"] == "text/javascript; charset=utf-8"
    assert app.get("/static/app.css").headers["content-type"] == "text/css; charset=utf-8"
    # Only the page's own kinds of file, by a plain name: nothing else of the folder or beyond.
    assert app.get("/static/notes.txt").status_code == 404
    assert app.get("/static/..%2Fpyproject.toml").status_code == 404
    assert app.get("/static/.hidden.js").status_code == 404
    # Every response carries the headers, errors too.
    error = app.get("/v1/records")
    assert error.headers["content-security-policy"] == CSP
    assert error.headers["x-content-type-options"] == "nosniff"


def test_without_the_page_installed_the_root_says_so(registry, tmp_path):
    app = _client(create_app(registry=registry, static=tmp_path))
    response = app.get("/")
    assert response.status_code == 404
    assert response.json()["error"] == "the console page is not installed"


def test_the_shipped_page_is_served_when_there():
    from errkb.serve._app import STATIC

    if not (STATIC / "index.html").is_file():
        pytest.skip("the console page is not in this tree yet")
    app = _client(create_app())
    page = app.get("/")
    assert page.status_code == 200
    assert "<script" not in page.text or 'src="/static/' in page.text


def test_the_plausible_ranges_in_the_docs_are_the_codes():
    """docs/console.md prints every plausible range, its names and its reason, as the code has them."""
    from pathlib import Path

    from errkb.probes._plausible import MODEL_RANGES, WHAT_IF_RANGES

    docs = (Path(__file__).parents[2] / "docs" / "console.md").read_text(encoding="utf-8")
    for figure in (*WHAT_IF_RANGES, *MODEL_RANGES):
        names = " ".join(f"`{n}`" for n in (figure.name, *figure.aliases))
        assert f"| {names} | {figure.span} | {figure.why} |" in docs
