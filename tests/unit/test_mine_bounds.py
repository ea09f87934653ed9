"""Exact release boundaries: releases between the mined ones are read for their messages.

Six releases of a package are written by the test; a message appears in release 2.0 and is
gone from 5.0. Mined from 1.0, 3.0 and 6.0 alone, the record would say 3.0 to 3.0; with the
others read as bounds it says 2.0 to 4.0, which is what importing each release and calling
the function shows.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from errkb.mine import mine
from errkb.packs import read_releases, releases_path
from tests.helpers import run_cli

MESSAGE = "the scheduler queue was closed before the request for {name} arrived"
STEADY = "the block table cannot hold more than {n} blocks for one sequence"


def _release(root: Path, version: str, *, raises: bool) -> Path:
    """A release of `boundpkg` as a source folder: `steady` always raises, `sometimes` if asked."""
    folder = root / f"boundpkg-{version}"
    (folder / "boundpkg").mkdir(parents=True)
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "boundpkg"\nversion = "{version}"\n', encoding="utf-8"
    )
    body = [
        "def steady(n):",
        '    raise ValueError(f"the block table cannot hold more than {n} blocks for one sequence")',
        "",
        "def sometimes(name):",
    ]
    if raises:
        body.append(
            '    raise RuntimeError(f"the scheduler queue was closed before the request for '
            '{name} arrived")'
        )
    else:
        body.append("    return name")
    (folder / "boundpkg" / "__init__.py").write_text("\n".join(body) + "\n", encoding="utf-8")
    return folder


@pytest.fixture
def releases(tmp_path: Path) -> dict[str, Path]:
    raising = {"2.0", "3.0", "4.0"}
    return {
        v: _release(tmp_path, v, raises=v in raising) for v in ("1.0", "2.0", "3.0", "4.0", "5.0")
    } | {"6.0": _release(tmp_path, "6.0", raises=False)}


def _raises_when_imported(folder: Path) -> bool:
    """Whether the release really raises the message: import it in a child and call it."""
    code = "import boundpkg\ntry:\n    boundpkg.sometimes('x')\nexcept RuntimeError as e:\n    print(e)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(folder)},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return "the scheduler queue was closed" in out


def _record(records: tuple[dict, ...], message: str) -> dict:
    return next(r for r in records if r["errorMessage"] == message)


def test_mined_releases_alone_give_the_nearest_mined_boundaries(releases):
    """Without bounds the range is only as exact as the mined releases (what was wrong)."""
    result = mine([str(releases[v]) for v in ("1.0", "3.0", "6.0")], excerpt_lines=0, workers=1)
    versions = _record(result.records, MESSAGE)["versions"]
    assert ("3.0", "3.0") == (versions["first"], versions["last"])


def test_bounds_make_first_and_last_the_real_releases(releases):
    """Read for presence, 2.0, 4.0 and 5.0 move the range to what each release really does."""
    result = mine(
        [str(releases[v]) for v in ("1.0", "3.0", "6.0")],
        excerpt_lines=0,
        bounds=[str(releases[v]) for v in ("2.0", "4.0", "5.0")],
        workers=1,
    )
    versions = _record(result.records, MESSAGE)["versions"]
    real = [v for v, folder in sorted(releases.items()) if _raises_when_imported(folder)]
    assert (real[0], real[-1]) == (versions["first"], versions["last"])
    assert ("2.0", "4.0") == (versions["first"], versions["last"])
    # Sites come from the mined releases only: the bounds are read for presence, nothing else.
    assert {"3.0"} == set(versions["sites"])
    steady = _record(result.records, STEADY)["versions"]
    assert "1.0" == steady["first"]
    assert "last" not in steady
    # One message changes in each of the two gaps, from one file, read in each of three bounds.
    assert {
        "files": 3,
        "first-moved": 1,
        "last-moved": 1,
        "messages": 2,
        "records": 2,
    } == result.summary["bounds"]


def test_the_cli_writes_the_release_list_with_what_was_not_read(releases, tmp_path):
    """`--releases` lists every release; one not read says why, and the pack carries the list."""
    listed = tmp_path / "releases.txt"
    listed.write_text(
        "1.0\n2.0 yanked\n2.5 # no sdist on the index\n3.0\n4.0\n5.0\n6.0\n", encoding="utf-8"
    )
    pack = tmp_path / "out" / "boundpkg.jsonl"
    proc = run_cli(
        "mine",
        str(releases["1.0"]),
        str(releases["3.0"]),
        str(releases["6.0"]),
        "--excerpt-lines",
        "0",
        "--output",
        str(pack),
        "--releases",
        str(listed),
        "--bounds",
        *(str(releases[v]) for v in ("2.0", "4.0", "5.0")),
    )
    assert 0 == proc.returncode, proc.stderr
    assert releases_path(pack) == tmp_path / "out" / "boundpkg.releases"
    lists = read_releases(pack.parent)
    assert {
        "releases": ["1.0", "2.0", "2.5", "3.0", "4.0", "5.0", "6.0"],
        "mined": ["1.0", "3.0", "6.0"],
        "yanked": ["2.0"],
        "unread": {"2.5": "no sdist on the index"},
    } == lists["boundpkg"]
    record = _record(
        tuple(json.loads(line) for line in pack.read_text(encoding="utf-8").splitlines()), MESSAGE
    )
    assert ("2.0", "4.0") == (record["versions"]["first"], record["versions"]["last"])


def test_a_file_that_is_no_release_list_is_passed_over(tmp_path):
    """Release lists only sharpen ranges: an unreadable one is ignored, not an error."""
    (tmp_path / "bad.releases").write_text("{not json", encoding="utf-8")
    (tmp_path / "other.releases").write_text('{"schema": "x"}', encoding="utf-8")
    assert {} == read_releases(tmp_path)


def test_a_malformed_release_line_is_a_usage_error(releases, tmp_path):
    """`--releases` names the line it cannot read, and nothing is written (exit status 2)."""
    listed = tmp_path / "releases.txt"
    listed.write_text("1.0\n2.0 withdrawn\n", encoding="utf-8")
    pack = tmp_path / "out" / "boundpkg.jsonl"
    proc = run_cli("mine", str(releases["1.0"]), "--output", str(pack), "--releases", str(listed))
    assert 2 == proc.returncode
    assert (
        "line 2: expected 'VERSION [yanked] [# why]', got '2.0 withdrawn'" in proc.stderr.decode()
    )
    assert not pack.exists()


def test_a_cached_reading_is_reused_only_while_the_file_is_the_same(releases, tmp_path):
    """`bounds_cache` keeps each release's reading; a changed release is read again."""
    from errkb.mine._bounds import Bound, message_key, presence

    def bound(given: Path) -> Bound:
        made = Bound(str(given), "boundpkg", "2.0")
        made.files = frozenset({"boundpkg/__init__.py"})
        return made

    cache = tmp_path / "cache"
    first = presence([bound(releases["2.0"])], cache=cache, workers=1)
    assert not cache.exists()  # a source folder is read afresh: only files are kept
    keys = {message_key(MESSAGE, "RuntimeError"), message_key(STEADY, "ValueError")}
    assert {("boundpkg", "2.0"): frozenset(keys)} == first
    sdist = tmp_path / "boundpkg-2.0.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(releases["2.0"], arcname="boundpkg-2.0")
    assert first == presence([bound(sdist)], cache=cache, workers=1)
    [kept] = cache.glob("*.json")
    kept.write_text(json.dumps(["planted"]), encoding="utf-8")
    assert {("boundpkg", "2.0"): frozenset({"planted"})} == presence(
        [bound(sdist)], cache=cache, workers=1
    )
    with tarfile.open(sdist, "w:gz") as tar:  # the file changes: so does its stamp
        tar.add(releases["5.0"], arcname="boundpkg-2.0")
    assert {("boundpkg", "2.0"): frozenset({message_key(STEADY, "ValueError")})} == presence(
        [bound(sdist)], cache=cache, workers=1
    )


