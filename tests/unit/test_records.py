from __future__ import annotations

import ast
import json
from pathlib import Path

import attrs
import pytest
from helpers import DATA, record_pack

import errkb.records
from errkb.exceptions import RecordError
from errkb.records import Record, RecordRef, load_paths, load_refs, record_from_dict
from errkb.testing import record_dict


def test_dataset_wrapped_record_loads_unchanged():
    """A record in the dataset's wrapped form, with every schema-2 field, loads with no problem."""
    result = load_paths([DATA / "dataset-wrapped.json"])
    assert () == result.problems
    record = result.records[0]
    assert "0123456789abcdef" == record.id
    assert ("Lower max len.", "Give the cache more memory.") == record.solutions
    assert 12 == record.line_number
    assert "engine" == record.library


def test_every_json_key_maps_to_a_snake_case_attribute():
    """to_json gives back the dataset's camelCase keys, the same values, for every field."""
    data = json.loads((DATA / "dataset-wrapped.json").read_text())["record"]
    record, problems = record_from_dict(data)
    assert [] == problems
    out = record.to_json()
    assert data == {k: out[k] for k in data}


def test_list_and_jsonl_files_load(write_records, good_record):
    """A .json list and a .jsonl file (bare and wrapped lines) are both read."""
    other = dict(good_record, id="acme-two", slug="two")
    third = dict(good_record, id="acme-three", slug="three")
    folder = write_records(
        {
            "a/list.json": [good_record, other],
            "b/lines.jsonl": json.dumps({"record": third, "datasetVersion": "x"}) + "\n\n",
        }
    )
    result = load_paths([folder])
    assert () == result.problems
    assert ["acme-widget-jammed", "acme-two", "acme-three"] == [r.id for r in result.records]


@pytest.mark.parametrize(
    ("change", "field", "expected"),
    [
        ({"messagePattern": 5}, "messagePattern", "expected a string, got a number (5)"),
        ({"lineNumber": "12"}, "lineNumber", "expected an integer, got a string"),
        ({"solutions": "do it"}, "solutions", "expected a list of strings, got a string"),
        ({"solutions": ["ok", 3]}, "solutions", "expected a list of strings, got a list"),
        ({"schemaVersion": 3}, "schemaVersion", "unknown schema version 3, expected 2"),
        ({"messagePattern": "(a"}, "messagePattern", "invalid regex (missing ) at position 2)"),
        (
            {"examples": ["nope"]},
            "examples",
            "item 0: the record's own pattern does not match: 'nope'",
        ),
        (
            {"counterexamples": ["widget x jammed at 1 rpm"]},
            "counterexamples",
            "item 0: the record's own pattern matches, but must not: 'widget x jammed at 1 rpm'",
        ),
        (
            {"skew": {"distribution": "d", "name": "d.f", "change": "removed", "exact": "yes"}},
            "skew",
            '"exact": expected true or false, got a string',
        ),
        (
            {"skew": {"distribution": "d", "name": "d.C.m", "change": "removed", "classes": [1]}},
            "skew",
            '"classes": expected a list of non-empty strings, got a list',
        ),
        (
            {"colour": "red"},
            "colour",
            "unknown field (not in schema version 2 or errkb's extensions)",
        ),
    ],
)
def test_each_problem_is_one_line_naming_file_record_field(good_record, change, field, expected):
    """Every problem names the place, the record and the field, then the expectation."""
    _, problems = record_from_dict({**good_record, **change}, source="records/acme/w.json")
    assert [f'records/acme/w.json: record "acme-widget-jammed": field "{field}": {expected}'] == [
        p.line for p in problems
    ]


def test_missing_required_field_is_reported(good_record):
    """A record without messagePattern is unusable and says so."""
    data = {k: v for k, v in good_record.items() if k != "messagePattern"}
    record, problems = record_from_dict(data, source="x.json")
    assert record is None
    assert [
        'x.json: record "acme-widget-jammed": field "messagePattern": missing required field'
    ] == [p.line for p in problems]


def test_loading_continues_past_bad_records(write_records, good_record):
    """Bad files and bad records are reported; the good records beside them still load."""
    folder = write_records(
        {
            "lib/good.json": good_record,
            "lib/broken.json": "{not json",
            "lib/bad-regex.json": dict(good_record, id="acme-bad", messagePattern="(?P<x"),
            "lib/dup.json": good_record,
        }
    )
    result = load_paths([folder])
    assert ["acme-widget-jammed"] == [r.id for r in result.records]
    lines = sorted(p.line for p in result.problems)
    assert 3 == len(lines)
    assert lines[0].startswith(
        f'{folder}/lib/bad-regex.json: record "acme-bad": field "messagePattern": invalid regex'
    )
    assert lines[1].startswith(f"{folder}/lib/broken.json: invalid JSON (")
    assert lines[2].endswith(f'field "id": duplicate id, already defined in {folder}/lib/dup.json')


