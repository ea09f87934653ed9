"""errkb._patterns: a record's pattern matches its message whatever whitespace a paste put in it."""

from __future__ import annotations

import importlib
import io
import json
import pkgutil
from pathlib import Path

import pytest
import regex
from helpers import TORCH_OOM_OTHERS as TORCH_OOM
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

import errkb
from errkb._lazy_regex import own_patterns
from errkb._patterns import (
    COMPILED_FORMAT,
    compile_pattern,
    cut_chain,
    cut_pattern,
    head_regex,
    loosen,
    may_end_inside,
    own_compiled_path,
    own_keys,
    patterns_crc,
    read_compiled,
    search_prefix,
)
from errkb.diagnosis import explain
from errkb.options import Options
from errkb.packs import lazy_folder
from errkb.registry import builtin_records_dir

REPORTS = Path(__file__).parents[1] / "data" / "reports" / "corpus.jsonl"


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"out of memory\. Tried", r"out\s+of\s+memory\.\s+Tried"),
        ("fragmentation.  See", r"fragmentation.\s+See"),  # a run is one \s+
        (r"line\nnext\ttab\ one", r"line\s+next\s+tab\s+one"),  # escaped whitespace too
        ("a\\\nb", r"a\s+b"),  # a newline escaped as re.escape writes it (a mined pattern)
        ("\\\n    Setup failed\\\n", r"\s*Setup\s+failed\s*"),  # a message's text may be stripped
        ("a ?b", r"a\s*b"),  # an optional space stays optional
        ("a  ?b", r"a\s+b"),  # only the last of the run was optional
        ("a {2}b", "a {2}b"),  # a counted run is kept as written
        ("x[ ]y", "x[ ]y"),  # a class is not literal text
        (r"(?P<n>\d+) (?P<unit>GiB)", r"(?P<n>\d+)\s+(?P<unit>GiB)"),
        ("(?x) a b", "(?x) a b"),  # verbose: its whitespace means nothing
        ("nothing", "nothing"),
    ],
)
def test_each_run_of_literal_whitespace_matches_any_run(pattern, expected):
    assert expected == loosen(pattern)
    regex.compile(loosen(pattern))


def test_a_message_wrapped_by_rich_is_recognised_with_every_figure():
    """rich soft-wraps at 60 columns: the record and all its captures, as unwrapped."""
    out = io.StringIO()
    Console(file=out, width=60, color_system=None).print(
        f"torch.OutOfMemoryError: {TORCH_OOM}", markup=False, highlight=False
    )
    wrapped = out.getvalue()
    assert wrapped.count("\n") > 5
    whole = explain(f"torch.OutOfMemoryError: {TORCH_OOM}", options=Options(probes=False))
    found = explain(wrapped, options=Options(probes=False))
    assert "torch-cuda-out-of-memory" == found.findings[0].record.id
    facts = {f.name: f.value for f in found.findings[0].facts}
    assert {f.name: f.value for f in whole.findings[0].facts} == facts
    assert "another process" == facts["situation"]


def test_a_report_hard_wrapped_in_its_issue_fills_every_capture():
    """bitsandbytes#65 wraps torch's message at its semicolons: total and free are read."""
    rows = (json.loads(line) for line in REPORTS.read_text(encoding="utf-8").splitlines())
    text = next(row["text"] for row in rows if row["id"] == "bitsandbytes-8")
    assert "(GPU 0;\n14.76 GiB total capacity" in text
    finding = explain(text, options=Options(probes=False)).findings[0]
    facts = {f.name: f.value for f in finding.facts}
    assert 945.75 * (1 << 20) == facts["gpu_free"]
    assert "<free>" not in finding.solutions[0].text


def test_the_compiled_pattern_is_the_loose_one():
    pattern = r"CUDA out of memory\. Tried to allocate (?P<n>\d+)"
    assert loosen(pattern) == compile_pattern(pattern).pattern
    assert compile_pattern(pattern).search("CUDA out\nof memory. Tried to\n  allocate 12")


