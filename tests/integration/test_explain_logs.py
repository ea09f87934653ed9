"""errkb explain on whole logs: read to the end, every failure found, root causes first.

The logs are printed by real Python: a child process logs ordinary lines with `logging`, then
the failures with `logger.exception` (the traceback Python formats), as a server does.
"""

from __future__ import annotations

import json
import textwrap

import pytest
from helpers import NO_BLOCKS_MESSAGE, SEED_MESSAGE, run_cli, run_python

#: A program that logs `lines` ordinary lines, then the failures named on its command line:
#: "no-blocks" raises vLLM's error in an engine function, "wrapper" the front end's report
#: of it, "seed" the KV-cache error, each caught and logged with its traceback.
_SERVER = textwrap.dedent(
    f"""
    import logging, sys
    logging.basicConfig(
        stream=sys.stdout, level=logging.INFO,
        format="%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s",
    )
    log = logging.getLogger("vllm")

    def run_engine_core():
        raise ValueError({NO_BLOCKS_MESSAGE!r})

    def wait_for_engine_startup():
        raise RuntimeError(
            "Engine core initialization failed. See root cause above. "
            "Failed core proc(s): {{'EngineCore_0': 1}}"
        )

    def initialize_kv_cache():
        raise ValueError({SEED_MESSAGE!r})

    RAISERS = {{
        "no-blocks": run_engine_core,
        "wrapper": wait_for_engine_startup,
        "seed": initialize_kv_cache,
    }}
    lines = int(sys.argv[1])
    for i in range(lines):
        log.info("Avg prompt throughput: %d.5 tokens/s, Running: %d reqs, GPU KV cache usage: 4.1%%.", i, i % 7)
    for name in sys.argv[2:]:
        try:
            RAISERS[name]()
        except Exception:
            log.exception("EngineCore failed to start." if name != "wrapper" else "API server failed")
        for i in range(3):
            log.info("Shutting down worker %d", i)
    """
)


def _log(lines: int, *failures: str) -> bytes:
    proc = run_python(_SERVER, str(lines), *failures)
    assert 0 == proc.returncode, proc.stderr
    return proc.stdout


def test_a_failure_at_the_end_of_a_long_log_is_found():
    """A log of several windows (~6 MB) with its only failure at the very end: found, exit 0."""
    log = _log(60_000, "seed")
    assert len(log) > 5_000_000
    proc = run_cli("explain", "--json", "--no-probes", "-", stdin=log)
    assert 0 == proc.returncode, proc.stderr
    data = json.loads(proc.stdout)
    assert "vllm-kv-cache-max-seq-len" == data["matches"][0]["id"]


def test_the_root_cause_is_the_diagnosis_and_the_wrapper_one_line_under_it():
    """vLLM's root cause printed first, its wrapper after: the root cause's block comes first,
    and the wrapper is one line of it, not a block of its own."""
    proc = run_cli(
        "explain", "--no-probes", "--no-color", "-", stdin=_log(20, "no-blocks", "wrapper")
    )
    assert 0 == proc.returncode, proc.stderr
    out = proc.stdout.decode()
    assert out.index("no memory left for any KV-cache block") < out.index("Reported again by")
    assert "(vllm-engine-core-initialization-failed)" in out
    # The wrapper has no block: its own "What happened" text is not shown.
    assert "This is a wrapper, not the cause" not in out


def test_json_lists_every_exception_with_its_failure_and_matches():
    """The JSON keeps every exception read, the failure it belongs to, and their matches."""
    proc = run_cli("explain", "--json", "--no-probes", "-", stdin=_log(20, "no-blocks", "wrapper"))
    data = json.loads(proc.stdout)
    assert ["ValueError", "RuntimeError"] == [e["class"] for e in data["exceptions"]]
    # The wrapper joins the failure of the root cause printed above it.
    assert 1 == len({e["failure"] for e in data["exceptions"]})
    assert "vllm-no-cache-blocks" == data["matches"][0]["id"]
    ids = {m["id"]: m["exception"] for m in data["matches"]}
    assert 1 == ids["vllm-engine-core-initialization-failed"]


def test_unrelated_failures_come_most_recent_first():
    """Two failures in one log: the later one is the diagnosis, the earlier one follows."""
    proc = run_cli("explain", "--json", "--no-probes", "-", stdin=_log(20, "no-blocks", "seed"))
    data = json.loads(proc.stdout)
    assert 2 == len({e["failure"] for e in data["exceptions"]})
    ids = [m["id"] for m in data["matches"] if not m["id"].startswith("chattts-")]
    assert ["vllm-kv-cache-max-seq-len", "vllm-no-cache-blocks"] == ids


def test_a_cut_is_said_on_stderr_even_when_nothing_matched():
    """A line longer than errkb reads whole is cut, and stderr says so, match or not."""
    proc = run_cli("explain", "--no-probes", "-", stdin=b"x" * (1 << 21) + b"\n")
    assert 1 == proc.returncode
    err = proc.stderr.decode()
    assert "errkb: line 1 was cut at 1,048,576 of its 2,097,153 characters" in err
    assert "no known error matches this text" in err


@pytest.mark.parametrize("stdin", [b"", b"\n  \n"])
def test_empty_input_is_a_usage_error(stdin):
    """Nothing on standard input: exit 2 and a line that says what to give."""
    proc = run_cli("explain", "-", stdin=stdin)
    assert 2 == proc.returncode
    assert b"nothing to explain" in proc.stderr
