"""Installed versions as facts: the ``installed`` probe and the facts of version-skew records.

The distribution is the real transformers of the test environment; the errors are the real
ones its API raises for code written for an older release.
"""

from __future__ import annotations

import json
import re
from importlib import metadata

import pytest

from errkb.diagnosis import explain
from errkb.findings import SOURCES
from errkb.options import Options
from errkb.probes import BUILTIN
from errkb.probes.installed import InstalledVersions, compare_versions
from errkb.testing import FakeMeasurements, record_dict, registry_from_dicts
from tests.helpers import run_cli, run_python, write_pack

TRANSFORMERS = metadata.version("transformers")

#: The skew of ``Cache.get_max_length``: present in transformers 4.48.3, gone in 4.49.0 (both
#: wheels' ``transformers/cache_utils.py``; 4.48.3's forwards to ``get_max_cache_shape``).
SKEW_RECORD = record_dict(
    id="skew-transformers-test",
    errorMessage="'DynamicCache' object has no attribute 'get_max_length'",
    messagePattern=r"'(?:Cache|DynamicCache)' object has no attribute 'get_max_length'",
    errorClass="AttributeError",
    tags=["mined", "skew"],
    solutions=["Use `get_max_cache_shape` instead."],
    versions={"distribution": "transformers", "first": "4.49.0", "checked": "4.49.0"},
    skew={
        "distribution": "transformers",
        "name": "transformers.cache_utils.Cache.get_max_length",
        "change": "renamed",
        "changedIn": "4.49.0",
        "lastBefore": "4.48.3",
        "replacement": "transformers.cache_utils.Cache.get_max_cache_shape",
    },
)

#: ``Cache.get_usable_length``: in transformers 4.53.3's ``cache_utils.py``, not in 4.54.0's
#: (both wheels read); the transformers of the test environment lacks it too.
USABLE_RECORD = record_dict(
    id="skew-transformers-usable",
    errorMessage="'DynamicCache' object has no attribute 'get_usable_length'",
    messagePattern=r"'(?:Cache|DynamicCache)' object has no attribute 'get_usable_length'",
    errorClass="AttributeError",
    tags=["mined", "skew"],
    versions={"distribution": "transformers", "first": "4.54.0", "checked": "4.54.0"},
    skew={
        "distribution": "transformers",
        "name": "transformers.cache_utils.Cache.get_usable_length",
        "change": "removed",
        "changedIn": "4.54.0",
        "lastBefore": "4.53.3",
    },
)

CALL_REMOVED = "from transformers import DynamicCache\nDynamicCache().get_usable_length(1)\n"


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_probe_is_built_in_and_its_source_is_known() -> None:
    """The probe is in the built-in table and ``installed`` is a fact source."""
    assert "errkb.probes.installed:probe" == BUILTIN["installed"]
    assert "installed" in SOURCES


def test_reads_the_real_installed_version() -> None:
    """The reading of an installed distribution is its metadata's version; a missing one is None."""
    versions = InstalledVersions()
    assert TRANSFORMERS == versions["transformers"]
    assert versions["no-such-distribution-errkb"] is None
    assert ["transformers", "no-such-distribution-errkb"] == list(versions)


def test_reading_a_version_imports_nothing_of_it() -> None:
    """Asking for transformers' version imports neither transformers nor torch."""
    code = (
        "import sys\n"
        "from errkb.probes.installed import InstalledVersions\n"
        "print(InstalledVersions()['transformers'])\n"
        "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))\n"
    )
    result = run_python(code)
    assert 0 == result.returncode, result.stderr
    assert f"{TRANSFORMERS}\n[]" == result.stdout.decode().strip()


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        ("4.52.0", "4.49.0", 1),
        ("4.48.3", "4.49.0", -1),
        ("4.49", "4.49.0", 0),
        ("0.5.0rc1", "0.5.0", -1),
        ("2.1.0.post1", "2.1.0", 1),
        ("2.13.0+cpu", "2.13.0", 0),
        ("1.0.dev3", "1.0a1", -1),
        ("unknown", "1.0", None),
    ],
)
def test_compare_versions(a, b, expected) -> None:
    """Releases compare as PEP 440 orders their common forms."""
    assert expected == compare_versions(a, b)


