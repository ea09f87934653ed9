from __future__ import annotations

import gzip
import io
import json

import pytest
from conftest import NO_BLOCKS_MESSAGE, SEED_MESSAGE, run_cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errkb.scan
from errkb._scanplan import FindPlan
from errkb.exceptions import UsageError
from errkb.registry import default_registry
from errkb.scan import ENGINES, scan, scan_stream
from errkb.testing import record_dict, registry_from_dicts

NOISE = "INFO 11-30 06:00:01 [engine.py:{n}] Avg prompt throughput: 1.5 tokens/s, Running: 3 reqs"


def _log(n: int = 50) -> str:
    lines = [NOISE.format(n=i) for i in range(n)]
    lines[9] = f"ERROR 11-30 [core.py:1] ValueError: {SEED_MESSAGE}"
    lines[19] = f"ValueError: {NO_BLOCKS_MESSAGE}"
    lines[29] = f"(EngineCore pid=12) ValueError: {SEED_MESSAGE.replace('32768', '65536')}"
    return "\n".join(lines) + "\n"


@pytest.fixture(params=ENGINES)
def engine(request, monkeypatch):
    """Each test that takes it runs with every engine that finds needles."""
    if request.param == "ahocorasick":
        pytest.importorskip("ahocorasick_rs")
    monkeypatch.setenv("ERRKB_SCAN_ENGINE", request.param)
    return request.param


def _groups(result):
    return [(g.record.id, g.count, g.first_lines, g.example) for g in result.groups]


def test_scan_groups_by_record_with_counts_and_first_lines(engine):
    """Two lines of the seed's error and one of its sibling: counts and 1-based line numbers."""
    result = scan(io.StringIO(_log()))
    groups = {g.record.id: (g.count, g.first_lines) for g in result.groups}
    assert (2, (10, 30)) == groups["vllm-kv-cache-max-seq-len"]
    assert (1, (20,)) == groups["vllm-no-cache-blocks"]
    assert 50 == result.lines


def test_stream_and_lines_give_the_same_result(engine):
    """scan_stream over bytes and scan over lines agree (the CLI and the API are one)."""
    text = _log()
    a = scan(io.StringIO(text))
    b = scan_stream(io.BytesIO(text.encode()))
    assert [(g.record.id, g.count, g.first_lines) for g in a.groups] == [
        (g.record.id, g.count, g.first_lines) for g in b.groups
    ]


def test_blocks_split_mid_line_lose_nothing(monkeypatch, engine):
    """With tiny read blocks every line is still seen whole, and line numbers stay right."""
    monkeypatch.setattr(errkb.scan, "BLOCK", 7)
    result = scan_stream(io.BytesIO(_log().encode()))
    groups = {g.record.id: (g.count, g.first_lines) for g in result.groups}
    assert (2, (10, 30)) == groups["vllm-kv-cache-max-seq-len"]


def test_last_line_without_newline_counts(engine):
    """A log whose last line has no newline still has that line scanned and counted."""
    result = scan_stream(
        io.BytesIO((NOISE.format(n=1) + "\n" + f"ValueError: {NO_BLOCKS_MESSAGE}").encode())
    )
    assert [("vllm-no-cache-blocks", (2,))] == [(g.record.id, g.first_lines) for g in result.groups]
    assert 2 == result.lines


def test_scan_finds_records_whose_literals_are_alternatives(engine):
    """A record with a top-level alternation is found through its alternatives."""
    registry = registry_from_dicts(
        [record_dict(id="alt", messagePattern=r"disk (?:full|gone)|quota exceeded")]
    )
    result = scan_stream(
        io.BytesIO(b"a\nthe quota exceeded here\nb\ndisk gone\n"), registry=registry
    )
    assert [("alt", 2, (2, 4))] == [(g.record.id, g.count, g.first_lines) for g in result.groups]


def test_cli_scans_gzip_and_prints_json(tmp_path):
    """errkb scan file.gz --json reads gzip directly; exit 0 when something was found."""
    path = tmp_path / "serve.log.gz"
    path.write_bytes(gzip.compress(_log().encode()))
    proc = run_cli("scan", "--json", str(path))
    assert 0 == proc.returncode, proc.stderr
    data = json.loads(proc.stdout)
    assert "errkb.scan/1" == data["schema"]
    assert {"vllm-kv-cache-max-seq-len": 2, "vllm-no-cache-blocks": 1} == {
        g["id"]: g["count"] for g in data["groups"] if g["id"].startswith("vllm-")
    }


