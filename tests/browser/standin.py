"""A stand-in for ``errkb serve`` while it is being written: the page's contract, nothing more.

Run as ``python standin.py PORT``. GET ``/`` and ``/static/{name}`` serve errkb's page with the
console's Content-Security-Policy; POST ``/v1/explain`` answers with what ``errkb explain
--json --no-probes`` prints for the same text and what-if figures (the CLI in a child process);
GET ``/v1/model-shapes`` lists the test model shapes; GET ``/healthz`` says ok.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

if TYPE_CHECKING:
    from starlette.requests import Request

import errkb
from errkb.units import parse_size

sys.path.insert(0, str(Path(__file__).parent.parent))
from helpers import DEEPSEEK_V3, GEMMA3, LLAMA

STATIC = Path(errkb.__file__).parent / "serve" / "static"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
FLAGS = {
    "gpu_memory": "--gpu-memory",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "block_size": "--block-size",
    "kv_cache_dtype": "--kv-cache-dtype",
    "tensor_parallel_size": "--tensor-parallel-size",
}


async def index(_: Request) -> Response:
    return FileResponse(STATIC / "index.html", headers={"Content-Security-Policy": CSP})


async def static(request: Request) -> Response:
    name = request.path_params["name"]
    if name not in {"index.html", "app.js", "app.css"}:
        return JSONResponse({"error": f"no such file: {name}", "field": None}, status_code=404)
    return FileResponse(STATIC / name)


def _refused(request: Request) -> Response | None:
    token = os.environ.get("ERRKB_SERVE_TOKEN")
    if token and request.headers.get("authorization") != f"Bearer {token}":
        return JSONResponse({"error": "a bearer token is needed", "field": None}, status_code=401)
    return None


async def explain(request: Request) -> Response:
    if refused := _refused(request):
        return refused
    body = await request.json()
    what_if = body.get("what_if") or {}
    if what_if.get("gpu_memory") is not None:
        try:
            parse_size(str(what_if["gpu_memory"]))
        except ValueError as exc:
            field = "what_if.gpu_memory"
            return JSONResponse({"error": f"{field}: {exc}", "field": field}, status_code=422)
    args = [sys.executable, "-m", "errkb", "explain", "--json", "--no-probes"]
    for key, flag in FLAGS.items():
        if what_if.get(key) is not None:
            args += [flag, str(what_if[key])]
    with tempfile.TemporaryDirectory() as folder:
        if what_if.get("model_config"):
            (Path(folder) / "config.json").write_text(json.dumps(what_if["model_config"]))
            args += ["--model", folder]
        done = await run_in_threadpool(
            subprocess.run,
            [*args, "-"],
            input=body["text"],
            capture_output=True,
            text=True,
            check=False,
        )
    if done.returncode not in (0, 1):
        return JSONResponse({"error": done.stderr.strip(), "field": None}, status_code=400)
    return Response(done.stdout, media_type="application/json")


async def shapes(request: Request) -> Response:
    if refused := _refused(request):
        return refused
    return JSONResponse(
        [
            {"name": "Llama-3-8B shape", "config": LLAMA},
            {"name": "Gemma-3-27B shape", "config": GEMMA3},
            {"name": "DeepSeek-V3 shape", "config": DEEPSEEK_V3},
        ]
    )


async def healthz(_: Request) -> Response:
    return JSONResponse({"status": "ok"})


app = Starlette(
    routes=[
        Route("/", index),
        Route("/static/{name}", static),
        Route("/v1/explain", explain, methods=["POST"]),
        Route("/v1/model-shapes", shapes),
        Route("/healthz", healthz),
    ]
)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), log_level="warning")
