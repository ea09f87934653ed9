from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from errkb.testing import record_dict

DATA = Path(__file__).parent / "data"

#: The old vLLM engine's KV-cache message, with the seed's example numbers.
SEED_MESSAGE = (
    "The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    "stored in KV cache (12288). Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine."
)
NO_BLOCKS_MESSAGE = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
    "initializing the engine."
)


@pytest.fixture(autouse=True, scope="session")
def _pack_cache(tmp_path_factory):
    """Pack caches go to a folder of the test run, never to the user's ~/.cache."""
    os.environ["ERRKB_CACHE_DIR"] = str(tmp_path_factory.mktemp("errkb-cache"))


def _child_env(env: dict[str, str] | None) -> dict[str, str]:
    """The environment of a child: ours, less errkb's settings and colour switches."""
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ERRKB_", "FORCE_COLOR", "NO_COLOR")) or k == "ERRKB_CACHE_DIR"
    }
    full_env.update(env or {})
    return full_env


def top_match(exc: BaseException):
    """The best match errkb finds for a real exception (failing, with its text, if none)."""
    import errkb

    matches = errkb.lookup(str(exc), type(exc))
    assert matches, str(exc)
    return matches[0]


def run_python(
    code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120, **kw
):
    """Run ``code`` in a fresh interpreter; returns the CompletedProcess with bytes output."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        env=_child_env(env),
        timeout=timeout,
        check=False,
        **kw,
    )


def run_cli(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None, timeout: float = 120
):
    """Run ``python -m errkb ARGS`` in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "errkb", *args],
        capture_output=True,
        env=_child_env(env),
        input=stdin,
        timeout=timeout,
        check=False,
    )


@pytest.fixture
def write_records(tmp_path):
    """Write record dicts (or raw text) into files under tmp_path; returns the folder."""

    def write(files: dict[str, object]) -> Path:
        for name, content in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                content if isinstance(content, str) else json.dumps(content), encoding="utf-8"
            )
        return tmp_path

    return write


@pytest.fixture
def good_record():
    return record_dict(
        id="acme-widget-jammed",
        slug="widget-jammed",
        messagePattern=r"widget (?P<name>\w+) jammed at (?P<speed>\d+(?:\.\d+)?) rpm",
        errorMessage="widget {name} jammed at {speed} rpm",
        errorClass="RuntimeError",
        examples=["widget alpha jammed at 1200 rpm", "widget b jammed at 3.5 rpm"],
        counterexamples=["widget alpha stopped at 1200 rpm"],
    )
