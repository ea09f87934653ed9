"""Hostile records and hostile folders: one clear line each, the rest loads, nothing runs."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from helpers import run_cli, run_python

from errkb.records import load_paths
from errkb.testing import record_dict

GOOD = record_dict(
    id="acme-widget-jammed",
    slug="widget-jammed",
    messagePattern=r"widget (?P<name>\w+) jammed at (?P<rpm>\d+) rpm",
    errorClass="RuntimeError",
    solutions=["Unjam it."],
    examples=["widget alpha jammed at 1200 rpm"],
)


def _bad(**change):
    return {
        **GOOD,
        "id": f"acme-bad-{len(change)}-{abs(hash(json.dumps(change, sort_keys=True, default=str))) % 10**6}",
        **change,
    }


def hostile_files(sentinel: str) -> dict[str, object]:
    """Each file holds one kind of bad record (or bad file); name -> content."""
    harmful = f"open({sentinel!r}, 'w').write('executed')\nimport os; os.system('touch {sentinel}')"
    deep = "[" * 100_000 + "]" * 100_000
    return {
        "01-invalid-json.json": '{"id": "x",',
        "02-not-an-object.json": "[1]",
        "03-wrong-type.json": _bad(lineNumber="twelve"),
        "04-missing-pattern.json": {k: v for k, v in _bad().items() if k != "messagePattern"},
        "05-extra-field.json": _bad(payload="surprise"),
        "06-invalid-regex.json": _bad(messagePattern="widget (unclosed"),
        "07-catastrophic-regex.json": _bad(
            messagePattern=r"aaa(a|aa)+$", examples=[], counterexamples=["a" * 40 + "!"]
        ),
        "08-ten-megabytes.json": _bad(documentation="x" * 10_000_000),
        "09-duplicate-id.json": GOOD,
        "10-matches-everything.json": _bad(messagePattern=".*"),
        "11-unknown-schema.json": _bad(schemaVersion=99),
        "12-path-in-id.json": _bad(id="../../etc/passwd"),
        "13-advisor-is-code.json": _bad(advisors=["os:system"]),
        "14-javascript-url.json": _bad(githubUrl="javascript:alert(1)"),
        "15-odd-severity.json": _bad(severity="urgent!!"),
        "16-example-mismatch.json": _bad(examples=["nothing like it"]),
        "17-counterexample-matches.json": _bad(counterexamples=["widget b jammed at 5 rpm"]),
        "18-solutions-not-a-list.json": _bad(solutions="just fix it"),
        "19-deeply-nested.json": deep,
        "20-empty-file.json": "",
        "21-wrapped-not-object.json": {"record": 5, "datasetVersion": "x"},
        "22-huge-pattern.json": _bad(messagePattern="widget " + "a" * 10_000),
        "23-null-id.json": _bad(id=None),
        "24-code-in-fields.json": _bad(
            id="acme-code", validationCode=harmful, tryCatchPattern=harmful, exampleFix=harmful
        ),
    }


@pytest.fixture
def hostile(tmp_path):
    sentinel = str(tmp_path / "EXECUTED")
    folder = tmp_path / "records" / "acme"
    folder.mkdir(parents=True)
    (folder / "00-good.json").write_text(json.dumps(GOOD))
    for name, content in hostile_files(sentinel).items():
        (folder / name).write_text(content if isinstance(content, str) else json.dumps(content))
    (folder / "25-not-utf8.json").write_bytes(b'{"id": "\xff\xfe"}')
    return folder, sentinel


def test_each_hostile_record_gives_one_clear_line_and_the_good_ones_load(hostile):
    """25 kinds of bad record or file: exactly one line each (none for code in text fields)."""
    folder, _ = hostile
    proc = run_cli("validate", str(folder), timeout=300)
    assert 1 == proc.returncode
    lines = proc.stdout.decode().splitlines()
    by_file: dict[str, list[str]] = {}
    for line in lines:
        name = line.split(": ", 1)[0].rsplit("/", 1)[-1].split("[")[0]
        by_file.setdefault(name, []).append(line)
    expected = {f"{n:02d}" for n in range(1, 26)} - {"24"}
    assert expected == {name[:2] for name in by_file}, "\n".join(lines)
    assert all(1 == len(v) for v in by_file.values()), "\n".join(lines)
    assert all(len(line) < 400 for line in lines)  # the 10 MB string is not echoed
    assert b"records loaded" in proc.stderr
    loaded = load_paths([folder])
    assert {"acme-widget-jammed", "acme-code"} <= {r.id for r in loaded.records}


def test_nothing_from_a_record_is_ever_executed(hostile):
    """Records whose text fields hold code: validate, explain, show and render run none of it."""
    folder, sentinel = hostile
    env = {"ERRKB_RECORDS": str(folder)}
    run_cli("validate", str(folder), timeout=300)
    run_cli("explain", "RuntimeError: widget alpha jammed at 1200 rpm", env=env, timeout=300)
    run_cli("show", "acme-code", env=env)
    run_cli("show", "--json", "acme-code", env=env)
    assert not Path(sentinel).exists()


def test_lookup_stays_bounded_with_a_catastrophic_pattern_loaded(tmp_path):
    """A record whose pattern backtracks forever costs one timeout, once; the answer still comes."""
    path = tmp_path / "evil.json"
    path.write_text(json.dumps([GOOD, _bad(id="acme-evil", messagePattern=r"aaa(a|aa)+$")]))
    proc = run_python(
        f"""