def test_no_excerpt_keeps_no_upstream_code_with_bounds_too(releases):
    """`excerpt_lines=0` writes no source at all, whatever else the run reads."""
    result = mine(
        [str(releases[v]) for v in ("1.0", "3.0")],
        excerpt_lines=0,
        bounds=[str(releases["2.0"])],
        workers=1,
    )
    assert result.records
    for record in result.records:
        assert not {"sourceCode", "sourceCodeStart", "sourceCodeEnd"} & set(record)


def test_a_renamed_hole_is_the_same_message_to_the_user(tmp_path):
    """A hole renamed in 3.0 prints the same text: both records say 1.0 to the newest."""
    folders = []
    for version, hole in (("1.0", "name"), ("2.0", "name"), ("3.0", "who")):
        folder = tmp_path / f"holepkg-{version}"
        (folder / "holepkg").mkdir(parents=True)
        (folder / "pyproject.toml").write_text(
            f'[project]\nname = "holepkg"\nversion = "{version}"\n', encoding="utf-8"
        )
        (folder / "holepkg" / "__init__.py").write_text(
            f"def f({hole}):\n"
            f'    raise ValueError(f"the adapter {{{hole}}} was saved for another base model")\n',
            encoding="utf-8",
        )
        folders.append(str(folder))
    result = mine([folders[0], folders[2]], excerpt_lines=0, bounds=[folders[1]], workers=1)
    ranges = {
        r["errorMessage"]: (r["versions"]["first"], r["versions"].get("last"))
        for r in result.records
    }
    assert {
        "the adapter {name} was saved for another base model": ("1.0", None),
        "the adapter {who} was saved for another base model": ("1.0", None),
    } == ranges


