"""The shipped knowledge base meets the bar every record must meet."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest
from helpers import run_cli

from errkb.records import load_paths
from errkb.registry import builtin_records_dir
from errkb.validate import check_published, check_ranking

RECORDS = load_paths([builtin_records_dir()])
BY_ID = {r.id: r for r in RECORDS.records}
PUBLISHED = builtin_records_dir() / "PUBLISHED"


def test_every_shipped_record_is_valid_and_wins_on_its_own_examples():
    """No schema problem, no example outranked by another record."""
    assert [] == [p.line for p in RECORDS.problems]
    assert [] == [p.line for p in check_ranking(RECORDS.records)]


def test_at_least_eighty_records_across_the_stack():
    """80+ records, covering every library the knowledge base promises."""
    counts = Counter(r.library for r in RECORDS.records)
    assert len(RECORDS.records) >= 80
    expected = {
        "vllm",
        "chattts",
        "torch",
        "transformers",
        "accelerate",
        "bitsandbytes",
        "flash_attn",
        "safetensors",
        "tokenizers",
        "huggingface_hub",
    }
    assert expected <= set(counts)


@pytest.mark.parametrize("record", RECORDS.records, ids=lambda r: r.id)
def test_record_is_complete(record):
    """Raise site, class, message, examples, counterexample, and advice in our own words."""
    missing = [
        name
        for name in (
            "error_class",
            "file_path",
            "line_number",
            "github_url",
            "analyzed_sha",
            "documentation",
            "trigger_scenarios",
            "common_situations",
            "example_fix",
            "title",
            "severity",
        )
        if not getattr(record, name)
    ]
    assert [] == missing
    assert len(record.examples) >= 2
    assert len(record.counterexamples) >= 1
    assert record.solutions
    assert record.prevention_tips
    assert re.match(r"https://github\.com/[\w.-]+/[\w.-]+/blob/[\w.-]+/\S+#L\d+", record.github_url)
    assert record.source_code is None  # never upstream code in our records
    assert record.id == f"{record.library.replace('_', '-')}-{record.slug}"


def test_every_published_id_is_still_there():
    """Published records are retired, never deleted; every id in records/PUBLISHED resolves."""
    assert [] == check_published(RECORDS.records, PUBLISHED)
    listed = {
        line for line in PUBLISHED.read_text().splitlines() if line and not line.startswith("#")
    }
    assert set(BY_ID) <= listed, "add new record ids to records/PUBLISHED"


def test_validate_fails_when_a_published_record_is_deleted(tmp_path, write_records, good_record):
    """errkb validate --published: a listed id with no record is one line, exit 1."""
    folder = write_records({"acme/good.json": good_record})
    published = tmp_path / "PUBLISHED"
    published.write_text("acme-widget-jammed\nacme-old-error\n")
    proc = run_cli("validate", "--published", str(published), str(folder))
    assert 1 == proc.returncode
    assert [
        f'{published}: record "acme-old-error": published record is gone: mark it retired instead of deleting it'
    ] == (proc.stdout.decode().splitlines())


def test_retired_records_stay_loadable_but_never_match(write_records, good_record):
    """A retired record keeps its id (show works) but is never a match."""
    folder = write_records({"acme/old.json": dict(good_record, retired=True)})
    env = {"ERRKB_RECORDS": str(folder)}
    assert 0 == run_cli("show", "acme-widget-jammed", env=env).returncode
    assert (
        1 == run_cli("explain", "RuntimeError: widget alpha jammed at 1200 rpm", env=env).returncode
    )


def test_docs_index_counts_by_library():
    """docs/errors/index.md states the count of each library's records."""
    index = Path(__file__).resolve().parents[2] / "docs" / "errors" / "index.md"
    if not index.exists():
        pytest.skip("needs the source tree")
    text = index.read_text()
    for library, count in Counter(r.library for r in RECORDS.records).items():
        assert f"| [{library}](#{library}) | {count} |" in text