def test_skew_record_gains_the_installed_facts() -> None:
    """A matched skew record states the installed release and where it stands against the change."""
    message = "'DynamicCache' object has no attribute 'get_max_length'"
    diagnosis = explain(f"AttributeError: {message}", registry=registry_from_dicts([SKEW_RECORD]))
    assert diagnosis is not None
    facts = {f.name: f for f in diagnosis.top.facts}
    assert TRANSFORMERS == facts["transformers"].value
    assert "installed" == facts["transformers"].source
    side = {1: "newer", 0: "the release of the change", -1: "older"}[
        compare_versions(TRANSFORMERS, "4.49.0")
    ]
    assert (
        f"renamed in 4.49.0 (last in 4.48.3); the installed {TRANSFORMERS} is {side}"
        == facts["`get_max_length`"].value
    )


def test_injected_version_is_compared() -> None:
    """An injected reading stands in for the metadata, and an older release says so."""
    options = Options(
        measurements=FakeMeasurements(readings={"installed": {"transformers": "4.48.3"}})
    )
    diagnosis = explain(
        "AttributeError: 'DynamicCache' object has no attribute 'get_max_length'",
        registry=registry_from_dicts([SKEW_RECORD]),
        options=options,
    )
    assert diagnosis is not None
    values = [f.value for f in diagnosis.top.facts]
    assert ["4.48.3", "renamed in 4.49.0 (last in 4.48.3); the installed 4.48.3 is older"] == values


def test_not_installed_is_a_fact() -> None:
    """A record naming a distribution this Python lacks says it is not installed."""
    record = dict(
        SKEW_RECORD,
        skew=dict(SKEW_RECORD["skew"], distribution="no-such-distribution-errkb"),
    )
    diagnosis = explain(
        "AttributeError: 'DynamicCache' object has no attribute 'get_max_length'",
        registry=registry_from_dicts([record]),
    )
    assert diagnosis is not None
    [fact] = diagnosis.top.facts
    assert ("no-such-distribution-errkb", "not installed", "installed") == (
        fact.name,
        fact.value,
        fact.source,
    )


def test_record_without_versions_gets_no_installed_fact() -> None:
    """Only records that name a distribution get the installed facts."""
    record = {k: v for k, v in SKEW_RECORD.items() if k not in ("skew", "versions")}
    diagnosis = explain(
        "AttributeError: 'DynamicCache' object has no attribute 'get_max_length'",
        registry=registry_from_dicts([record]),
    )
    assert diagnosis is not None
    assert () == diagnosis.top.facts


def test_hook_shows_the_installed_release(tmp_path) -> None:
    """Under the hook, the real error of old code on the installed transformers shows its release."""
    pack = write_pack(tmp_path / "skew.jsonl", [USABLE_RECORD])
    code = "import errkb\nerrkb.install()\n" + CALL_REMOVED
    result = run_python(code, env={"ERRKB_RECORDS": str(pack), "COLUMNS": "200"})
    stderr = _flat(result.stderr.decode())
    assert "'DynamicCache' object has no attribute 'get_usable_length'" in stderr
    assert f"transformers = {TRANSFORMERS}" in stderr, stderr
    assert "removed in 4.54.0 (last in 4.53.3)" in stderr, stderr


def test_explain_json_carries_the_installed_facts(tmp_path) -> None:
    """``errkb explain --json`` of the real error lists the installed release with its source."""
    produced = run_python(CALL_REMOVED)
    last_line = produced.stderr.decode().strip().splitlines()[-1]
    assert last_line.startswith("AttributeError: 'DynamicCache' object has no attribute"), last_line
    pack = write_pack(tmp_path / "skew.jsonl", [USABLE_RECORD])
    result = run_cli("explain", "--json", "--records", str(pack), last_line)
    assert 0 == result.returncode, result.stderr
    facts = json.loads(result.stdout)["matches"][0]["facts"]
    assert {
        "name": "transformers",
        "value": TRANSFORMERS,
        "unit": None,
        "source": "installed",
    } in facts


