"""API history: records for version skew, checked against the messages a real Python prints.

Two releases of a small package are written to disk, mined, then code written for one release
runs against the other in a child process; the exception text it really prints is explained
with the mined records.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from errkb.diagnosis import explain
from errkb.mine._history import history_records
from errkb.testing import registry_from_dicts

pytest.importorskip("griffe")

V1 = {
    "skewpkg/__init__.py": '''
        """A package whose API changes between 1.0 and 2.0."""
        from skewpkg.core import Engine, build, send
        from skewpkg.mix import Child, Runner
    ''',
    "skewpkg/core.py": '''
        class Engine:
            """Runs things."""

            def __init__(self, size=1, legacy_mode=False):
                self.size = size

            def get_max_length(self):
                """The longest input the engine takes."""
                return self.max_shape()

            def max_shape(self):
                """The engine's maximum shape."""
                return self.size

            def load_models(self, path):
                """Load the models from a folder."""
                return path

            def start(self, block=True):
                return block

        def build(name, verbose=False):
            return Engine()

        def helper(x):
            return x

        def send(data, timeout=None):
            return data
    ''',
    "skewpkg/block.py": '''
        class LogicalTokenBlock:
            """A block of tokens."""
    ''',
    "skewpkg/mix.py": '''
        class Runner:
            def run(self):
                """Run once."""

        class Child(Runner):
            pass
    ''',
    "skewpkg/_private.py": """
        def hidden(x):
            return x
    """,
    "skewpkg/internal.py": """
        class Scheduler:
            def schedule_legacy(self):
                return None
    """,
}

V2 = {
    "skewpkg/__init__.py": '''
        """A package whose API changes between 1.0 and 2.0."""
        from skewpkg.core import Engine, build, send
        from skewpkg.mix import Child, Runner
    ''',
    "skewpkg/core.py": '''
        class Engine:
            """Runs things."""

            def __init__(self, size=1, cache_position=None):
                self.size = size

            def max_shape(self):
                """The engine's maximum shape."""
                return self.size

            def load(self, path):
                """Load the models from a folder."""
                return path

            def start(self, block=True, *, device="cpu"):
                return block

        def build(name, verbose=False):
            return Engine()

        def send(data, timeout):
            return data
    ''',
    "skewpkg/mix.py": '''
        class Runner:
            def run(self):
                """Run once."""

        class Child:
            pass
    ''',
    "skewpkg/utils.py": """
        def helper(x):
            return x
    """,
    "skewpkg/internal.py": """
        class Scheduler:
            pass
    """,
}


def _release(root: Path, version: str, files: dict[str, str]) -> Path:
    folder = root / version
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    (folder / "pyproject.toml").write_text(
        f'[project]\nname = "skewpkg"\nversion = "{version}"\n', encoding="utf-8"
    )
    return folder


@pytest.fixture(scope="module")
def releases(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("releases")
    return {"1.0": _release(root, "1.0", V1), "2.0": _release(root, "2.0", V2)}


@pytest.fixture(scope="module")
def mined(releases: dict[str, Path]) -> tuple[list[dict[str, object]], dict[str, int]]:
    return history_records("skewpkg", [("1.0", releases["1.0"]), ("2.0", releases["2.0"])])


def _real_error(release: Path, code: str) -> str:
    """Run ``code`` against one release in a child process and return its last traceback line."""
    result = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=release,
        env={"PYTHONPATH": str(release), "PATH": ""},
        check=False,
    )
    assert 0 != result.returncode, result.stdout
    return result.stderr.strip().splitlines()[-1]


def _top_skew(records: list[dict[str, object]], message: str) -> dict[str, object]:
    diagnosis = explain(message, registry=registry_from_dicts(records))
    assert diagnosis is not None, message
    top = diagnosis.top
    assert top is not None, message
    skew = top.record.skew
    assert skew is not None
    return skew.to_json()


# Code written for 1.0 meets 2.0: (code, expected skew fields).
OLD_CODE_ON_NEW = [
    (
        "from skewpkg.core import Engine\nEngine().get_max_length()",
        {
            "name": "skewpkg.core.Engine.get_max_length",
            "change": "renamed",
            "replacement": "skewpkg.core.Engine.max_shape",
        },
    ),
    (
        "from skewpkg.core import Engine\nEngine.load_models",
        {
            "name": "skewpkg.core.Engine.load_models",
            "change": "renamed",
            "replacement": "skewpkg.core.Engine.load",
        },
    ),
    (
        "from skewpkg.core import helper",
        {"name": "skewpkg.core.helper", "change": "moved", "replacement": "skewpkg.utils.helper"},
    ),
    (
        "import skewpkg.core\nskewpkg.core.helper(1)",
        {"name": "skewpkg.core.helper", "change": "moved", "replacement": "skewpkg.utils.helper"},
    ),
    ("import skewpkg.block", {"name": "skewpkg.block", "change": "removed"}),
    (
        "from skewpkg.mix import Child\nChild().run()",
        {"name": "skewpkg.mix.Child.run", "change": "removed"},
    ),
    (
        "from skewpkg.core import Engine\nEngine(legacy_mode=True)",
        {"name": "skewpkg.core.Engine.__init__(legacy_mode)", "change": "removed"},
    ),
    (
        "from skewpkg.core import send\nsend(b'x')",
        {"name": "skewpkg.core.send(timeout)", "change": "required"},
    ),
]

# Code written for 2.0 meets 1.0.
NEW_CODE_ON_OLD = [
    (
        "from skewpkg.core import Engine\nEngine(cache_position=3)",
        {"name": "skewpkg.core.Engine.__init__(cache_position)", "change": "added"},
    ),
    (
        "from skewpkg.core import Engine\nEngine().start(device='cuda')",
        {"name": "skewpkg.core.Engine.start(device)", "change": "added"},
    ),
]


@pytest.mark.parametrize(("code", "expected"), OLD_CODE_ON_NEW)
def test_old_code_on_new_release(mined, releases, code, expected) -> None:
    """The real error of 1.0 code on 2.0 is explained by the record of the change, at 2.0."""
    message = _real_error(releases["2.0"], code)
    skew = _top_skew(mined[0], message)
    assert expected == {k: skew.get(k) for k in expected}, message
    assert ("2.0", "1.0") == (skew["changedIn"], skew["lastBefore"])


@pytest.mark.parametrize(("code", "expected"), NEW_CODE_ON_OLD)
def test_new_code_on_old_release(mined, releases, code, expected) -> None:
    """The real error of 2.0 code on 1.0 is explained by the record naming the release that added it."""
    message = _real_error(releases["1.0"], code)
    skew = _top_skew(mined[0], message)
    assert expected == {k: skew.get(k) for k in expected}, message
    assert "2.0" == skew["changedIn"]


def test_documentation_names_the_versions(mined) -> None:
    """The generated text states the release that changed it and the last one before."""
    by_name = {r["skew"]["name"]: r for r in mined[0]}
    record = by_name["skewpkg.core.Engine.get_max_length"]
    assert (
        "`get_max_length` was removed from `Engine` in skewpkg 2.0; the last release that has "
        "it is 1.0. It was renamed to `skewpkg.core.Engine.max_shape`."
    ) == record["documentation"]
    assert (
        "Or install the last release that has it: pip install 'skewpkg<=1.0'."
        in record["solutions"]
    )
    assert record["skew"]["exact"]
    assert ["mined", "skew"] == record["tags"]
    assert record["id"].startswith("skew-skewpkg-")


def test_lost_inheritance_names_the_base_that_keeps_it(mined) -> None:
    """A class that stopped inheriting a member is told apart from the member's removal."""
    [record] = [r for r in mined[0] if r["skew"]["name"] == "skewpkg.mix.Child.run"]
    assert (
        "`Child` stopped inheriting `run` from `Runner` (which still defines it) in skewpkg "
        "2.0; the last release that has it is 1.0."
    ) == record["documentation"]


def test_private_names_and_unchanged_names_give_no_record(mined) -> None:
    """Private modules and names that did not change are not records; what was left out is counted."""
    names = {r["skew"]["name"] for r in mined[0]}
    assert not any("_private" in n or "hidden" in n for n in names)
    assert not any(n.startswith("skewpkg.core.build") for n in names)
    kinds = {k: v for k, v in mined[1].items() if not k.startswith(("skipped", "pins"))}
    assert len(mined[0]) == sum(kinds.values())


def test_records_load_cleanly(mined) -> None:
    """Every mined record passes the loader's checks."""
    registry = registry_from_dicts(mined[0])
    assert len(mined[0]) == len(registry)


def test_errkb_mine_history_and_index_end_to_end(releases, tmp_path) -> None:
    """`errkb mine v1 v2 --history --index`: one pack of raise sites and skew records, with
    its index; it explains the real error of 1.0 code on 2.0, naming the release that changed
    it."""
    pack = tmp_path / "records" / "mined" / "skewpkg.jsonl"
    pack.parent.mkdir(parents=True)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "errkb",
            "mine",
            str(releases["1.0"]),
            str(releases["2.0"]),
            "--history",
            "--index",
            "--excerpt-lines",
            "0",
            "--output",
            str(pack),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    assert "version skew: " in done.stdout
    assert pack.with_name("skewpkg.jsonl.index").is_file()
    message = _real_error(
        releases["2.0"], "from skewpkg.core import Engine\nEngine().get_max_length()"
    )
    explained = subprocess.run(
        [
            sys.executable,
            "-m",
            "errkb",
            "explain",
            "--no-probes",
            "--json",
            "--records",
            str(pack),
            message,
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert 0 == explained.returncode, explained.stderr
    top = json.loads(explained.stdout)["matches"][0]
    assert top["mined"]
    assert "2.0" in top["documentation"]


def test_members_of_internal_classes_are_left_out_and_counted(mined) -> None:
    """Scheduler is not offered by the package's __init__: its removed member is no record."""
    records, counts = mined
    assert not [r for r in records if "schedule_legacy" in str(r["messagePattern"])]
    assert counts["skipped-internal"] >= 1