import json, time
from errkb.registry import Registry
from errkb.diagnosis import explain
reg = Registry.from_paths([{str(path)!r}], builtin=False, env=False, entry_points=False)
t = time.monotonic()
d = explain("widget x jammed at 3 rpm " + "a" * 60 + "!", registry=reg)
print(json.dumps({{"seconds": time.monotonic() - t, "top": d.top.record.id, "notes": list(d.notes)}}))
""",
        timeout=120,
    )
    out = json.loads(proc.stdout)
    assert "acme-widget-jammed" == out["top"]
    assert ["patterns that ran past their timeout were skipped: acme-evil"] == out["notes"]
    assert out["seconds"] < 5  # twice the 0.25 s timeout, not exponential time


def test_symlink_loops_unreadable_entries_and_fifos_are_reported_not_fatal(tmp_path):
    """A folder with a symlink loop, a FIFO, a link to /dev/zero and a broken link still loads."""
    folder = tmp_path / "records"
    (folder / "acme").mkdir(parents=True)
    (folder / "acme" / "good.json").write_text(json.dumps(GOOD))
    (folder / "acme" / "loop").symlink_to(folder)
    (folder / "acme" / "broken.json").symlink_to(tmp_path / "missing.json")
    if hasattr(os, "mkfifo"):
        os.mkfifo(folder / "acme" / "pipe.json")
    if Path("/dev/zero").exists():
        (folder / "acme" / "zero.json").symlink_to("/dev/zero")
    start = time.monotonic()
    result = load_paths([folder])
    assert ["acme-widget-jammed"] == [r.id for r in result.records]
    problems = sorted(p.line.rsplit("/", 1)[-1] for p in result.problems)
    assert any(p.startswith("broken.json: cannot read the file") for p in problems), problems
    if hasattr(os, "mkfifo"):
        assert "pipe.json: not a regular file, skipped" in problems
    assert time.monotonic() - start < 30  # no hang on the FIFO or /dev/zero


def test_read_only_folder_loads(tmp_path):
    """Records in a read-only folder load; errkb never writes beside its records."""
    folder = tmp_path / "ro"
    folder.mkdir()
    (folder / "good.json").write_text(json.dumps(GOOD))
    folder.chmod(0o555)
    try:
        result = load_paths([folder])
        assert (["acme-widget-jammed"], ()) == ([r.id for r in result.records], result.problems)
        assert ["good.json"] == [p.name for p in folder.iterdir()]
    finally:
        folder.chmod(0o755)