def test_a_message_wrapped_inside_a_literal_run_is_still_a_candidate():
    """The index's literal check: 'out of\\nmemory' holds the record's ' out of memory. '."""
    from errkb._index import literal_test

    holds = literal_test("CUDA out of\nmemory. Tried to  allocate 2 GiB")
    assert holds(" out of memory. Tried to allocate ")
    assert not holds("out of disk")
    wrapped = TORCH_OOM.replace(" out of memory", " out of\nmemory").replace(" has a", "\nhas a")
    found = explain(f"torch.OutOfMemoryError: {wrapped}", options=Options(probes=False))
    assert "torch-cuda-out-of-memory" == found.findings[0].record.id
    facts = {f.name: f.value for f in found.findings[0].facts}
    assert round(94.96 * (1 << 30)) == facts["gpu_total"]


def test_a_message_spaced_by_no_break_spaces_is_still_a_candidate():
    """A message copied from a web page with no-break spaces between its words (and no other
    whitespace to tell) is tested as a wrapped one is, not as it is."""
    from errkb._index import literal_test

    holds = literal_test("CUDA\xa0out\xa0of\xa0memory.\xa0Tried\xa0to\xa0allocate")
    assert holds(" out of memory. Tried to allocate")
    assert not holds("out of disk")


# vLLM's message, as its V0 worker raises it (records/vllm/kv-cache-max-seq-len.json's seed).
SEED = (
    "The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    "stored in KV cache (20912). Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine."
)


def test_a_message_whose_backticks_a_markdown_renderer_dropped_is_the_upstream_record():
    """rich renders the issue's Markdown: inline code loses its backticks, vLLM stays first."""
    from rich.markdown import Markdown

    out = io.StringIO()
    Console(file=out, width=200, color_system=None).print(Markdown(f"ValueError: {SEED}"))
    rendered = out.getvalue()
    assert "`" not in rendered
    assert "Try increasing gpu_memory_utilization" in rendered
    found = explain(rendered, options=Options(probes=False))
    assert "vllm-kv-cache-max-seq-len" == found.findings[0].record.id  # not ChatTTS' twin
    facts = {f.name: f.value for f in found.findings[0].facts}
    assert (32768, 20912) == (facts["max_model_len"], facts["kv_cache_capacity"])


def test_a_backtick_is_optional_and_splits_the_literals():
    from errkb._patterns import literal_sets

    pattern = r"Try increasing `gpu_memory_utilization` now"
    tick = r"(?:`|(?<!\w)|(?!\w))"  # a backtick, or none that joins two word characters
    assert rf"Try\s+increasing\s+{tick}gpu_memory_utilization{tick}\s+now" == loosen(pattern)
    assert not regex.search(loosen("cache`"), "cachemax")  # not the middle of a word
    assert (("Try increasing ",), ("gpu_memory_utilization",), (" now",)) == literal_sets(pattern)
    assert r"a`+b" == loosen(r"a`+b")  # a quantified backtick is the pattern's own rule


def test_the_facts_an_index_holds_are_those_read_from_each_pattern():
    """The records index keeps each hand-written pattern's head length and specificities
    (pattern_facts): what head_pattern and the match score then give is what reading the
    pattern gives."""
    import errkb._patterns as patterns
    from errkb.registry import default_registry

    refs = default_registry().hand_written().refs
    known = {r.message_pattern for r in refs if r.message_pattern in patterns._FACTS}
    assert len(known) == len({r.message_pattern for r in refs})  # every one, from the index
    for pattern in known:
        head = patterns._head_pattern(pattern)
        read = (
            -1 if head is None else len(head),
            patterns.specificity(pattern),
            patterns.specificity(head or ""),
        )
        assert read == patterns.pattern_facts(pattern), pattern
        assert head == patterns.head_pattern(pattern), pattern


