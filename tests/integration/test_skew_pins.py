"""Skew pins install a release where the user's code works, checked with pip itself.

Six releases of a small package are built as wheels into a local index; only 1.0, 4.0 and 6.0
are mined, with the list of all six. In 3.0 a function (and its import in the package's ``__init__``) and a method were removed, and a class
and a keyword added. Code written for one side meets the other in a child process; errkb
explains the real error, and the pin it suggests is resolved by ``pip install --dry-run
--report`` against the index; the code then runs against the release pip chose. Each release
is also asked :func:`errkb.mine._history.has_change`, which places every change exactly in 3.0.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from helpers import write_wheel

from errkb.diagnosis import explain
from errkb.mine._history import has_change, history_records
from errkb.testing import registry_from_dicts

pytest.importorskip("griffe")

RELEASES = ("1.0", "2.0", "3.0", "4.0", "5.0", "6.0")
MINED = ("1.0", "4.0", "6.0")

OLD = {
    "pinpkg/__init__.py": "from pinpkg.core import Engine, legacy_fn, run\n",
    "pinpkg/core.py": '''
        class Engine:
            def old_method(self):
                """The old way."""
                return 1

        def legacy_fn():
            return 1

        def run(x):
            return x
    ''',
}
NEW = {
    "pinpkg/__init__.py": "from pinpkg.core import Engine, NewThing, run\n",
    "pinpkg/core.py": '''
        class Engine:
            pass

        class NewThing:
            """New in 3.0."""

        def run(x, fast=False):
            return x
    ''',
}

# (code, the release it fails on, the skew name errkb must explain it with)
CASES = [
    ("from pinpkg import legacy_fn\nlegacy_fn()", "6.0", "pinpkg.legacy_fn"),
    ("from pinpkg.core import legacy_fn\nlegacy_fn()", "6.0", "pinpkg.core.legacy_fn"),
    ("from pinpkg import Engine\nEngine().old_method()", "6.0", "pinpkg.core.Engine.old_method"),
    ("from pinpkg import NewThing\nNewThing()", "1.0", "pinpkg.NewThing"),
    ("from pinpkg import run\nrun(1, fast=True)", "1.0", "pinpkg.core.run(fast)"),
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Path]]:
    """The wheels of the six releases in one folder, and each release unpacked."""
    root = tmp_path_factory.mktemp("index")
    wheels = root / "wheels"
    wheels.mkdir()
    unpacked = {}
    for version in RELEASES:
        files = OLD if version < "3.0" else NEW
        wheel = write_wheel(wheels, "pinpkg", version, files)
        unpacked[version] = root / "site" / version
        with zipfile.ZipFile(wheel) as archive:
            archive.extractall(unpacked[version])
    return wheels, unpacked


@pytest.fixture(scope="module")
def mined(index) -> tuple[list[dict[str, object]], dict[str, int]]:
    _, unpacked = index
    return history_records("pinpkg", [(v, unpacked[v]) for v in MINED], releases=RELEASES)


def _run(code: str, site: Path) -> subprocess.CompletedProcess[str]:
    """Run the user's code against one unpacked release."""
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=site,
        env={"PYTHONPATH": str(site), "PATH": ""},
        check=False,
    )


def _pip_resolves(wheels: Path, requirement: str, report: Path) -> str:
    """The release pip would install for ``requirement`` from the local index."""
    flags = ["--dry-run", "--quiet", "--ignore-installed", "--no-index"]
    command = [sys.executable, "-m", "pip", "install", *flags, "--find-links", str(wheels)]
    command += ["--report", str(report), requirement]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert 0 == done.returncode, done.stderr
    return json.loads(report.read_text(encoding="utf-8"))["install"][0]["metadata"]["version"]


