"""errkb.advisors: the declared contract, its check, and run_advisors."""

from __future__ import annotations

import time

import pytest

from errkb import advisors
from errkb.advisors import Advice, Contract, Variant, advisor, contract_of, run_advisors
from errkb.diagnosis import diagnose
from errkb.evidence import Evidence
from errkb.findings import Fact, Finding, Solution
from errkb.match import Match
from errkb.options import Options
from errkb.testing import record_dict, registry_from_dicts

SPEED = Variant(name="speed", requires={"speed"}, reads={"name"})
SILENT = Variant(name="silent")


def test_variant_for_takes_the_first_whose_groups_captured_a_value():
    """The first variant whose required groups all hold a value; order decides ties."""
    contract = Contract(name="widget", variants=(SPEED, SILENT))
    assert SPEED == contract.variant_for({"speed": 1200, "name": None})
    assert SILENT == contract.variant_for({"speed": None})


def test_problem_with_names_the_groups_a_pattern_lacks():
    """A pattern without any variant's required groups cannot serve the advisor."""
    contract = Contract(name="widget", variants=(SPEED,))
    assert contract.problem_with({"speed", "other"}) is None
    assert "needs: {speed}" in (contract.problem_with({"name"}) or "")


def test_advisor_declares_and_contract_of_checks_the_name():
    """@advisor marks the callable; a declaration under another name is refused."""

    widget = Contract(name="widget", variants=(SPEED,))

    @advisor(widget)
    def advise(match: object, evidence: object) -> None:
        return None

    assert "widget" == contract_of(advise, "widget").name
    with pytest.raises(TypeError, match="declares the name 'widget'"):
        contract_of(advise, "gadget")


def test_an_undeclared_callable_requires_no_group():
    """A plugin advisor without a declaration reads whatever the match has."""
    assert frozenset() == contract_of(lambda m, e: None, "plain").variants[0].requires


def test_check_finds_a_misspelt_advisor_and_a_pattern_without_its_groups():
    """check(): 'kv_cahce' does not exist; kv-cache on a pattern without figures is fine."""
    assert "no advisor named 'kv_cahce'" in (advisors.check("kv_cahce", set()) or "")
    assert advisors.check("kv-cache", set()) is None  # the "no blocks" form needs no group


def test_the_builtin_kv_cache_advisor_declares_its_forms():
    """The KV-cache advisor's contract lists the forms of vLLM's message, specific first."""
    advise = advisors.load("kv-cache")
    names = [v.name for v in contract_of(advise, "kv-cache").variants]
    assert ["free-memory", "cpu", "v1", "old", "no-blocks"] == names


def _finding(record_id: str, exception: int) -> Finding:
    registry = registry_from_dicts([record_dict(id=record_id, advisors=["t-advisor"])])
    record = registry.records[0]
    return Finding(
        match=Match(record=record, captures={}, score=1.0),
        exception=exception,
        solutions=(Solution(text="the record's own"),),
    )


def test_run_advisors_puts_advice_first_and_runs_once_per_exception(monkeypatch):
    """The best finding of each exception is advised; its advice comes before the record's."""
    calls: list[str] = []

    def advise(match: Match, evidence: Evidence) -> Advice:
        calls.append(match.record.id)
        fact = Fact(name="x", value=1, source="computed")
        return Advice(solutions=(Solution(text="computed"),), facts=(fact,), notes=("n",))

    monkeypatch.setitem(advisors._cache, "t-advisor", advise)
    findings = [_finding("first", 0), _finding("second", 0), _finding("third", 1)]
    notes: list[str] = []
    out = run_advisors(
        findings, Evidence(options=Options(), exceptions=()), time.monotonic() + 5, notes
    )
    assert ["first", "third"] == calls
    assert ["computed", "the record's own"] == [s.text for s in out[0].solutions]
    assert ["the record's own"] == [s.text for s in out[1].solutions]
    assert ["n"] == notes