def test_the_readings_an_index_holds_are_those_read_from_each_pattern():
    """The records index also keeps each hand-written pattern's literal sets and where it can
    first match a newline: what a lookup's searches and a scan's needles are made of is what
    reading the pattern gives."""
    import errkb._patterns as patterns
    import errkb._scanplan as scanplan
    from errkb.registry import default_registry

    refs = default_registry().hand_written().refs
    written = {r.message_pattern for r in refs}
    assert written <= patterns._SETS.keys()
    assert written <= patterns._NEWLINES.keys()
    for pattern in written:
        assert patterns._literal_sets(pattern) == patterns.literal_sets(pattern), pattern
        assert scanplan._first_newline(pattern) == scanplan.first_newline(pattern), pattern
    assert any(scanplan.first_newline(p) is not None for p in written)  # both kinds compared


@pytest.mark.parametrize("sets", [[["a"], []], [[""]], [["a", 1]], "ab", [("a",)], [[None]]])
def test_literal_sets_that_are_not_a_patterns_are_passed_over(monkeypatch, sets):
    import errkb._patterns as patterns

    monkeypatch.setattr(patterns, "_SETS", {})
    patterns.know_sets("abc", sets)
    assert {} == patterns._SETS
    assert (("abc",),) == patterns.literal_sets("abc")
    patterns.know_sets("abc", [["b"]])  # what an index of this code holds is taken as is
    assert (("b",),) == patterns.literal_sets("abc")
    patterns.know_sets("abc", None)  # a pattern the reader cannot read
    assert patterns.literal_sets("abc") is None


@pytest.mark.parametrize("fact", [[1], [9, False], [-1, False], [1, 0], ["1", True], "x", 3])
def test_newline_facts_that_are_not_a_patterns_are_passed_over(monkeypatch, fact):
    import errkb._patterns as patterns
    import errkb._scanplan as scanplan

    monkeypatch.setattr(patterns, "_NEWLINES", {})
    patterns.know_newline(r"ab\nc", fact)
    assert {} == patterns._NEWLINES
    assert (2, False) == scanplan.first_newline(r"ab\nc")
    patterns.know_newline(r"ab\nc", [1, True])  # what an index of this code holds is taken as is
    assert (1, True) == scanplan.first_newline(r"ab\nc")
    patterns.know_newline(r"ab\nc", None)
    assert not scanplan.spans_lines(r"ab\nc")


@pytest.mark.parametrize("facts", [[1, 2], [9, 1, 1], ["1", 2, 3], [True, 1, 1], None, "123"])
def test_facts_that_are_not_a_patterns_are_passed_over(monkeypatch, facts):
    """An index another code wrote cannot give a head longer than the pattern, or no numbers."""
    import errkb._patterns as patterns

    monkeypatch.setattr(patterns, "_FACTS", {})
    patterns.know_facts("abcd", facts)
    assert {} == patterns._FACTS
    assert (-1, 4, 0) == patterns.pattern_facts("abcd")
    patterns.know_facts("abcd", [2, 7, 1])  # what an index of this code holds is taken as is
    assert ("ab", (2, 7, 1)) == (patterns.head_pattern("abcd"), patterns.pattern_facts("abcd"))


# What vLLM's GPU worker (vllm/worker/worker.py) and its CPU worker (vllm/worker/cpu_worker.py)
# raise, as a miner writes their format strings: each value a lazy wildcard.
GPU_WORKER = (
    "The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    "stored in KV cache (12288). Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine."
)
CPU_WORKER_MINED = (
    r"The model's max seq len \((?P<max_model_len>.+?)\) is larger than the maximum number of "
    r"tokens that can be stored in KV cache \((?P<max_seq_len>.+?)\)\. Try increasing "
    r"`VLLM_CPU_KVCACHE_SPACE` or decreasing `max_model_len` when initializing the engine\."
)


def _cut_search(pattern: str, text: str) -> regex.Match[str] | None:
    head = head_regex(pattern)
    assert head is not None
    return search_prefix(compile_pattern(cut_pattern(pattern)), compile_pattern(head), text)