def test_cli_scans_stdin():
    """errkb scan - reads standard input, plain or gzip."""
    proc = run_cli("scan", "--json", "-", stdin=gzip.compress(_log().encode()))
    assert 0 == proc.returncode, proc.stderr
    assert 50 == json.loads(proc.stdout)["lines"]
    plain = run_cli("scan", "-", stdin=_log().encode())
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
        "scan", "--json", "-", stdin=_log().encode(), env={"ERRKB_SCAN_ENGINE": "python"}
    )
    assert 0 == python.returncode, python.stderr
    assert json.loads(python.stdout) == json.loads(
        run_cli("scan", "--json", "-", stdin=_log().encode()).stdout
    )
    bogus = run_cli("scan", "-", stdin=b"", env={"ERRKB_SCAN_ENGINE": "grep"})
    assert 2 == bogus.returncode
    assert b"unknown scan engine 'grep'" in bogus.stderr
    with pytest.raises(UsageError, match="unknown scan engine"):
        scan_stream(io.BytesIO(b""), engine="grep")


def test_a_runaway_line_is_cut_and_the_lines_after_it_still_count(monkeypatch, engine):
    """A line far longer than a block keeps memory bounded; numbering after it stays right."""
    monkeypatch.setattr(errkb.scan, "BLOCK", 64)
    monkeypatch.setattr(errkb.scan, "MAX_LINE", 200)
    log = "x" * 5000 + "\n" + f"ValueError: {NO_BLOCKS_MESSAGE}\n" + "y" * 1000
    blocks = list(errkb.scan._blocks(io.BytesIO(log.encode()), None))
    assert max(len(b) for b, _ in blocks) <= 64 + 200 + 1
    assert sum(n for _, n in blocks) == len(log)
    result = scan_stream(io.BytesIO(log.encode()))
    assert [("vllm-no-cache-blocks", (2,))] == [(g.record.id, g.first_lines) for g in result.groups]
    assert (3, len(log)) == (result.lines, result.bytes)


# Lines a log may hold: real messages of the shipped records, near misses, noise, oddities.
_EXAMPLES = sorted({e.split("\n")[0] for r in default_registry().records for e in r.examples})
_LINES = st.one_of(
    st.sampled_from(_EXAMPLES).map(lambda e: f"ERROR [core.py:1] {e}"),
    st.sampled_from(_EXAMPLES).map(lambda e: e[: len(e) // 2]),
    st.sampled_from([NOISE.format(n=1), "", "\r", "ÿ\x00 é", "CUDA error", "x" * 300]),
    st.text(max_size=40),
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(_LINES, max_size=30), st.booleans(), st.sampled_from([16, 100, 4096]))
def test_engines_agree_with_matching_every_line(lines, final_newline, block):
    """Both engines, at any block size, find what matching each line by itself finds."""
    text = "\n".join(lines) + ("\n" if final_newline else "")
    # A log's lines end at "\n" only (str.splitlines would also cut at "\x1e", "\x85", ...).
    body = text.removesuffix("\n")
    expected = scan(body.split("\n") if text else [], engine="python")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(errkb.scan, "BLOCK", block)
        for name, plan_min in (("ahocorasick", 0), ("python", 1 << 30), ("python", 0)):
            if name == "ahocorasick" and not _has_automaton():
                continue
            mp.setattr(errkb.scan, "PLAN_MIN", plan_min)  # 0: the python engine plans
            got = scan_stream(io.BytesIO(text.encode()), engine=name)
            assert _groups(got) == _groups(expected)
            assert got.lines == expected.lines


def _has_automaton() -> bool:
    try:
        import ahocorasick_rs  # noqa: F401
    except ImportError:
        return False
    return True


_BYTES = st.sampled_from([b"a", b"b", b"ab", b" ", b"`", b"Q", b"\xff", b"\x00", b"\n", b"must "])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.lists(_BYTES, min_size=1, max_size=5).map(b"".join), min_size=1, max_size=8),
    st.lists(_BYTES, max_size=60).map(b"".join),
    st.sampled_from(["none", "empty", "itself", "every byte"]),
)
def test_a_search_plan_finds_exactly_the_lines_holding_a_needle(needles, block, sample):
    """Whatever the sample the plan was made from, its lines are those holding a needle."""
    needles = [n for n in needles if b"\n" not in n and len(n) >= 1]
    samples = {"none": None, "empty": b"", "itself": block, "every byte": bytes(range(256)) * 20}
    plan = FindPlan(needles, samples[sample])
    expected, at = set(), 0
    for line in block.split(b"\n"):
        if any(n in line for n in needles):
            expected.add((at, at + len(line)))
        at += len(line) + 1
    assert plan.lines(block) == expected


def test_scan_reads_the_class_after_a_logging_prefix(engine):
    """'ERROR:logger:ValueError: ...' is matched with its class, as errkb explain reads it."""
    line = f"ERROR:vllm.engine:ValueError: {NO_BLOCKS_MESSAGE}"
    result = scan(io.StringIO(f"INFO:x:fine\n{line}\n"))
    assert [("vllm-no-cache-blocks", 1, (2,), line)] == _groups(result)