def test_a_message_that_moved_to_another_file_between_is_found(tmp_path):
    """2.0 raises the message from another file than 1.0 does: read through its anchor."""
    pytest.importorskip("ahocorasick_rs")
    folders = []
    text = '    raise RuntimeError("the prefix cache lost a block that a running request holds")\n'
    for version, where in (("1.0", "a"), ("2.0", "b"), ("3.0", None)):
        folder = tmp_path / f"movepkg-{version}"
        (folder / "movepkg").mkdir(parents=True)
        (folder / "pyproject.toml").write_text(
            f'[project]\nname = "movepkg"\nversion = "{version}"\n', encoding="utf-8"
        )
        (folder / "movepkg" / "__init__.py").write_text("", encoding="utf-8")
        for name in ("a", "b"):
            body = "def f():\n" + (text if name == where else "    return 1\n")
            (folder / "movepkg" / f"{name}.py").write_text(body, encoding="utf-8")
        folders.append(str(folder))
    result = mine([folders[0], folders[2]], excerpt_lines=0, bounds=[folders[1]], workers=1)
    [record] = result.records
    assert ("1.0", "2.0") == (record["versions"]["first"], record["versions"]["last"])


def test_history_from_an_earlier_run_gives_the_same_pack(tmp_path):
    """`--history-from` reuses the skew records of a run of the same releases: same pack."""
    pytest.importorskip("griffe")
    folders = []
    for version, extra in (("1.0", ""), ("2.0", "\n\ndef added_later():\n    return 2\n")):
        folder = tmp_path / f"histpkg-{version}"
        (folder / "histpkg").mkdir(parents=True)
        (folder / "pyproject.toml").write_text(
            f'[project]\nname = "histpkg"\nversion = "{version}"\n', encoding="utf-8"
        )
        (folder / "histpkg" / "__init__.py").write_text(
            'def f():\n    raise ValueError("the scheduler refused a request longer than its budget")\n'
            + extra,
            encoding="utf-8",
        )
        folders.append(str(folder))
    first, again = tmp_path / "first.jsonl", tmp_path / "again.jsonl"
    summary = tmp_path / "first.summary"
    common = ("--history", "--excerpt-lines", "0")
    done = run_cli("mine", *folders, *common, "--output", str(first), "--summary", str(summary))
    assert 0 == done.returncode, done.stderr
    assert any('"skew"' in line for line in first.read_text(encoding="utf-8").splitlines())
    done = run_cli(
        "mine", *folders, *common, "--output", str(again), "--history-from", str(first),
        "--summary", str(summary),
    )  # fmt: skip
    assert 0 == done.returncode, done.stderr
    assert first.read_bytes() == again.read_bytes()
