"""`errkb scan` in a child process, on real logs, and against `errkb explain` on every example."""

from __future__ import annotations

import gzip
import io
import json

import pytest
from helpers import DATA, NOISE, run_cli, run_python, serve_log

import errkb
from errkb.exceptions import UsageError
from errkb.registry import default_registry
from errkb.scan import scan_stream


def test_cli_scans_gzip_and_prints_json(tmp_path):
    """errkb scan file.gz --json reads gzip directly; exit 0 when something was found."""
    path = tmp_path / "serve.log.gz"
    path.write_bytes(gzip.compress(serve_log().encode()))
    proc = run_cli("scan", "--json", str(path))
    assert 0 == proc.returncode, proc.stderr
    data = json.loads(proc.stdout)
    assert "errkb.scan/1" == data["schema"]
    assert {"vllm-kv-cache-max-seq-len": 2, "vllm-no-cache-blocks": 1} == {
        g["id"]: g["count"] for g in data["groups"] if g["id"].startswith("vllm-")
    }


def test_cli_scans_stdin():
    """errkb scan - reads standard input, plain or gzip."""
    proc = run_cli("scan", "--json", "-", stdin=gzip.compress(serve_log().encode()))
    assert 0 == proc.returncode, proc.stderr
    assert 50 == json.loads(proc.stdout)["lines"]
    plain = run_cli("scan", "-", stdin=serve_log().encode())
    assert b"vllm-kv-cache-max-seq-len  (first at line 10, 30)" in plain.stdout


def test_cli_scan_nothing_found_exits_1_unreadable_exits_2(tmp_path):
    """Exit 1 when no known error is in the log, 2 when the file cannot be read."""
    clean = tmp_path / "clean.log"
    clean.write_text(NOISE.format(n=1) + "\n")
    assert 1 == run_cli("scan", str(clean)).returncode
    assert 2 == run_cli("scan", str(tmp_path / "missing.log")).returncode


def test_cli_scan_engine_from_the_environment():
    """ERRKB_SCAN_ENGINE picks the engine; an unknown one is a usage error (exit 2)."""
    python = run_cli(
        "scan", "--json", "-", stdin=serve_log().encode(), env={"ERRKB_SCAN_ENGINE": "python"}
    )
    assert 0 == python.returncode, python.stderr
    assert json.loads(python.stdout) == json.loads(
        run_cli("scan", "--json", "-", stdin=serve_log().encode()).stdout
    )
    bogus = run_cli("scan", "-", stdin=b"", env={"ERRKB_SCAN_ENGINE": "grep"})
    assert 2 == bogus.returncode
    assert b"unknown scan engine 'grep'" in bogus.stderr
    with pytest.raises(UsageError, match="unknown scan engine"):
        scan_stream(io.BytesIO(b""), engine="grep")


# Logs as the real tools print them (tests/data/pasted, see its README): each holds one failure.
_PASTED = DATA / "pasted"
_MANIFEST = json.loads((_PASTED / "manifest.json").read_text())
_ONE_FAILURE = [
    entry
    for entry in _MANIFEST
    if entry["file"].startswith(("log-", "trailing-", "escapes-syslog", "pytest-", "windows-"))
]


@pytest.mark.parametrize("entry", _ONE_FAILURE, ids=lambda e: e["file"])
def test_a_real_log_of_one_failure_counts_one(entry):
    """vLLM's engine core, Ray workers, torchrun --tee, pytest's summary: one failure, once."""
    with (_PASTED / entry["file"]).open("rb") as log:
        result = scan_stream(log)
    assert [(entry["record"], 1)] == [(g.record.id, g.count) for g in result.groups]


def test_vllm_engine_core_log_counts_the_cause_not_its_copy_or_wrapper():
    """The engine core logs the error (line 20), prints it again (43), the front end wraps it (64)."""
    with (_PASTED / "log-vllm-engine-core-raw.txt").open("rb") as log:
        result = scan_stream(log)
    assert [("vllm-no-cache-blocks", 1, (20,))] == [
        (g.record.id, g.count, g.first_lines) for g in result.groups
    ]


