from __future__ import annotations

import io

import pytest
from helpers import NO_BLOCKS_MESSAGE, NOISE, SEED_MESSAGE, serve_log
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import errkb._scanplan
import errkb.scan
from errkb._scanplan import FindPlan, first_line, spans_lines
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


@settings(max_examples=150, deadline=None)
@given(
    lines=st.lists(
        st.sampled_from([b"", b"a", b"bb b", b"c" * 40, b"d" * 130, b"\xff\r"]), max_size=30
    ),
    ends=st.booleans(),
    block=st.integers(1, 100),
    start=st.integers(0, 20),
)
def test_a_file_on_disk_is_cut_into_the_blocks_a_stream_is(
    tmp_path_factory, lines, ends, block, start
):
    """A file on disk has each block's last line found with os.pread and read in one piece,
    into buffers that take turns; the blocks and the bytes read are those that finishing the
    line with readline gives, lines longer than MAX_LINE (cut the same way) and a read that
    starts mid-file included."""
    data = b"\n".join(lines) + (b"\n" if ends else b"")
    path = tmp_path_factory.mktemp("log") / "app.log"
    path.write_bytes(data)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(errkb.scan, "BLOCK", block)
        mp.setattr(errkb.scan, "MAX_LINE", 50)
        stream = io.BytesIO(data)
        stream.seek(min(start, len(data)))
        expected = list(errkb.scan._blocks(stream, None))
        with path.open("rb") as file:
            file.seek(min(start, len(data)))
            assert errkb.scan._plain_file(file)[0] is not None  # the way under test is taken
            # Each block is taken before the next is read: its buffer is then read into again.
            assert expected == [(bytes(b), n) for b, n in errkb.scan._blocks(file, None)]


