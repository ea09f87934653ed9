"""errkb.validate: checks across records (variants here; ranking and advisors elsewhere)."""

from __future__ import annotations

from errkb.records import record_from_dict
from errkb.testing import record_dict
from errkb.validate import check_variants


def _records(*dicts):
    return [record_from_dict(d)[0] for d in dicts]


ORIGINAL = record_dict(
    id="engine-kv",
    messagePattern=r"The model's max seq len \((?P<n>\d+)\) is larger than the KV cache",
    examples=["The model's max seq len (32768) is larger than the KV cache"],
)


def test_a_variant_the_original_covers_passes():
    """A vendored copy whose every example the original also matches is fine."""
    twin = record_dict(
        id="vendored-kv",
        variantOf="engine-kv",
        messagePattern=r"The model's max seq len \((?P<n>\d+)\) is larger than the KV cache",
        examples=["The model's max seq len (4096) is larger than the KV cache"],
    )
    assert [] == check_variants(_records(ORIGINAL, twin))


def test_a_variant_looser_than_its_original_is_a_problem():
    """A twin that matches what its original does not would win where the original should."""
    loose = record_dict(
        id="vendored-kv",
        variantOf="engine-kv",
        messagePattern=r"max seq len \((?P<n>\d+)\)",
        examples=["max seq len (4096) exceeds the cache"],
    )
    problems = check_variants(_records(ORIGINAL, loose))
    assert ['field "examples"'] == [p.line.split(": ")[2] for p in problems]
    assert "looser than its original 'engine-kv'" in problems[0].line


def test_a_variant_of_a_missing_record_is_a_problem():
    """variantOf must name a record of the set."""
    orphan = record_dict(id="vendored", variantOf="nowhere")
    problems = check_variants(_records(orphan))
    assert "variantOf names 'nowhere'" in problems[0].line


def test_a_release_range_that_runs_backwards_is_rejected():
    """versions.first after versions.last is a problem of the record (issue 22: a range of
    releases must be ordered), whatever order the strings sort in."""
    ok = record_dict(versions={"distribution": "vllm", "first": "0.9.2", "last": "0.12.0"})
    record, problems = record_from_dict(ok, source="r.json")
    assert record is not None, [p.line for p in problems]
    backwards = record_dict(versions={"distribution": "vllm", "first": "0.22.0", "last": "0.12.0"})
    record, problems = record_from_dict(backwards, source="r.json")
    assert record is None or record.versions is None  # the range is not believed
    assert ['"first" 0.22.0 is after "last" 0.12.0'] == [
        p.problem.split(":")[0] for p in problems if p.field == "versions"
    ]