def test_cli_scan_counts_failures_of_a_real_log():
    """errkb scan prints one known error for vLLM's engine-core log, not three."""
    proc = run_cli("scan", str(_PASTED / "log-vllm-engine-core-raw.txt"))
    assert 0 == proc.returncode, proc.stderr
    assert b"1 known errors in 1 kinds" in proc.stdout


def _original(record) -> str:
    """A variant record (a vendored copy of another's error) stands for its original."""
    return record.variant_of or record.id


_EXAMPLES = [
    pytest.param(record.id, example, id=f"{record.id}-{i}")
    for record in default_registry().hand_written().records
    if not record.retired
    for i, example in enumerate(record.examples)
]


@pytest.mark.parametrize(("record_id", "example"), _EXAMPLES)
def test_scan_and_explain_agree_on_every_record_example(record_id, example):
    """A log holding a record's example, among INFO lines or at its end: scan's top group is
    explain's top match, a variant read as its original."""
    diagnosis = errkb.explain(example)
    expected = _original(diagnosis.top.match.record) if diagnosis is not None else None
    noise = [NOISE.format(n=i) for i in range(5)]
    for log in ("\n".join([*noise, example, *noise]), "\n".join([*noise, example])):
        groups = scan_stream(io.BytesIO(log.encode())).groups
        assert expected == (_original(groups[0].record) if groups else None), record_id


def _many_groups_log(path) -> None:
    """A log of the first lines of 60 records' examples under a vLLM prefix, among INFO lines."""
    records = [r for r in default_registry().hand_written().records if r.examples][:60]
    lines = [NOISE.format(n=1)]
    for record in records:
        lines += [f"ERROR 11-30 06:00:01 [core.py:9] {record.examples[0]}", NOISE.format(n=2)]
    path.write_text("\n".join(lines) + "\n")


_AHEAD = """
import json, os, signal, sys
from errkb._scanreport import fixes_ahead, report
from errkb.registry import default_registry
from errkb.scan import scan_part

path, kill = sys.argv[1], sys.argv[2] == "kill"
ahead = fixes_ahead(default_registry)
if ahead is None:
    sys.exit(3)
if kill:  # the child is gone before the scan tells it anything
    os.kill(ahead._pid, signal.SIGKILL)
registry = default_registry()
with open(path, "rb") as log:
    part = scan_part(log, source=path, registry=registry, opened=ahead.want)
made = ahead.fixes()
ahead.fixes = lambda: made
print(json.dumps([len(part.groups), len(made), report(part, registry, ahead), report(part, registry)]))
"""


@pytest.mark.parametrize("kill", ["keep", "kill"])
def test_fix_lines_made_ahead_in_a_child_are_those_made_here(tmp_path, kill):
    """errkb scan of one file has its groups' Fix lines made by a forked child while it reads
    (_scanreport.fixes_ahead): the report is the one made in the process, and a child that
    died leaves every line to be made in the process."""
    path = tmp_path / "serve.log"
    _many_groups_log(path)
    proc = run_python(_AHEAD, str(path), kill)
    if proc.returncode == 3:
        pytest.skip("no child is forked here: it needs Linux and two CPUs")
    assert 0 == proc.returncode, proc.stderr
    groups, made, ahead, here = json.loads(proc.stdout)
    assert groups >= 40  # a report that says something
    assert (groups if kill == "keep" else 0) == made
    assert here == ahead


def test_cli_scan_of_one_file_prints_what_a_scan_in_the_process_gives(tmp_path):
    """The CLI's report, Fix lines made by its child, is the in-process report; the child
    prints nothing."""
    from errkb._scanreport import report
    from errkb.scan import scan_part

    path = tmp_path / "serve.log"
    _many_groups_log(path)
    proc = run_cli("scan", "--json", str(path))
    assert 0 == proc.returncode, proc.stderr
    assert b"" == proc.stderr
    registry = default_registry()
    with path.open("rb") as log:
        expected = report(scan_part(log, source=str(path), registry=registry), registry)
    got = json.loads(proc.stdout)
    keys = ("id", "count", "first_lines", "example", "fix")
    assert len(got["groups"]) >= 40
    assert [[g[k] for k in keys] for g in expected["groups"]] == [
        [g[k] for k in keys] for g in got["groups"]
    ]