@settings(max_examples=300, deadline=None)
@given(
    block=st.binary(max_size=300).map(lambda b: b.replace(b"\x00", b"\n")),
    piece=st.integers(1, 40),
    small=st.integers(0, 50),
    data=st.data(),
)
def test_newlines_are_counted_as_bytes_count_counts_them(block, piece, small, data):
    """scan._newlines counts a stretch of a block a piece at a time, by what taking the
    newlines out of each piece takes away: it gives bytes.count's number, pieces cut anywhere."""
    start = data.draw(st.integers(0, len(block)))
    end = data.draw(st.integers(start, len(block)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(errkb.scan, "_COUNT_PIECE", piece)
        mp.setattr(errkb.scan, "_SMALL_COUNT", small)
        assert block.count(b"\n", start, end) == errkb.scan._newlines(block, start, end)


# Lines a log may hold: real messages of the shipped records (first lines, whole messages over
# several lines, under a log prefix), near misses, noise, oddities.
_RECORDS = [r for r in default_registry().hand_written().records if not r.retired]
_EXAMPLES = sorted({e.split("\n")[0] for r in _RECORDS for e in r.examples})
_WHOLE = sorted({e for r in _RECORDS for e in r.examples if "\n" in e})
_LINES = st.one_of(
    st.sampled_from(_EXAMPLES).map(lambda e: f"ERROR [core.py:1] {e}"),
    st.sampled_from(_EXAMPLES).map(lambda e: e[: len(e) // 2]),
    st.sampled_from(_WHOLE),
    st.sampled_from(_WHOLE).map(lambda e: "\n".join(f"(pid=1) E: {x}" for x in e.split("\n"))),
    st.sampled_from([NOISE.format(n=1), "", "\r", "ÿ\x00 é", "CUDA error", "x" * 300]),
    st.text(max_size=40),
)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    st.lists(_LINES, max_size=30),
    st.booleans(),
    st.sampled_from([16, 100, 4096]),
    st.sampled_from([(64, 64 * 1024), (3, 150)]),
)
def test_engines_agree_with_matching_every_line(lines, final_newline, block, window):
    """Both engines, at any block size, find what matching each line by itself finds.

    Windows (lines and bytes) small and large: a window cut by a block is carried over.
    """
    text = "\n".join(lines) + ("\n" if final_newline else "")
    # A log's lines end at "\n" only (str.splitlines would also cut at "\x1e", "\x85", ...).
    body = text.removesuffix("\n")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(errkb.scan, "WINDOW_LINES", window[0])
        mp.setattr(errkb.scan, "WINDOW_BYTES", window[1])
        expected = scan(body.split("\n") if text else [], engine="python")
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


# Messages over several lines, as torch, huggingface_hub and vLLM print them.
_GATED = (
    "403 Client Error.\n"
    "\n"
    "Cannot access gated repo for url https://huggingface.co/org/m/resolve/main/config.json.\n"
    "Access to model org/m is restricted and you are not in the authorized list."
)
_SIZE_MISMATCH = (
    "Error(s) in loading state_dict for Net:\n"
    "\tsize mismatch for fc.weight: copying a param with shape torch.Size([10, 4]) from "
    "checkpoint, the shape in current model is torch.Size([2, 4]).\n"
    "\tsize mismatch for fc.bias: copying a param with shape torch.Size([10]) from "
    "checkpoint, the shape in current model is torch.Size([2])."
)
_VLLM_PREFIX = "(EngineCore_0 pid=123) ERROR 11-30 14:02:11 [core.py:41] "
_WRAPPER = "RuntimeError: Engine core initialization failed. See root cause above."


def _log(*middle: str, before: int = 3, after: int = 3) -> str:
    """Noise lines, then ``middle`` (each may hold several lines), then noise lines."""
    noise = [NOISE.format(n=i) for i in range(before + after)]
    return "\n".join([*noise[:before], *middle, *noise[before:]]) + "\n"


def _found(text: str, **kwargs) -> list[tuple[str, int, tuple[int, ...]]]:
    result = scan_stream(io.BytesIO(text.encode()), **kwargs)
    return [(g.record.id, g.count, g.first_lines) for g in result.groups]


def test_spans_lines_reads_what_can_match_a_newline():
    """\\n, \\s, a negated class that lets a newline through, (?s). ; not [^\\n], \\S or plain ."""
    crossing = [r"a\nb", r"a\sb", r"a[^']+b", r"(?s)a.b", r"a[\x00-\x20]b", r"a[^[:alpha:]]"]
    single = [r"a[^)\n]*b", r"a\S+b", r"a.+b", r"a[\w.-]+", r"a\\nb", r"a[^\p{L}\n]"]
    assert [True] * len(crossing) == [spans_lines(p) for p in crossing]
    assert [False] * len(single) == [spans_lines(p) for p in single]


def test_first_line_is_the_pattern_up_to_what_can_match_a_newline():
    """Cut before the first newline-capable piece, or its outermost group; none after a '|'."""
    assert r"(\d{3}) Client Error\." == first_line(r"(\d{3}) Client Error\.\s+Cannot access")
    assert "load " == first_line(r"load (?P<p>[^']+) now")
    assert r"plain \d+" == first_line(r"plain \d+")
    assert first_line(r"a\sb|c") is None


def test_a_message_over_lines_is_found_from_its_first_line(engine):
    """A gated repo's message names its status on one line and the repo two lines on."""
    assert [("huggingface-hub-gated-repo", 1, (4,))] == _found(_log(_GATED))


def test_a_match_over_lines_keeps_the_lines_it_runs_over(engine):
    """The lines a match runs over are part of it: a record of one of them is not matched."""
    registry = registry_from_dicts(
        [
            record_dict(id="two-lines", messagePattern=r"alpha failed:\n\tbeta (?P<n>\d+)"),
            record_dict(id="one-line", messagePattern=r"beta (?P<n>\d+) broke"),
        ]
    )
    text = "alpha failed:\n\tbeta 5 broke\nlater: beta 6 broke\n"
    assert [("two-lines", 1, (1,)), ("one-line", 1, (3,))] == _found(text, registry=registry)


def test_a_window_carried_over_block_boundaries_loses_nothing(monkeypatch, engine):
    """However the blocks cut the message, and however small the window, the scan agrees."""
    text = _log(_GATED, _SIZE_MISMATCH, _GATED, before=30, after=30)
    expected = _found(text)
    monkeypatch.setattr(errkb.scan, "WINDOW_LINES", 4)
    monkeypatch.setattr(errkb.scan, "WINDOW_BYTES", 300)
    for block in (7, 64, 301, 1000):
        monkeypatch.setattr(errkb.scan, "BLOCK", block)
        assert expected == _found(text), block


def _ahead_and_in_turn(monkeypatch, text, blocks, scan_one) -> dict:
    """``scan_one(text)`` for each block size, with the blocks searched ahead in a worker
    thread (a second CPU) and searched in turn (one), by (ahead, block size)."""
    pytest.importorskip("ahocorasick_rs")
    monkeypatch.setenv("ERRKB_SCAN_ENGINE", "ahocorasick")
    monkeypatch.setattr(errkb.scan, "WINDOW_LINES", 4)
    monkeypatch.setattr(errkb.scan, "WINDOW_BYTES", 300)
    found = {}
    for ahead in (True, False):
        monkeypatch.delitem(errkb.scan._WORKERS, errkb.scan._AHEAD, raising=False)
        monkeypatch.setattr(errkb.scan, "_cpus", lambda ahead=ahead: 2 if ahead else 1)
        for block in blocks:
            monkeypatch.setattr(errkb.scan, "BLOCK", block)
            found[ahead, block] = scan_one(text)
        assert (errkb.scan._worker(errkb.scan._AHEAD) is not None) is ahead
    return found


def test_blocks_searched_ahead_give_what_blocks_searched_in_turn_give(monkeypatch):
    """With a second CPU the next block is searched in a thread while one is matched
    (scan._searched_ahead); the counts, line numbers and windows across block ends are the
    same as when each block is searched in turn."""
    text = _log(_GATED, _SIZE_MISMATCH, _GATED, SEED_MESSAGE, before=30, after=30)
    found = _ahead_and_in_turn(monkeypatch, text, (7, 301, 1000), _found)
    assert found[True, 1000]  # the log holds known errors: the comparison says something
    assert {k[1]: v for k, v in found.items() if k[0]} == {
        k[1]: v for k, v in found.items() if not k[0]
    }


def test_a_file_read_and_searched_ahead_gives_what_a_stream_searched_in_turn_gives(
    monkeypatch, tmp_path
):
    """A file on disk has its blocks read at their offsets by the worker that searches them,
    up to two blocks ahead of the one matched, into buffers that take turns: the counts, line
    numbers and windows are those of the same bytes read from a stream, block after block."""
    text = _log(_GATED, _SIZE_MISMATCH, _GATED, SEED_MESSAGE, _SIZE_MISMATCH, before=40, after=40)
    path = tmp_path / "app.log"
    path.write_bytes(text.encode())

    def from_file(text: str):
        with path.open("rb") as file:
            assert errkb.scan._plain_file(file)[0] is not None  # the way under test is taken
            result = scan_stream(file)
        return [(g.record.id, g.count, g.first_lines) for g in result.groups]

    on_disk = _ahead_and_in_turn(monkeypatch, text, (7, 301, 1000), from_file)
    streamed = _ahead_and_in_turn(monkeypatch, text, (7, 301, 1000), _found)
    assert on_disk[True, 1000]
    assert on_disk == streamed


def test_a_fleet_part_searched_ahead_is_the_part_searched_in_turn(monkeypatch):
    """A fleet scan also reads the lines that look like errors no record knows; with a second
    CPU the worker finds their words with the needles, and what a block's last lines held is
    kept for them while they wait for the next block. The part is the one each block searched
    in turn gives, unknown shapes and their line numbers included."""
    unknown = "ERROR 11-30 06:00:01 [core.py:7] RuntimeError: a failure no record knows"
    text = _log(_GATED, unknown, _SIZE_MISMATCH, unknown, SEED_MESSAGE, before=30, after=30)
    parts = _ahead_and_in_turn(
        monkeypatch,
        text,
        (7, 301, 1000, 1 << 20),
        lambda text: errkb.scan.scan_part(io.BytesIO(text.encode()), source="node-1/vllm.log"),
    )
    whole = parts[False, 1 << 20]
    assert len(whole.groups) == 3  # three known failures, and an unknown shape below
    assert [2] == [u.count for u in whole.unknown]
    assert all(part == whole for part in parts.values())  # line numbers of examples included


def test_a_window_is_bounded_by_lines(monkeypatch, engine):
    """A message whose end lies past the window's last line is not found through it."""
    registry = registry_from_dicts([record_dict(id="far", messagePattern=r"begin here:\s+end")])
    monkeypatch.setattr(errkb.scan, "WINDOW_LINES", 3)
    near = "begin here:\n\n\nend\n"
    far = "begin here:\n\n\n\nend\n"
    assert [("far", 1, (1,))] == _found(near, registry=registry)
    assert [] == _found(far, registry=registry)


def test_a_window_is_bounded_by_bytes(monkeypatch, engine):
    """A message whose end lies past the window's last byte is not found through it."""
    registry = registry_from_dicts([record_dict(id="far", messagePattern=r"begin here:\s+end")])
    monkeypatch.setattr(errkb.scan, "WINDOW_BYTES", 8)
    assert [("far", 1, (1,))] == _found("begin here:\n   \nend\n", registry=registry)
    assert [] == _found("begin here:\n        \nend\n", registry=registry)


def test_a_window_takes_off_the_first_lines_log_prefix(engine):
    """vLLM writes its prefix on every line of a message; Ray writes its part of it."""
    lines = [
        "RuntimeError: Error(s) in loading state_dict for Net:",
        '\tUnexpected key(s) in state_dict: "module.fc.weight". ',
    ]
    vllm = [_VLLM_PREFIX + x for x in lines]
    ray = [
        "(RayWorkerWrapper pid=7) ERROR [worker.py:1] " + lines[0],
        "(RayWorkerWrapper pid=7) " + lines[1],
    ]
    expected = [("torch-load-state-dict-missing-unexpected-keys", 1, (4,))]
    assert expected == _found(_log(*vllm))
    assert expected == _found(_log(*ray))


def test_a_line_with_no_class_is_read_after_its_log_prefix(engine):
    """Its message is what follows the prefix, as a pasted line is read: a pattern that starts
    the message (``^``) finds it, and the line is still read whole when that finds nothing."""
    registry = registry_from_dicts(
        [
            record_dict(id="starts", messagePattern=r"^Engine core died \w+"),
            record_dict(id="prefixed", messagePattern=r"\[core\.py:\d+\] Worker \d+ died"),
        ]
    )
    log = _log(
        _VLLM_PREFIX + "Engine core died unexpectedly",
        NOISE.format(n=99),
        "ERROR 11-30 14:02:12 [core.py:9] Engine core died again",
        "ERROR 11-30 14:02:12 [core.py:9] Worker 3 died",
    )
    assert [("starts", 2, (4, 6)), ("prefixed", 1, (7,))] == _found(log, registry=registry)


def test_a_window_with_no_class_takes_off_the_first_lines_log_prefix(engine):
    """A message over lines that names no class: its lines are read without vLLM's prefix."""
    registry = registry_from_dicts(
        [record_dict(id="gated", messagePattern=r"^403 Client Error\.\n\nCannot access gated")]
    )
    lines = _GATED.split("\n")
    assert [("gated", 1, (4,))] == _found(
        _log(*(_VLLM_PREFIX + x for x in lines)), registry=registry
    )


def test_a_first_line_alone_is_a_message_cut_short(engine):
    """A line that a message over lines starts on, then unrelated lines: the message is cut."""
    assert [("torch-load-state-dict-missing-unexpected-keys", 1, (4,))] == _found(
        _log("Error(s) in loading state_dict for Net:")
    )


def test_a_first_line_the_next_line_goes_on_from_is_not_cut(engine):
    """Size mismatches after 'Error(s) in loading state_dict': not missing keys cut short."""
    assert [("torch-load-state-dict-size-mismatch", 1, (5,))] == _found(_log(_SIZE_MISMATCH))


def test_one_message_listing_a_record_on_consecutive_lines_counts_once(engine):
    """torch lists a size mismatch a line: two lines, one failure, counted at the first."""
    groups = _found(_log(_SIZE_MISMATCH))
    assert 1 == groups[0][1]


def test_the_same_message_again_within_the_repeat_window_counts_once(engine):
    """vLLM logs an error, then prints its traceback again: one failure."""
    line = f"ValueError: {NO_BLOCKS_MESSAGE}"
    text = _log(_VLLM_PREFIX + line, *[NOISE.format(n=i) for i in range(20)], "(pid=1) " + line)
    assert [("vllm-no-cache-blocks", 1, (4,))] == _found(text)


def test_the_same_message_past_the_repeat_window_counts_again(monkeypatch, engine):
    """The same error REPEAT_LINES lines or more after the one counted is a new failure."""
    monkeypatch.setattr(errkb.scan, "REPEAT_LINES", 10)
    line = f"ValueError: {NO_BLOCKS_MESSAGE}"
    noise = [NOISE.format(n=i) for i in range(10)]
    assert [("vllm-no-cache-blocks", 2, (4, 15))] == _found(_log(line, *noise, line))
    assert [("vllm-no-cache-blocks", 1, (4,))] == _found(_log(line, *noise[:9], line))


def test_the_same_record_with_another_message_nearby_counts_again(engine):
    """Two messages of one record that differ (another number) are two failures."""
    other = SEED_MESSAGE.replace("32768", "65536")
    text = _log(f"ValueError: {SEED_MESSAGE}", NOISE.format(n=1), f"ValueError: {other}")
    assert [("vllm-kv-cache-max-seq-len", 2, (4, 6))] == _found(text)


def test_a_wrapper_after_its_root_cause_is_not_a_failure_of_its_own(engine):
    """'Engine core initialization failed. See root cause above.' after the cause: one failure."""
    text = _log(f"ValueError: {NO_BLOCKS_MESSAGE}", NOISE.format(n=1), _WRAPPER)
    assert [("vllm-no-cache-blocks", 1, (4,))] == _found(text)


def test_a_wrapper_with_no_cause_in_sight_counts(monkeypatch, engine):
    """With no known error in the REPEAT_LINES lines above it, the wrapper is the finding."""
    monkeypatch.setattr(errkb.scan, "REPEAT_LINES", 5)
    alone = [("vllm-engine-core-initialization-failed", 1, (4,))]
    assert alone == _found(_log(_WRAPPER))
    far = _log(f"ValueError: {NO_BLOCKS_MESSAGE}", *[NOISE.format(n=i) for i in range(5)], _WRAPPER)
    assert [
        ("vllm-no-cache-blocks", 1, (4,)),
        ("vllm-engine-core-initialization-failed", 1, (10,)),
    ] == _found(far)


def test_a_failure_over_lines_keeps_its_lines_as_example(engine):
    """The example of a message over lines holds the lines the match ran over."""
    result = scan_stream(io.BytesIO(_log(_GATED).encode()))
    assert _GATED.rsplit("\n", 1)[0] == result.groups[0].example


# -- The fleet scan's map step: scan_part, scan_range, merge ---------------------------------

PASTED = __import__("pathlib").Path(__file__).resolve().parents[1] / "data" / "pasted"
DEC_2_2026 = 1796191200.0  # 2026-12-02T06:00:00Z


def _fleet_log(repeats: int = 30) -> bytes:
    """Noise, the real vLLM engine-core failure (a traceback printed twice) and an unknown line."""
    vllm = (PASTED / "log-vllm-engine-core-raw.txt").read_bytes()
    noise = "".join(NOISE.format(n=i) + "\n" for i in range(300)).encode()
    unknown = b"ERROR 11-30 06:00:02 [serving_chat.py:204] Error in preprocessing prompt inputs\n"
    return (noise + vllm + unknown) * repeats


def test_a_part_holds_counts_times_hosts_and_unknown_shapes():
    """One log: the failure's count as scan_stream counts it, its time, host and unknown shapes."""
    data = _fleet_log(2)
    part = errkb.scan.scan_part(data, source="node-1/a.log", host="node-1", mtime=DEC_2_2026)
    result = part.to_dict()
    stream = scan_stream(io.BytesIO(data))
    assert [(g.record.id, g.count, list(g.first_lines)) for g in stream.groups] == [
        (g["id"], g["count"], g["first_lines"]) for g in result["groups"]
    ]
    group = result["groups"][0]
    assert ("2026-11-30T14:02:11Z", {"node-1": 2}) == (group["first_seen"], group["hosts"])
    assert [["2026-11-30T14:00Z", "node-1", 2]] == group["timeline"]
    shapes = {u["shape"]: u["count"] for u in result["unknown"]}
    assert 2 == shapes["ERROR Error in preprocessing prompt inputs"]
    assert not any("No available memory" in s for s in shapes)  # a known error is not unknown


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(cuts=st.lists(st.integers(1, 100), min_size=1, max_size=6))
def test_byte_ranges_anywhere_merge_to_the_scan_of_the_whole(monkeypatch, cuts):
    """Ranges ending at any offsets (tracebacks straddling them) merge to the whole file's result."""
    monkeypatch.setattr(errkb.scan, "CUT_AHEAD", 4096)
    data = _fleet_log(6)
    whole = errkb.scan.scan_part(data, source="a.log", mtime=DEC_2_2026).to_dict()
    ends = [*sorted({len(data) * c // 101 for c in cuts}), len(data)]
    file = io.BytesIO(data)
    parts, start = [], 0
    for end in ends:
        parts.append(
            errkb.scan.scan_range(
                file,
                start,
                end,
                len(data),
                source="a.log",
                mtime=DEC_2_2026,
                cut=(start > 0, end < len(data)),
            )
        )
        start = end
    assert whole == errkb.scan.merge(reversed(parts)).to_dict()


@given(order=st.permutations(range(4)))
@settings(max_examples=20, deadline=None)
def test_merge_gives_one_result_whatever_the_order(order):
    """Parts of several sources merged in any order: the same result (examples, first lines too)."""
    data = _fleet_log(1)
    parts = [
        errkb.scan.scan_part(data, source=f"node-{n}/a.log", host=f"node-{n}", mtime=DEC_2_2026)
        for n in range(4)
    ]
    expected = errkb.scan.merge(parts).to_dict()
    shuffled = [parts[i] for i in order]
    assert (
        expected
        == errkb.scan.merge(
            [errkb.scan.merge(shuffled[:2]), errkb.scan.merge(shuffled[2:])]
        ).to_dict()
    )
    assert ["node-0/a.log", "node-1/a.log", "node-2/a.log", "node-3/a.log"] == expected["groups"][
        0
    ]["sources"]


def test_a_failed_part_counts_nothing_and_says_why():
    """A source that could not be read: in the sources with its reason, counted as failed."""
    result = errkb.scan.failed_part("s3://b/gone.log", "FileNotFoundError: gone").to_dict()
    assert (1, [], "FileNotFoundError: gone") == (
        result["failed"],
        result["groups"],
        result["sources"][0]["failed"],
    )


def test_a_cut_is_a_quiet_line_start_and_never_moves_back():
    """range_cut gives a line start after enough lines without a needle, monotone in its offset."""
    data = _fleet_log(4)

    def read_at(lo, hi):
        return data[lo:hi]

    cuts = [errkb.scan.range_cut(read_at, at, len(data)) for at in range(0, len(data), 997)]
    assert cuts == sorted(cuts)
    assert all(c == len(data) or data[c - 1 : c] == b"\n" for c in cuts if c)


def _large_block_and_finder():
    ahocorasick_rs = pytest.importorskip("ahocorasick_rs")
    lines = [NOISE.format(n=n) if "{n}" in NOISE else f"{NOISE} {n}" for n in range(40_000)]
    for at in (0, 1, 19_999, 20_000, 20_001, 39_999):  # hits about the cut, and at both ends
        lines[at] = SEED_MESSAGE
    block = ("\n".join(lines) + "\n").encode()
    automaton = ahocorasick_rs.BytesAhoCorasick([b"max seq len", b"KV cache"])
    return block, automaton.find_matches_as_indexes


def test_a_large_block_searched_in_two_halves_finds_what_one_search_finds(monkeypatch):
    """With a worker thread, and without one (a single CPU), _found gives find's own hits."""
    block, find = _large_block_and_finder()
    assert len(block) >= errkb.scan._SPLIT_MIN
    expected = find(block)
    assert len(expected) == 12
    assert errkb.scan._worker(errkb.scan._HALVES) is not None  # this machine has two CPUs or more
    assert expected == errkb.scan._found(find, block)
    import os

    monkeypatch.setitem(errkb.scan._WORKERS, errkb.scan._HALVES, (os.getpid(), None))
    assert expected == errkb.scan._found(find, block)


def test_a_forked_child_searches_with_a_worker_of_its_own():
    """A worker thread does not survive a fork: the child starts its own, and does not hang."""
    import os
    import signal

    block, find = _large_block_and_finder()
    expected = find(block)
    assert expected == errkb.scan._found(find, block)  # the parent's worker exists now
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only when the split search answers, and rightly
        signal.alarm(20)
        os._exit(0 if errkb.scan._found(find, block) == expected else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_worker_runs_jobs_in_turn_and_raises_their_errors_where_results_are_asked():
    worker = errkb.scan._Worker("errkb-test")
    ran: list[int] = []
    jobs = [worker.submit(ran.append, n) for n in range(50)]
    failed = worker.submit(int, "not a number")
    assert [job.result() for job in jobs] == [None] * 50
    assert ran == list(range(50))
    with pytest.raises(ValueError, match="not a number"):
        failed.result()
    assert worker.submit(sum, [1, 2]).result() == 3


@settings(max_examples=300, deadline=None)
@given(
    data=st.binary(max_size=120).map(lambda b: b.replace(b"\x00", b"\n")),
    lines=st.integers(1, 6),
    prefix=st.sampled_from(["", "E: ", "\xff"]),
    asked=st.lists(st.integers(0, 8), max_size=4),
)
def test_a_window_reads_the_lines_after_its_first_as_they_are_asked_for(data, lines, prefix, asked):
    """Each line decoded when first asked for: the window's lines are the bytes after the first
    line's end split at newlines (the end of the last line is not one), WINDOW_LINES at most."""
    block = b"first line\n" + data
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(errkb.scan, "WINDOW_LINES", lines)
        after = errkb.scan._After(block, len(b"first line"), prefix)
        _check_window(after, data, lines, prefix, asked)


def _check_window(after, data, lines, prefix, asked):
    pieces = data.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    expected = [
        errkb.scan._without_prefix(p.decode("utf-8", "replace").rstrip("\r"), prefix)
        for p in pieces[:lines]
    ]
    assert bool(after) is bool(expected)
    for count in [*asked, lines + 1]:
        assert after.head(count) == expected[:count]
    assert len(after) == len(expected)


def test_the_needles_the_records_index_keeps_are_those_chosen_from_its_records():
    """The shipped records' index keeps what a scan looks for (made by the records session):
    the needles and the records they do not find alone are those the records give now."""
    written = default_registry().hand_written()
    planned = written.needle_plan()
    assert planned is not None, "the records index keeps no needles: rebuild it"
    plan, ref_at = planned
    rows = [(r.message_pattern, r.literal_sets(), r.retired) for r in written.refs]
    assert plan == errkb._scanplan.plan_needles(rows)
    assert plan.spanning  # records over lines are there: the comparison says something
    assert [ref_at(i).id for i in range(len(rows))] == [r.id for r in written.refs]
    assert errkb.scan._needles_for(default_registry(), None).needles == plan.needles


@pytest.mark.parametrize(
    "kept",
    [
        {"needles": ["abc"], "spanning": {"x": [7]}, "anywhere": [], "unfindable": []},
        {"needles": ["abc"], "spanning": {}, "anywhere": [-1], "unfindable": []},
        {"needles": ["abc"], "spanning": {}, "anywhere": [True], "unfindable": []},
        {"needles": [3], "spanning": {}, "anywhere": [], "unfindable": []},
        {"needles": ["abc"], "spanning": [], "anywhere": [], "unfindable": []},
        {"needles": ["abc"], "anywhere": [], "unfindable": []},
        ["abc"],
    ],
)
def test_needles_kept_that_do_not_name_the_index_s_rows_are_not_a_plan(kept):
    assert errkb._scanplan.NeedlePlan.from_json(kept, rows=5) is None
