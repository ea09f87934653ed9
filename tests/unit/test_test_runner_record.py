"""PyTorch's test runner's own error: a test file's process ended by a signal.

test/run_test.py raises ``RuntimeError("<test> failed! Received signal: <SIG>")`` when a test
file's child process dies of a signal; the cause is in the child's lines above it. The paste is
the corpus's (tests/data/reports/corpus.jsonl, torch-27: a CI log where NCCL's error aborted
the child).
"""

from __future__ import annotations

import json
from pathlib import Path

from errkb.diagnosis import explain
from errkb.options import Options

CORPUS = Path(__file__).resolve().parents[1] / "data" / "reports" / "corpus.jsonl"


def _entry(entry: str) -> dict:
    with CORPUS.open(encoding="utf-8") as f:
        return next(e for e in map(json.loads, filter(str.strip, f)) if e["id"] == entry)


def test_the_runners_line_names_the_test_and_the_signal_and_the_file_to_run_alone():
    entry = _entry("torch-27")
    for text in (entry["text"], entry["errorLine"]):
        found = explain(text, options=Options(probes=False))
        assert found is not None
        top = found.top
        assert top.record.id == "torch-test-runner-child-signal"
        assert top.match.captures == {"test": "test_c10d", "shard": None, "signal": "SIGIOT"}
        texts = [s.text for s in top.solutions]
        assert any("python test/test_c10d.py -v" in t for t in texts), texts


def test_a_sharded_file_keeps_its_shard_out_of_the_command():
    # The runner names a sharded file with its shard (as PyTorch's CI prints it).
    line = "RuntimeError: inductor/test_torchinductor_opinfo 2/2 failed! Received signal: SIGSEGV"
    top = explain(line, options=Options(probes=False)).top
    assert top.record.id == "torch-test-runner-child-signal"
    captures = top.match.captures
    assert (captures["test"], captures["shard"], captures["signal"]) == (
        "inductor/test_torchinductor_opinfo",
        "2/2",
        "SIGSEGV",
    )
    texts = [s.text for s in top.solutions]
    assert any("python test/inductor/test_torchinductor_opinfo.py -v" in t for t in texts), texts