@pytest.mark.parametrize(("code", "fails_on", "name"), CASES)
def test_the_suggested_pin_installs_a_release_where_the_code_works(
    index, mined, tmp_path, code, fails_on, name
) -> None:
    """Every pin of the record that explains the real error resolves, through pip, to a
    release where the same code runs."""
    wheels, unpacked = index
    failed = _run(code, unpacked[fails_on])
    assert 0 != failed.returncode
    message = failed.stderr.strip().splitlines()[-1]
    diagnosis = explain(message, registry=registry_from_dicts(mined[0]))
    assert diagnosis is not None
    assert diagnosis.top is not None
    record = diagnosis.top.record
    assert record.skew is not None
    assert name == record.skew.name, message
    pins = [p for s in record.solutions for p in re.findall(r"pip install '([^']+)'", s)]
    assert pins, record.solutions
    for pin in pins:
        chosen = _pip_resolves(wheels, pin, tmp_path / "report.json")
        works = _run(code, unpacked[chosen])
        assert 0 == works.returncode, (pin, chosen, works.stderr)


def test_the_next_mined_release_is_no_pin(index, tmp_path) -> None:
    """Why the pin names lastBefore: '<4.0', the first mined release without the name,
    resolves to 3.0, which lacks it too."""
    wheels, unpacked = index
    chosen = _pip_resolves(wheels, "pinpkg<4.0", tmp_path / "report.json")
    assert "3.0" == chosen
    assert 0 != _run("from pinpkg.core import legacy_fn", unpacked[chosen]).returncode


def test_records_say_the_releases_between_were_not_read(mined) -> None:
    """1.0 and 4.0 are mined, 2.0 and 3.0 not: the change is stated as between them."""
    records, _ = mined
    [record] = [r for r in records if r["skew"]["name"] == "pinpkg.core.legacy_fn"]
    assert {"changedIn": "4.0", "lastBefore": "1.0", "exact": False} == {
        k: record["skew"][k] for k in ("changedIn", "lastBefore", "exact")
    }
    assert "between pinpkg 1.0 and 4.0 (2.0, 3.0 not checked)" in record["documentation"]


def test_every_pin_is_checked_at_mine_time(mined) -> None:
    """check_pins resolves each pin in the release list and reads the mined release it names."""
    records, counts = mined
    pins = sum(len(re.findall(r"pip install '", s)) for r in records for s in r["solutions"])
    assert {"pins-verified": pins} == {k: v for k, v in counts.items() if k.startswith("pins")}


def test_has_change_places_each_change_exactly(index, mined) -> None:
    """Asked of every release, has_change is False up to 2.0 and True from 3.0 on."""
    _, unpacked = index
    records, _ = mined
    expected = [False, False, True, True, True, True]
    for record in records:
        assert expected == [has_change(unpacked[v], record) for v in RELEASES], record["skew"]


def test_read_places_every_change_and_its_pins_still_install(index, tmp_path) -> None:
    """Given a way to read the releases between, each change is placed in 3.0: lastBefore 2.0,
    exact, and the pins name 2.0 and 3.0, which pip installs and where the code runs."""
    wheels, unpacked = index
    records, counts = history_records(
        "pinpkg", [(v, unpacked[v]) for v in MINED], releases=RELEASES, read=unpacked.get
    )
    assert {("2.0", "3.0", True)} == {
        (r["skew"]["lastBefore"], r["skew"]["changedIn"], r["skew"]["exact"]) for r in records
    }
    assert len(records) == counts["placed"]
    pins = {
        p for r in records for s in r["solutions"] for p in re.findall(r"pip install '([^']+)'", s)
    }
    assert {"pinpkg<=2.0", "pinpkg>=3.0"} == pins
    registry = registry_from_dicts(records)
    for code, fails_on, _ in CASES:
        message = _run(code, unpacked[fails_on]).stderr.strip().splitlines()[-1]
        diagnosis = explain(message, registry=registry)
        assert diagnosis is not None
        assert diagnosis.top is not None
        for solution in diagnosis.top.record.solutions:
            for pin in re.findall(r"pip install '([^']+)'", solution):
                chosen = _pip_resolves(wheels, pin, tmp_path / "report.json")
                assert 0 == _run(code, unpacked[chosen]).returncode, (pin, chosen)