#: A mined record raised from 4.40.0 to 4.44.2, in a pack whose release list says 4.39.0 could
#: not be read and that the oldest release read is 4.36.2.
RANGE_RECORD = record_dict(
    id="mined-transformers-range",
    errorMessage="the rope scaling factor must be a float larger than one",
    messagePattern=r"the rope scaling factor must be a float larger than one",
    errorClass="ValueError",
    tags=["mined", "raise", "python"],
    versions={
        "distribution": "transformers",
        "first": "4.40.0",
        "last": "4.44.2",
        "checked": "4.46.3",
    },
)
RANGE_LIST = {
    "releases": ["4.36.2", "4.38.2", "4.39.0", "4.40.0", "4.44.2", "4.45.0", "4.46.3"],
    "mined": ["4.36.2", "4.40.0", "4.46.3"],
    "unread": {"4.39.0": "yanked, no archive"},
}


@pytest.mark.parametrize(
    ("installed", "where"),
    [
        ("4.41.1", "within"),
        ("4.45.0", "outside"),
        ("4.38.2", "outside"),
        ("4.39.0", "a release errkb could not read (yanked, no archive)"),
        ("4.30.0", "older than every release checked (the oldest is 4.36.2)"),
    ],
)
def test_range_fact_says_what_the_release_list_knows(monkeypatch, installed, where) -> None:
    """The range names releases not read beside a bound, and never calls unknown releases outside."""
    import errkb.registry

    monkeypatch.setattr(errkb.registry, "_releases", {"transformers": RANGE_LIST})
    assert (
        f"transformers 4.40.0 (4.39.0 not checked) to 4.44.2; the installed {installed} is {where}"
        == _range_with(RANGE_RECORD, installed)
    )


def _range_with(record: dict, installed: str) -> str:
    """The "raised by" fact of the range record's diagnosis, with ``installed`` injected."""
    message = "ValueError: the rope scaling factor must be a float larger than one"
    return _facts_with(record, message, installed)["raised by"]


def _facts_with(record: dict, message: str, installed: str) -> dict[str, str]:
    """The top finding's facts, by name, with transformers ``installed`` injected."""
    options = Options(
        measurements=FakeMeasurements(readings={"installed": {"transformers": installed}})
    )
    diagnosis = explain(message, registry=registry_from_dicts([record]), options=options)
    assert diagnosis is not None
    return {f.name: str(f.value) for f in diagnosis.top.facts}


def test_range_fact_marks_the_oldest_release_checked(monkeypatch) -> None:
    """A range starting at the oldest release read may start earlier: it says so."""
    import errkb.registry

    monkeypatch.setattr(errkb.registry, "_releases", {"transformers": RANGE_LIST})
    record = dict(RANGE_RECORD, versions=dict(RANGE_RECORD["versions"], first="4.36.2"))
    assert (
        "transformers 4.36.2 (the oldest release checked) to 4.44.2; the installed 4.38.2 is within"
        == _range_with(record, "4.38.2")
    )


def test_a_change_not_placed_exactly_says_between_and_knows_what_it_does_not_know() -> None:
    """skew.exact false: the fact names both releases read, and an unread installed one as such."""
    record = dict(
        USABLE_RECORD,
        skew=dict(USABLE_RECORD["skew"], lastBefore="4.51.3", exact=False),
    )
    message = "AttributeError: 'DynamicCache' object has no attribute 'get_usable_length'"
    values = [
        _facts_with(record, message, installed)["`get_usable_length`"]
        for installed in ("4.52.4", "4.58.0")
    ]
    assert [
        (
            "removed between 4.51.3 and 4.54.0 (the releases between were not checked); "
            "the installed 4.52.4 is one of the releases not checked"
        ),
        (
            "removed between 4.51.3 and 4.54.0 (the releases between were not checked); "
            "the installed 4.58.0 is newer"
        ),
    ] == values
