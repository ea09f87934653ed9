"""errkb.findings: the data model, its JSON form, and where numbers may come from."""

from __future__ import annotations

import pytest

from errkb.findings import SOURCES, ExampleFix, Fact, empty_dict


def test_fact_source_must_be_a_known_place():
    """Every number says where it came from, from a fixed list (principle 5)."""
    assert "probe" in SOURCES
    with pytest.raises(ValueError, match="source"):
        Fact(name="x", value=1, source="somewhere")


def test_empty_dict_has_the_keys_of_a_diagnosis_all_empty():
    """What `errkb explain --json` prints when nothing matched is built from the data model."""
    assert {
        "schema": "errkb.diagnosis/1",
        "exceptions": [],
        "matches": [],
        "fix": None,
        "solutions": [],
        "facts": [],
        "example_fix": None,
        "notes": [],
    } == empty_dict()


def test_example_fix_splits_at_the_markers():
    """A record's exampleFix with # before / # after markers becomes a before/after pair."""
    fix = ExampleFix.from_record_text("# before\nLLM(m)\n# after\nLLM(m, max_model_len=2048)\n")
    assert ("LLM(m)", "LLM(m, max_model_len=2048)") == (fix.before, fix.after)
    assert ExampleFix(before=None, after="x = 1") == ExampleFix.from_record_text("x = 1\n")


def test_a_records_marker_remark_is_said_once_not_a_second_before():
    """'# before (remark)' loses its marker (errkb shows its own) and keeps its remark."""
    from errkb.findings import ExampleFix

    fix = ExampleFix.from_record_text(
        "# before (vLLM 0.6)\nx = 1\n\n# after (option 1)\nx = 2\n# after (option 2), in a fresh venv\nx = 3"
    )
    assert fix.before == "# vLLM 0.6\nx = 1"
    assert fix.after == "# option 1\nx = 2\n# after (option 2), in a fresh venv\nx = 3"
    assert ExampleFix.from_record_text("# before:\na\n# after\nb") == ExampleFix(
        before="a", after="b"
    )
    assert ExampleFix.from_record_text("code only").before is None