def test_a_wildcard_does_not_run_over_what_follows_it_to_make_a_cut_match():
    """The GPU worker's whole message is not the CPU worker's cut short.

    Its values' wildcards could run to the end of the text, over the words after them that
    differ: ``regex``'s partial search alone finds a "cut" match.
    """
    assert compile_pattern(CPU_WORKER_MINED).search(GPU_WORKER, partial=True).partial
    assert _cut_search(CPU_WORKER_MINED, GPU_WORKER) is None


@pytest.mark.parametrize(
    "cut_at",
    ["KV cache (12", "KV cache (12288). Try increasing `VLLM_CPU_KV", "KV cache (12288). Tr"],
)
def test_a_message_cut_inside_a_value_or_its_words_is_still_found(cut_at):
    text = GPU_WORKER.partition("KV cache")[0] + cut_at
    found = _cut_search(CPU_WORKER_MINED, text)
    assert found is not None
    assert found.partial
    assert "32768" == found.group("max_model_len")


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"len \((?P<n>.+?)\) is big", r"len \((?P<n>(?:(?!\) is).)+?)\) is big"),
        (r"Error: (.+) in module", r"Error: ((?:(?! in m).)+) in module"),
        (r"x .+?\n\nfoo", r"x (?:(?! foo).)+?\n\nfoo"),  # whitespace is any run of it
        (r"a (.*?) `b`", r"a (.*?) `b`"),  # a backtick a paste may drop: nothing to stop at
        (r"x (.+?) (?P<y>\d+)", r"x (.+?) (?P<y>\d+)"),  # no literal follows
        (r"x (.+?)?\.abc", r"x (.+?)?\.abc"),  # the group is optional
        (r"x (.+?)s+ y", r"x (.+?)s+ y"),  # the character after it may repeat
        (r"foo .+?", r"foo .+?"),  # nothing follows
        (r"x [^)]+\) y", r"x [^)]+\) y"),  # not a wildcard
    ],
)
def test_the_cut_pattern_stops_each_wildcard_where_the_literal_after_it_begins(pattern, expected):
    assert expected == cut_pattern(pattern)


@given(
    first=st.from_regex(r"[0-9a-z ,.]{1,12}", fullmatch=True),
    second=st.from_regex(r"[0-9a-z ,.]{1,12}", fullmatch=True),
    data=st.data(),
)
def test_every_cut_of_a_message_after_its_head_is_found(first, second, data):
    """A message of the pattern, cut anywhere after its head, is a cut match of it."""
    pattern = CPU_WORKER_MINED
    message = (
        f"The model's max seq len ({first}) is larger than the maximum number of tokens that "
        f"can be stored in KV cache ({second}). Try increasing `VLLM_CPU_KVCACHE_SPACE` or "
        "decreasing `max_model_len` when initializing the engine."
    )
    head = compile_pattern(head_regex(pattern)).match(message)
    assert head is not None
    end = data.draw(st.integers(head.end(), len(message) - 1))
    found = _cut_search(pattern, message[:end])
    assert found is not None
    assert found.start() == 0


def test_the_walk_rules_a_sibling_message_out_without_the_regex():
    """The GPU worker's message, whole, is no cut match of the CPU worker's: string searches say so."""
    chain = cut_chain(CPU_WORKER_MINED)
    assert chain is not None
    assert not may_end_inside(chain, GPU_WORKER)
    assert not may_end_inside(chain, "Oops: " + GPU_WORKER)
    for cut_at in ("KV cache (12", "KV cache (12288). Try increasing `VLLM_CPU_KV", "KV c"):
        assert may_end_inside(chain, GPU_WORKER.partition("KV cache")[0] + cut_at)