def test_strict_mode_raises_record_error(write_records, good_record):
    """strict=True raises RecordError with the pieces kept as attributes."""
    folder = write_records({"x.json": dict(good_record, lineNumber="no")})
    with pytest.raises(RecordError) as info:
        load_paths([folder], strict=True)
    assert ("acme-widget-jammed", "lineNumber") == (info.value.record_id, info.value.field)
    assert isinstance(info.value, ValueError)


def test_records_are_frozen_with_tuples():
    """Records are immutable value objects; list fields become tuples."""
    record, _ = record_from_dict(record_dict(tags=["a", "b"]))
    assert ("a", "b") == record.tags
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        record.id = "other"  # type: ignore[misc]


def test_missing_path_is_a_problem_not_a_crash(tmp_path):
    """A path that does not exist is one problem line."""
    result = load_paths([tmp_path / "nope"])
    assert [f"{tmp_path / 'nope'}: no such file or folder"] == [p.line for p in result.problems]


def test_record_fields_are_documented():
    """docs/records.md names every JSON key of the model."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "records.md").read_text()
    keys = list(
        Record(schema_version=2, id="a", slug="a", error_message="m", message_pattern="m").to_json()
    )
    assert [] == [k for k in keys if f"`{k}`" not in doc]


def test_public_names_of_the_records_package_are_pinned():
    """The package re-exports exactly these names, sorted as ruff sorts them, each defined."""
    expected = [
        "JSON_KEYS",
        "MAX_FILE",
        "MAX_LINE",
        "MAX_PATTERN",
        "MAX_TEXT",
        "SCHEMA_VERSION",
        "SEVERITIES",
        "SITE_TAG",
        "SKEW_CHANGES",
        "Body",
        "Listed",
        "LoadResult",
        "ReadPack",
        "Record",
        "RecordRef",
        "SitePattern",
        "Skew",
        "Versions",
        "jsonl_values",
        "load_paths",
        "load_refs",
        "open_pack",
        "pack_value",
        "record_from_dict",
        "release_key",
    ]
    assert expected == errkb.records.__all__
    assert [] == [name for name in expected if not hasattr(errkb.records, name)]


def test_the_records_package_never_imports_packs():
    """No module of errkb/records/ imports errkb.packs, not even inside a function."""
    imported = []
    for path in sorted(Path(errkb.records.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported += [(path.name, alias.name) for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                imported += [(path.name, f"{node.module}.{a.name}") for a in node.names]
    assert [] == [(f, name) for f, name in imported if name.startswith("errkb.packs")]


def test_load_refs_without_read_pack_loads_a_trusted_pack_whole(tmp_path, good_record):
    """With no pack reader, a trusted .jsonl loads as load_paths(validate=False) loads it."""
    pack = record_pack(tmp_path, good_record)
    refs, problems = load_refs([pack], trusted=[pack])
    assert [] == problems
    assert list(load_paths([pack], validate=False).records) == [r.load() for r in refs]
    assert [] == [r for r in refs if r._record is None]  # kept whole, nothing left to read


def test_load_refs_hands_only_trusted_packs_to_read_pack(tmp_path, good_record):
    """read_pack gets each trusted .jsonl (file, label, problems); its refs are kept in order."""
    pack = record_pack(tmp_path, good_record)
    other = tmp_path / "other"
    other.mkdir()
    (other / "more.jsonl").write_text(json.dumps(dict(good_record, id="acme-x")) + "\n")
    calls = []

    def read_pack(path, label, problems):
        calls.append((path, label, problems))
        problems.append(RecordError(label, "seen"))
        return [RecordRef.of(r) for r in load_paths([path], validate=False).records]

    refs, problems = load_refs([pack, other], trusted=[pack], read_pack=read_pack)
    assert [(pack, str(pack), problems)] == calls
    assert ["acme-0", "acme-1", "acme-2", "acme-x"] == [r.id for r in refs]
    assert [f"{pack}: seen"] == [p.line for p in problems]


def test_a_site_holds_from_its_release_until_the_next_one_listed():
    """``versions.sites`` lists each site at the first release of its run; site_at reads it."""
    from errkb.records import Versions

    v = Versions(
        distribution="vllm",
        first="0.2.7",
        last="0.9.2",
        sites=(("0.2.7", "vllm/a.py:1"), ("0.4.3", ":7"), ("0.6.6.post1", "vllm/b.py:2")),
    )
    assert "vllm/a.py:1" == v.site_at("0.3.3")
    assert "vllm/a.py:7" == v.site_at("0.4.3")
    assert "vllm/a.py:7" == v.site_at("0.5.5")
    assert "vllm/b.py:2" == v.site_at("0.6.6.post1")
    assert "vllm/b.py:2" == v.site_at("0.9.2")
    assert v.site_at("0.10.2") is None  # after the last release that raises it
    assert v.site_at("0.1.0") is None


def test_a_skew_record_keeps_exact_and_its_classes():
    """skew.exact and skew.classes load and come back as they were written."""
    skew = {"distribution": "d", "name": "d.C.m", "change": "removed", "changedIn": "2.0"}
    skew |= {"lastBefore": "1.0", "exact": False, "classes": ["d.C", "d.Sub"]}
    record, problems = record_from_dict(record_dict(skew=skew))
    assert [] == problems
    assert record is not None
    assert record.skew is not None
    assert skew == record.skew.to_json()


def test_skew_may_list_the_classes_a_record_covers():
    """``skew.classes`` loads as a tuple and writes back; anything but a list of names is a
    problem of the field."""
    skew = {"distribution": "transformers", "name": "transformers.Cache.m", "change": "removed"}
    record, problems = record_from_dict(
        record_dict(skew={**skew, "classes": ["transformers.DynamicCache"]})
    )
    assert [] == problems
    assert record is not None
    assert record.skew is not None
    assert ("transformers.DynamicCache",) == record.skew.classes
    assert ["transformers.DynamicCache"] == record.skew.to_json()["classes"]
    assert "classes" not in attrs.evolve(record.skew, classes=()).to_json()
    _, problems = record_from_dict(
        record_dict(skew={**skew, "classes": "DynamicCache"}), source="p.jsonl:1"
    )
    assert [
        (
            'p.jsonl:1: record "test-record": field "skew": "classes": expected a list of non-empty '
            "strings, got a string"
        )
    ] == [p.line for p in problems]


def test_site_patterns_load_and_round_trip():
    """``sitePatterns`` become frozen SitePattern values and are written back as JSON objects."""
    sites = [{"file": "ChatTTS/core.py", "function": "_infer"}]
    record, problems = record_from_dict(record_dict(sitePatterns=sites))
    assert [] == problems
    assert record is not None
    assert (errkb.records.SitePattern(file="ChatTTS/core.py", function="_infer"),) == (
        record.site_patterns
    )
    assert sites == record.to_json()["sitePatterns"]
    assert "site-pattern" in record.tags  # so that a listing finds it without reading it


def test_a_record_without_site_patterns_loads_as_before():
    """The original schema-2 form, with no errkb key, loads with no site patterns."""
    data = {
        k: v
        for k, v in record_dict().items()
        if k in ("schemaVersion", "id", "slug", "errorMessage", "messagePattern")
    }
    record, problems = record_from_dict(data)
    assert ([], ()) == (problems, record.site_patterns if record else None)


@pytest.mark.parametrize(
    ("sites", "expected"),
    [
        ([{"file": "a.py"}], 'item 0: needs "function", a non-empty string of 256 at most'),
        (
            [{"file": "a.txt", "function": "f"}],
            "item 0: \"file\": expected a path ending in .py, got 'a.txt'",
        ),
        (
            [{"file": "a.py", "function": "f", "line": 3}],
            "item 0: unknown key 'line' (expected file, function)",
        ),
        (["a.py"], "item 0: expected an object, got a string"),
    ],
)
def test_bad_site_patterns_are_reported_and_dropped(sites, expected):
    """A malformed site pattern is one problem naming the field and the item; the record loads."""
    record, problems = record_from_dict(record_dict(sitePatterns=sites))
    assert [f'<dict>: record "test-record": field "sitePatterns": {expected}'] == [
        str(p) for p in problems
    ]
    assert record is not None
    assert () == record.site_patterns


def test_site_pattern_matches_the_end_of_a_frame_path_and_its_function():
    """A site is a file glob matched at a path's end, on either separator, and a function."""
    site = errkb.records.SitePattern(
        file="vllm/model_executor/models/*.py", function="load_weights"
    )
    assert site.matches("/env/site-packages/vllm/model_executor/models/qwen2.py", "load_weights")
    assert site.matches("C:\\env\\vllm\\model_executor\\models\\llama.py", "load_weights")
    assert not site.matches("/env/myvllm/model_executor/models/qwen2.py", "load_weights")
    assert not site.matches("/env/vllm/model_executor/models/qwen2.py", "forward")


def test_a_pack_line_without_its_schema_version_is_a_schema_2_record(tmp_path):
    """Pack lines leave out ``"schemaVersion": 2`` (the miner writes none); the loader reads
    them as schema 2, and a line that names another version is still refused."""
    pack = tmp_path / "lib.jsonl"
    line = {"id": "lib-x", "slug": "x", "errorMessage": "boom", "messagePattern": "boom"}
    line |= {"errorClass": "ValueError", "severity": "error", "documentation": "d"}
    later = {**line, "id": "lib-y", "slug": "y", "schemaVersion": 3}
    pack.write_text(json.dumps(line) + "\n" + json.dumps(later) + "\n", encoding="utf-8")
    loaded = load_paths([pack])
    assert ["lib-x"] == [r.id for r in loaded.records]
    assert ["schemaVersion"] == [p.field for p in loaded.problems]
