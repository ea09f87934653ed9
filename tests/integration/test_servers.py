"""Servers: a real app served by uvicorn on loopback, its error diagnosed in the server's log."""

from __future__ import annotations

import queue
import re
import subprocess
import sys
import textwrap
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers import NO_BLOCKS_MESSAGE, _child_env, top_match

import errkb

pytest.importorskip("uvicorn")
pytest.importorskip("starlette")

#: The app module, as the docs' recipe has it: attach() where the app is defined.
APP = f"""
import errkb.logging
from starlette.applications import Starlette
from starlette.routing import Route

errkb.logging.attach()


async def generate(request):
    raise ValueError({NO_BLOCKS_MESSAGE!r})


app = Starlette(routes=[Route("/generate", generate)])
"""

#: The same app run from Python: attach() first, then uvicorn configures its logging.
RUN = """
import uvicorn
import app

uvicorn.run(app.app, host="127.0.0.1", port=0, limit_max_requests=1)
"""

#: How long the server may take to start, answer, and stop by itself.
BOUND = 60.0


def _serve_one_request(argv: list[str], cwd) -> tuple[int, int, str]:
    """Run a server that stops after one request; send it that request, on loopback.

    Returns (HTTP status, the server's exit status, its log). The port is the one the server
    got from the system (port 0) and printed; everything is bounded by :data:`BOUND`.
    """
    server = subprocess.Popen(
        argv,
        cwd=cwd,
        env=_child_env({"NO_COLOR": "1", "PYTHONPATH": _pythonpath()}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in server.stderr:
            lines.put(line)
        lines.put(None)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    log: list[str] = []
    try:
        deadline = time.monotonic() + BOUND
        port = None
        while port is None:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.1))
            if line is None:
                pytest.fail("the server stopped before it listened:\n" + "".join(log))
            log.append(line)
            found = re.search(r"running on http://127\.0\.0\.1:(\d+)", line)
            port = int(found.group(1)) if found else None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/generate", timeout=BOUND) as r:
                status = r.status
        except urllib.error.HTTPError as err:
            status = err.code
        code = server.wait(timeout=BOUND)
        reader.join(timeout=BOUND)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    while (line := lines.get(timeout=BOUND)) is not None:
        log.append(line)
    return status, code, "".join(log)


def _pythonpath() -> str:
    """The folder this errkb comes from: the child runs in another folder, with the same errkb."""
    return str(Path(errkb.__file__).resolve().parents[1])


@pytest.fixture
def app_dir(tmp_path):
    """A folder holding app.py (the app, with the recipe) and run.py (uvicorn.run of it)."""
    (tmp_path / "app.py").write_text(textwrap.dedent(APP))
    (tmp_path / "run.py").write_text(textwrap.dedent(RUN))
    return tmp_path


def _assert_diagnosed_after_the_traceback(log: str) -> None:
    record_id = top_match(ValueError(NO_BLOCKS_MESSAGE)).record.id
    logged = log.find("Exception in ASGI application")
    raised = log.find(f"ValueError: {NO_BLOCKS_MESSAGE}")
    follows = log.find("ERROR:    errkb: ")
    assert -1 < logged < raised < follows, log
    assert record_id in log[follows:]
    assert 1 == log.count("ERROR:    errkb: ")


def test_uvicorn_command_line_logs_the_diagnosis_after_the_traceback(app_dir):
    """`uvicorn app:app` on 127.0.0.1, one request to an endpoint raising vLLM's no-cache-blocks
    error: HTTP 500, uvicorn's "Exception in ASGI application" with the traceback, then errkb's
    diagnosis in the same log; the server stops by itself (one request) with status 0."""
    argv = [sys.executable, "-m", "uvicorn", "app:app", "--host", "127.0.0.1", "--port", "0"]
    status, code, log = _serve_one_request([*argv, "--limit-max-requests", "1"], app_dir)
    assert (500, 0) == (status, code)
    _assert_diagnosed_after_the_traceback(log)


def test_uvicorn_run_configures_logging_after_attach(app_dir):
    """uvicorn.run(app) from Python: attach() ran before uvicorn configured its logging
    (dictConfig replaces the handlers); the diagnosis still follows the traceback."""
    status, code, log = _serve_one_request([sys.executable, "run.py"], app_dir)
    assert (500, 0) == (status, code)
    _assert_diagnosed_after_the_traceback(log)