#: Patterns whose cut matches the walk must not rule out: each was a bug of its first draft.
WALKED = [
    CPU_WORKER_MINED,
    # Digits cut short before they begin.
    r"mat1 and mat2 shapes cannot be multiplied \((?P<a>\d+)x(?P<b>\d+) and (?P<c>\d+)x(?P<d>\d+)\)",
    # The head is searched alone: its last spaces are optional.
    "GenerationConfig is invalid: \\\n(?P<info_message>.+)",
    # Alternatives in a group the walk went into before it saw them.
    (
        r"The server socket has failed to (?:listen on any address\.(?: port: (?P<p>\d+),)? "
        r"code: -?\d+|bind to (?:\S*?:(?P<q>\d+)|\?UNKNOWN\?) \(errno: \d+\))"
    ),
    # A stop that the end of the text cuts: regex's partial lookahead lets the wildcard over it.
    r"Error during slicing (.+?) with shape (?P<shape>.+?):  (?P<e>.+)",
    # An optional backtick before a wildcard, which may take the backtick itself.
    (
        r"FP8 models need compute capability >= 8\.9, actual = `(?P<major>.+?)\.(?P<minor>.+?)`"
        r"\. We will default to dequantizing the model to bf16\."
    ),
    (
        r"Expected all tensors to be on the same device, but found at least two devices, "
        r"(?P<first>.+?) and (?P<second>.+?)!"
    ),
]


@pytest.mark.parametrize(
    ("at", "text"),
    [
        (1, "mat1 and mat2 shapes cannot be multiplied ("),
        (1, "mat1 and mat2 shapes cannot be multiplied (42x42 and "),
        (2, "GenerationConfig is invalid:"),
        (3, "The server socket has failed to bind to host:29500 (errno: 98"),
        (4, "Error during slicing (P) with shape : "),
        (5, "FP8 models need compute capability >= 8.9, actual = `.9"),
    ],
)
def test_the_walk_says_may_where_a_first_draft_of_it_did_not(at, text):
    """Texts the regex finds a cut match in, each of which a first draft of the walk ruled out."""
    assert _cut_search(WALKED[at], text) is not None
    assert may_end_inside(cut_chain(WALKED[at]), text)  # type: ignore[arg-type]


def _filled(pattern: str, values: list[str]) -> str:
    """A message of ``pattern``: each wildcard or digits group given the next value, escapes read."""
    found = iter(values)
    text = regex.sub(
        r"\(\?P<\w+>(?:\.[+*]\??|\\d\+)\)|\.[+*]\??|\\d\+", lambda _: next(found, "7"), pattern
    )
    return regex.sub(r"\\(.)", r"\1", text)


@pytest.mark.parametrize("pattern", WALKED)
@given(
    values=st.lists(
        st.text(alphabet=") .`:x17Tw", max_size=6) | st.sampled_from(["42", ") is", ". T", "`"]),
        max_size=4,
    ),
    data=st.data(),
)
def test_the_walk_never_rules_out_a_cut_match(pattern, values, data):
    """Where the partial regex search finds a cut match, the walk says the text may hold one."""
    chain = cut_chain(pattern)
    assert chain is not None
    text = _filled(pattern, values)
    text = text[: data.draw(st.integers(0, len(text)))] + data.draw(st.sampled_from(["", "x", "`"]))
    if _cut_search(pattern, text) is not None:
        assert may_end_inside(chain, text)