def test_run_advisors_notes_a_failure_and_keeps_the_finding(monkeypatch):
    """An advisor that raises costs a note, not the finding."""

    def advise(match: Match, evidence: Evidence) -> Advice:
        raise ZeroDivisionError("no GPUs")

    monkeypatch.setitem(advisors._cache, "t-advisor", advise)
    notes: list[str] = []
    out = run_advisors(
        [_finding("first", 0)],
        Evidence(options=Options(), exceptions=()),
        time.monotonic() + 5,
        notes,
    )
    assert ["the record's own"] == [s.text for s in out[0].solutions]
    assert ["advisor 't-advisor' failed: ZeroDivisionError: no GPUs"] == notes


def test_run_advisors_leaves_out_what_the_deadline_does_not_allow(monkeypatch):
    """Past the deadline an advisor is not run, and the note says so."""
    monkeypatch.setitem(advisors._cache, "t-advisor", lambda m, e: pytest.fail("ran"))
    notes: list[str] = []
    run_advisors([_finding("first", 0)], Evidence(options=Options(), exceptions=()), 0.0, notes)
    assert ["advisor 't-advisor' for first left out: out of time"] == notes


def test_validate_rejects_a_record_naming_an_advisor_that_does_not_exist(tmp_path):
    """errkb validate exits 1 on "advisors": ["kv_cahce"] (it used to pass)."""
    from errkb.records import load_paths
    from errkb.validate import check_advisors

    path = tmp_path / "r.json"
    import json

    path.write_text(json.dumps(record_dict(id="typo", advisors=["kv_cahce"])))
    problems = check_advisors(load_paths([path]).records)
    assert ['field "advisors"' in p.line for p in problems] == [True]
    assert "no advisor named 'kv_cahce'" in problems[0].line


def test_captures_are_read_as_the_types_asked_for_and_a_bad_one_is_a_problem():
    from errkb.advisors import CaptureError, Captures

    caps = Captures({"n": 32, "x": 2.0, "half": 0.5, "free": 19.68, "free_unit": "GiB",
                     "mem": "24GiB", "zero": 0, "zero_unit": "bytes", "word": "eight"})  # fmt: skip
    assert caps.integer("n") == 32
    assert caps.integer("x") == 2
    assert caps.number("half") == 0.5
    assert caps.size("free") == round(19.68 * (1 << 30))
    assert caps.size("mem") == 24 << 30
    assert caps.size("zero") == 0
    assert caps.text("n") == "32"
    assert caps.integer("absent") is None
    for read, name in ((caps.integer, "half"), (caps.number, "word"), (caps.size, "word")):
        with pytest.raises(CaptureError, match=name):
            read(name)


def test_a_bad_capture_is_a_note_and_the_record_stands(monkeypatch):
    """An advisor whose capture is not of its type is left out with a note, never a crash."""
    import torch

    from errkb.advisors import out_of_memory

    def bad(match, evidence):
        from errkb.advisors import Captures

        Captures({"requested": "lots"}).size("requested")

    monkeypatch.setattr(out_of_memory, "advise", bad)
    monkeypatch.setitem(advisors._cache, "out-of-memory", bad)
    diagnosis = diagnose(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB."),
                         options=Options(probes=False))  # fmt: skip
    assert diagnosis.findings[0].record.id == "torch-cuda-out-of-memory"
    assert any("capture 'requested' is not a size" in n for n in diagnosis.notes)


def test_advice_placed_after_leaves_the_records_first_solution_as_the_fix(monkeypatch):
    import torch

    def later(match, evidence):
        return Advice(solutions=(Solution(text="computed alternative"),), placement="after")

    monkeypatch.setitem(advisors._cache, "out-of-memory", later)
    diagnosis = diagnose(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB."),
                         options=Options(probes=False))  # fmt: skip
    texts = [s.text for s in diagnosis.findings[0].solutions]
    assert texts[-1] == "computed alternative"
    assert texts[0] != "computed alternative"
