from __future__ import annotations

import io

import pytest
from helpers import NO_BLOCKS_MESSAGE, NOISE, serve_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errkb.scan
from errkb._scanplan import FindPlan
from errkb.registry import default_registry
from errkb.scan import ENGINES, scan, scan_stream
from errkb.testing import record_dict, registry_from_dicts


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
    result = scan(io.StringIO(serve_log()))
    groups = {g.record.id: (g.count, g.first_lines) for g in result.groups}
    assert (2, (10, 30)) == groups["vllm-kv-cache-max-seq-len"]
    assert (1, (20,)) == groups["vllm-no-cache-blocks"]
    assert 50 == result.lines


def test_stream_and_lines_give_the_same_result(engine):
    """scan_stream over bytes and scan over lines agree (the CLI and the API are one)."""
    text = serve_log()
    a = scan(io.StringIO(text))
    b = scan_stream(io.BytesIO(text.encode()))
    assert [(g.record.id, g.count, g.first_lines) for g in a.groups] == [
        (g.record.id, g.count, g.first_lines) for g in b.groups
    ]


def test_blocks_split_mid_line_lose_nothing(monkeypatch, engine):
    """With tiny read blocks every line is still seen whole, and line numbers stay right."""
    monkeypatch.setattr(errkb.scan, "BLOCK", 7)
    result = scan_stream(io.BytesIO(serve_log().encode()))
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