def test_the_walk_never_rules_out_a_cut_match_of_a_shipped_record():
    """The patterns of every 25th mined record, against their own messages and their siblings'.

    Each message is tried whole, cut at twenty places, without its backticks, with a doubled
    space and a newline. The walk must say "may" wherever the regex finds a cut match, and rule
    most of the rest out: that is what it is for.
    """
    mined, _ = lazy_folder(builtin_records_dir() / "mined", str, [])
    assert mined is not None
    refs = [mined.ref_at(row) for row in range(0, len(mined), 25)]
    patterns = sorted({r.message_pattern for r in refs if cut_chain(r.message_pattern)})
    by_lead: dict[str, list[str]] = {}
    for pattern in patterns:
        by_lead.setdefault(cut_chain(pattern).lead[:20], []).append(pattern)  # type: ignore[union-attr]
    checked = ruled_out = 0
    for pattern in patterns:
        chain = cut_chain(pattern)
        assert chain is not None
        cut = compile_pattern(cut_pattern(pattern))
        head = compile_pattern(head_regex(pattern) or "")
        for other in [pattern, *by_lead[chain.lead[:20]][:3]]:
            message = _filled(other, ["12", "x) y", "a"])
            texts = [message[:end] for end in range(1, len(message), max(1, len(message) // 20))]
            texts += [message, message.replace("`", ""), message.replace(" ", "  ", 1)]
            texts += [message.replace(" ", "\n", 1), "see: " + message + " (x)"]
            for text in texts:
                may = may_end_inside(chain, text)
                assert may or search_prefix(cut, head, text) is None, (pattern, text)
                checked += 1
                ruled_out += not may
    assert checked > 30_000
    assert ruled_out > checked // 3


@pytest.mark.parametrize(
    "pattern",
    [
        r"a|b",  # alternatives at the top: no one start
        r"(?:type object )?'X' has no attribute 'y'",  # no literal start
        r"Too short",  # no head
    ],
)
def test_a_pattern_the_walk_cannot_start_is_left_to_the_regex(pattern):
    assert cut_chain(pattern) is None


def _import_every_module() -> None:
    for module in pkgutil.walk_packages(errkb.__path__, "errkb."):
        if not module.name.endswith("__main__"):  # which would run the command line
            importlib.import_module(module.name)


def test_errkb_ships_its_own_patterns_compiled():
    """errkb/_own_patterns.compiled holds every lazy_compile pattern of errkb's modules.

    Written by the records session (``nox -s records``: write_own_compiled), beside the
    records' own file.
    """
    _import_every_module()
    made = set(own_patterns())
    path = own_compiled_path()
    header = json.loads(path.open("rb").readline())
    assert header["format"] == COMPILED_FORMAT
    assert header["crc"] == patterns_crc(own_keys(made)), (
        "errkb/_own_patterns.compiled is stale: rebuild it (nox -s records)"
    )
    compiled = read_compiled(path, own_keys(made))
    if compiled is None:  # another regex release wrote it: passed over, never misread
        pytest.skip(f"errkb/_own_patterns.compiled was written by regex {header['regex']}")
    assert set(compiled) == own_keys(made)
    for pattern, flags in made:
        [loaded] = (compiled[k] for k in own_keys([(pattern, flags)]))
        assert (pattern, regex.compile(pattern, flags).flags) == (loaded.pattern, loaded.flags)


def test_an_own_pattern_is_taken_from_the_file_and_another_compiled(monkeypatch):
    from errkb import parse
    from errkb._lazy_regex import _regex_compile

    pattern, flags = parse._IN_LINE._args  # type: ignore[attr-defined]
    compile_ = regex.compile

    def refused(*args, **kwargs):
        raise AssertionError("compiled again")

    monkeypatch.setattr(regex, "compile", refused)
    found = _regex_compile(pattern, flags)
    assert found.search("x ValueError: y")["cls"] == "ValueError"
    monkeypatch.setattr(regex, "compile", compile_)
    assert _regex_compile(r"not shipped (\d+)", 0).search("not shipped 7")[1] == "7"


def test_an_own_pattern_is_found_whichever_module_s_flags_name_it(monkeypatch):
    """re.VERBOSE and regex.VERBOSE are one flag, printed two ways: the file names it by number."""
    import re

    from errkb import parse
    from errkb._lazy_regex import _regex_compile

    pattern, flags = parse._TAG._args  # type: ignore[attr-defined]
    assert flags
    monkeypatch.setattr(regex, "compile", lambda *a, **k: pytest.fail("compiled again"))
    for named in (re.RegexFlag(flags), regex.RegexFlag(flags), int(flags)):
        assert _regex_compile(pattern, named).match("[rank0]: x").lastgroup == "rank"
