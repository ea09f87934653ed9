"""A name a release added: "upgrade" on the old release, "another copy" on one that has it.

Two releases of a package written by the test are mined together with ``--history``; release
2.0 adds ``NewThing``. Each release is then installed (its wheel unpacked onto the path) and a
program imports ``NewThing`` under the hook: on 1.0 the diagnosis says to upgrade to 2.0, with a
pin that resolves to a release that has the name; on 2.0, with a folder of the same name beside
the script shadowing the install (a common way to meet this error), it says the installed
release has the name and shows how to find the copy that Python imports, and that command,
run in the same place, names the shadowing folder.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.helpers import run_cli

pytest.importorskip("griffe")

INIT = {
    "1.0": '"""skewpkg."""\n\n\ndef helper():\n    return 1\n',
    "2.0": ('"""skewpkg."""\n\n\ndef helper():\n    return 1\n\n\nclass NewThing:\n    pass\n'),
}
PROGRAM = "import errkb\nerrkb.install()\nfrom skewpkg import NewThing\n"


def _wheel(folder: Path, version: str) -> Path:
    """A minimal wheel of ``skewpkg`` at ``version``."""
    path = folder / f"skewpkg-{version}-py3-none-any.whl"
    info = f"skewpkg-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr("skewpkg/__init__.py", INIT[version])
        whl.writestr(
            f"{info}/METADATA", f"Metadata-Version: 2.1\nName: skewpkg\nVersion: {version}\n"
        )
        whl.writestr(
            f"{info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        )
        whl.writestr(f"{info}/RECORD", "")
    return path


@pytest.fixture(scope="module")
def mined(tmp_path_factory) -> dict[str, Path]:
    """The two wheels, each unpacked as an install, and the pack mined from both."""
    root = tmp_path_factory.mktemp("skew")
    wheels = {v: _wheel(root, v) for v in INIT}
    installs = {}
    for version, wheel in wheels.items():
        target = root / f"site-{version}"
        zipfile.ZipFile(wheel).extractall(target)
        installs[version] = target
    pack = root / "skewpkg.jsonl"
    done = run_cli("mine", *(str(w) for w in wheels.values()), "--history", "--output", str(pack))
    assert 0 == done.returncode, done.stderr
    return {"pack": pack, **installs}


def _run(program_dir: Path, site: Path, pack: Path) -> str:
    # A loaded two-core CI machine may take more than the default 5 s for a cold diagnosis.
    env = {
        "PYTHONPATH": str(site),
        "ERRKB_RECORDS": str(pack),
        "COLUMNS": "200",
        "ERRKB_TIMEOUT": "60",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        cwd=program_dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert 1 == done.returncode
    return re.sub(r"\s+", " ", done.stderr)


def test_old_release_is_told_to_upgrade(mined, tmp_path) -> None:
    """On 1.0 the added name's record says which release added it and pins an upgrade."""
    text = _run(tmp_path, mined["1.0"], mined["pack"])
    assert "cannot import name 'NewThing' from 'skewpkg'" in text
    assert "added in 2.0" in text, text
    assert "pip install 'skewpkg>=2.0'" in text, text
    assert "another copy" not in text


def test_release_that_has_it_points_at_the_other_copy(mined, tmp_path) -> None:
    """On 2.0 a folder named skewpkg beside the script shadows it: errkb says so, no upgrade."""
    shadow = tmp_path / "skewpkg"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("__version__ = 'local'\n", encoding="utf-8")
    text = _run(tmp_path, mined["2.0"], mined["pack"])
    assert "The installed skewpkg 2.0 has `NewThing`, so this import reached another copy" in text
    command = re.search(r'python -c "(import skewpkg, sys; [^"]+)"', text)
    assert command is not None, text
    # The command the solution gives, run where the program ran, names the shadowing folder.
    shown = subprocess.run(
        [sys.executable, "-c", command.group(1)],
        cwd=tmp_path,
        env={"PYTHONPATH": str(mined["2.0"])},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(shadow / "__init__.py") in shown
