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
from helpers import write_tree

from errkb.diagnosis import explain
from errkb.mine._history import history_records
from errkb.testing import registry_from_dicts

pytest.importorskip("griffe")

V1 = {
    "skewpkg/__init__.py": '''
        """A package whose API changes between 1.0 and 2.0."""
        from skewpkg.core import Engine, build, helper, send
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
        from skewpkg.core import Engine, Turbo, build, send
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

        class Turbo:
            """New in 2.0."""
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


def _release(root: Path, version: str, files: dict[str, str], dist: str = "skewpkg") -> Path:
    project = {"pyproject.toml": f'[project]\nname = "{dist}"\nversion = "{version}"\n'}
    return write_tree(root / version, files | project)


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
    (
        "from skewpkg import helper",
        {"name": "skewpkg.helper", "change": "moved", "replacement": "skewpkg.utils.helper"},
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
    ("from skewpkg import Turbo", {"name": "skewpkg.Turbo", "change": "added"}),
    ("import skewpkg\nskewpkg.Turbo()", {"name": "skewpkg.Turbo", "change": "added"}),
    (
        "from skewpkg.core import Engine\nEngine().load('models')",
        {"name": "skewpkg.core.Engine.load", "change": "added"},
    ),
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


def test_added_name_says_which_release_to_upgrade_to(mined) -> None:
    """A name the top-level package gained is one record, with the upgrade that brings it."""
    [record] = [r for r in mined[0] if r["skew"]["name"] == "skewpkg.Turbo"]
    assert (
        "`Turbo` was added in skewpkg 2.0; older releases lack it: upgrade to >= 2.0."
    ) == record["documentation"]
    assert ["Upgrade skewpkg: pip install 'skewpkg>=2.0'."] == record["solutions"]
    assert {"changedIn": "2.0", "lastBefore": "1.0", "exact": True} == {
        k: record["skew"][k] for k in ("changedIn", "lastBefore", "exact")
    }


def test_releases_between_make_the_change_inexact(releases) -> None:
    """With releases between the mined ones, the record says which were not read, and its pin
    names the last mined release with the name, never the release before changedIn."""
    records, _ = history_records(
        "skewpkg",
        [("1.0", releases["1.0"]), ("2.0", releases["2.0"])],
        releases=["0.9", "1.0", "1.1.0", "1.1.1", "1.2", "2.0", "2.1"],
    )
    [record] = [r for r in records if r["skew"]["name"] == "skewpkg.core.helper"]
    assert (
        "`helper` was moved from `skewpkg.core` between skewpkg 1.0 and 2.0 (1.1.x, 1.2 not "
        "checked); the last release known to have it is 1.0. skewpkg 2.0 defines it as "
        "`skewpkg.utils.helper`."
    ) == record["documentation"]
    assert (
        "Or install the last release known to have it: pip install 'skewpkg<=1.0'."
        == (record["solutions"][-1])
    )
    assert False is record["skew"]["exact"]


# ---- lazy top-level modules ----------------------------------------------------------------

#: A package laid out as transformers 4 is: a lazy __init__ with an _import_structure table
#: and the same names imported under TYPE_CHECKING.
LAZY_4 = {
    "lazypkg/__init__.py": """
        import sys
        from typing import TYPE_CHECKING

        from .utils import _LazyModule

        _import_structure = {{"models.alpha": ["AlphaModel"], "utils": ["helper"]}}
        {extra}
        if TYPE_CHECKING:
            from .models.alpha import AlphaModel
            from .utils import helper
            {typed}
        else:
            sys.modules[__name__] = _LazyModule(__name__, _import_structure)
    """,
    "lazypkg/utils.py": """
        class _LazyModule:
            pass

        def helper():
            return 1
    """,
    "lazypkg/models/__init__.py": "",
    "lazypkg/models/alpha/__init__.py": "from .modeling_alpha import AlphaModel\n",
    "lazypkg/models/alpha/modeling_alpha.py": "class AlphaModel:\n    pass\n",
    "lazypkg/models/beta/__init__.py": "from .modeling_beta import BetaForCausalLM\n",
    "lazypkg/models/beta/modeling_beta.py": "class BetaForCausalLM:\n    pass\n",
}


def _lazy_5(models: tuple[str, ...]) -> dict[str, str]:
    """The same package laid out as transformers 5 is: star imports down to each __all__."""
    files = {
        "lazypkg/__init__.py": """
            import sys
            from typing import TYPE_CHECKING

            from .utils import _LazyModule, define_import_structure

            _import_structure = {"utils": ["helper"]}
            if TYPE_CHECKING:
                from .models import *
                from .utils import helper
            else:
                sys.modules[__name__] = _LazyModule(__name__, define_import_structure("models"))
        """,
        "lazypkg/utils.py": """
            class _LazyModule:
                pass

            def define_import_structure(path):
                return {}

            def helper():
                return 1
        """,
        "lazypkg/models/__init__.py": "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        + "".join(f"    from .{m} import *\n" for m in models)
        + "else:\n    import sys\n\n    sys.modules[__name__] = object()\n",
    }
    for m in models:
        cls = {"alpha": "AlphaModel", "beta": "BetaForCausalLM", "gamma": "GammaModel"}[m]
        files[f"lazypkg/models/{m}/__init__.py"] = (
            "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
            f"    from .modeling_{m} import *\n"
            "else:\n    import sys\n\n    sys.modules[__name__] = object()\n"
        )
        files[f"lazypkg/models/{m}/modeling_{m}.py"] = (
            f"class {cls}:\n    pass\n\n\ndef build():\n    return {cls}()\n\n\n"
            f'__all__ = ["{cls}"]\n'
        )
    return files


@pytest.fixture(scope="module")
def lazy_mined(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("lazy")
    old = {k: v.format(extra="", typed="") for k, v in LAZY_4.items()}
    new = {
        k: v.format(
            extra='_import_structure["models.beta"] = ["BetaForCausalLM"]',
            typed="from .models.beta import BetaForCausalLM",
        )
        for k, v in LAZY_4.items()
    }
    folders = [
        ("1.0", _release(root, "1.0", old, "lazypkg")),
        ("2.0", _release(root, "2.0", new, "lazypkg")),
        ("3.0", _release(root, "3.0", _lazy_5(("alpha", "beta", "gamma")), "lazypkg")),
    ]
    return history_records("lazypkg", folders)[0]


def test_a_lazy_top_level_module_offers_its_tables_and_star_imports(lazy_mined) -> None:
    """transformers 4's _import_structure and 5's TYPE_CHECKING star imports both count as
    what the package offers: only the model classes each release added are added names."""
    added = {
        r["skew"]["name"]: r["skew"]["changedIn"]
        for r in lazy_mined
        if r["skew"]["change"] == "added" and r["errorClass"] == "ImportError"
    }
    assert {"lazypkg.BetaForCausalLM": "2.0", "lazypkg.GammaModel": "3.0"} == added


@pytest.mark.parametrize(
    "message",
    [
        "cannot import name 'GammaModel' from 'lazypkg' (unknown location)",
        "cannot import name 'GammaModel' from 'lazypkg' (/site-packages/lazypkg/__init__.py)",
        "module lazypkg has no attribute GammaModel",
        "module 'lazypkg' has no attribute 'GammaModel'",
    ],
)
def test_an_added_name_matches_every_wording(lazy_mined, message) -> None:
    """The messages of Python's import and of a lazy module's __getattr__ find the record."""
    skew = _top_skew(lazy_mined, message)
    assert ("lazypkg.GammaModel", "added", "3.0") == (
        skew["name"],
        skew["change"],
        skew["changedIn"],
    )


# ---- a member of a base class ----------------------------------------------------------------


def _family(count: int, *, with_member: bool, override: bool = False) -> dict[str, str]:
    """A base class and ``count`` subclasses, all offered by the package; ``override``: the
    last subclass defines the member too."""
    member = "    def contrastive(self):\n        return 1\n" if with_member else "    pass\n"
    names = [f"Model{i}" for i in range(count)]
    own = {n: member if (override and n == names[-1]) else "    pass\n" for n in names}
    return {
        "basepkg/__init__.py": "from basepkg.mixin import Mixin\nfrom basepkg.models import "
        + ", ".join(names)
        + "\n",
        "basepkg/mixin.py": f"class Mixin:\n{member}",
        "basepkg/models.py": "from basepkg.mixin import Mixin\n\n\n"
        + "".join(f"class {n}(Mixin):\n{own[n]}\n\n" for n in names),
    }


@pytest.mark.parametrize("count", [3, 15])
def test_a_member_removed_from_a_base_is_one_record(tmp_path, count) -> None:
    """One record names the base class and covers every subclass, whatever their number."""
    folders = [
        ("1.0", _release(tmp_path, "1.0", _family(count, with_member=True), "basepkg")),
        ("2.0", _release(tmp_path, "2.0", _family(count, with_member=False), "basepkg")),
    ]
    records, _ = history_records("basepkg", folders)
    [record] = [r for r in records if "contrastive" in r["skew"]["name"]]
    classes = sorted(["basepkg.mixin.Mixin", *(f"basepkg.models.Model{i}" for i in range(count))])
    assert classes == record["skew"]["classes"]
    assert (
        f"`contrastive` was removed from `Mixin` (and the {count} classes that inherit it) in "
        "basepkg 2.0; the last release that has it is 1.0."
    ) == record["documentation"]
    assert ("(?P<cls>" in record["messagePattern"]) is (count > 12)
    message = f"'Model{count - 1}' object has no attribute 'contrastive'"
    assert "basepkg.mixin.Mixin.contrastive" == _top_skew(records, message)["name"]


def test_a_member_added_to_a_base_is_one_record(tmp_path) -> None:
    """A method a base class gained is one added record covering its subclasses, the one
    that overrides it too."""
    new = _family(15, with_member=True, override=True)
    folders = [
        ("1.0", _release(tmp_path, "1.0", _family(15, with_member=False), "basepkg")),
        ("2.0", _release(tmp_path, "2.0", new, "basepkg")),
    ]
    records, _ = history_records("basepkg", folders)
    [record] = [r for r in records if r["skew"]["change"] == "added"]
    assert 16 == len(record["skew"]["classes"])
    assert "basepkg.mixin.Mixin.contrastive" == record["skew"]["name"]
    assert record["documentation"].startswith(
        "`contrastive` was added to `Mixin` (and the 15 classes that inherit it) in basepkg 2.0"
    )


def test_mine_passes_the_release_list_and_counts_the_pins(releases) -> None:
    """mine(releases=...) states changes as inexact and its summary counts the pins checked."""
    from errkb.mine import mine

    result = mine(
        [str(releases["1.0"]), str(releases["2.0"])],
        native=False,
        history=True,
        releases=["1.0", "1.5", "2.0"],
    )
    skew = [r["skew"] for r in result.records if "skew" in r]
    assert skew
    assert {False} == {s["exact"] for s in skew}
    assert 0 < result.summary["history"]["pins-verified"]
    assert "pins-wrong" not in result.summary["history"]


def test_a_class_list_over_the_limit_leaves_its_skew_record_out():
    """--max-classes: a member removed from more classes than the limit, or added to classes,
    is left out; a record without a class list, or within the limit, stays."""
    from errkb.mine import sized

    def skew(change, classes):
        return {"id": f"{change}-{len(classes)}", "skew": {"change": change, "classes": classes}}

    records = [
        {"id": "plain"},
        skew("removed", []),
        skew("removed", [f"C{i}" for i in range(3)]),
        skew("renamed", [f"C{i}" for i in range(3)]),
        skew("removed", [f"C{i}" for i in range(4)]),
        skew("added", ["C0"]),
        skew("added", []),
    ]
    kept = [r["id"] for r in sized(records, 3)]
    assert kept == ["plain", "removed-0", "removed-3", "renamed-3", "added-0"]
