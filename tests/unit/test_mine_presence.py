"""has_name / has_change: one release's files read with ast answer what a skew record is about."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import write_tree

from errkb.mine._presence import exports, has_change, has_name, record_kind

FILES = {
    "pkg/__init__.py": """
        import sys
        from typing import TYPE_CHECKING

        _import_structure = {"models": ["Model"]}
        if TYPE_CHECKING:
            from .models import Model
        else:
            sys.modules[__name__] = object()
    """,
    "pkg/base.py": """
        class Base:
            def inherited(self):
                return 1
    """,
    "pkg/models.py": """
        from dataclasses import dataclass

        from pkg.base import Base
        from torch import nn


        class Model(Base, nn.Module):
            def __init__(self, size, *, dtype=None):
                self.weights = size

            def forward(self, x, **kwargs):
                return x


        @dataclass
        class Collator:
            tokenizer: object
            mlm_probability: float = 0.15


        def __getattr__(name):
            raise AttributeError(name)
    """,
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tree(tmp_path_factory.mktemp("presence"), FILES)


def _record(message: str, name: str, change: str = "removed") -> dict[str, object]:
    return {"errorMessage": message, "skew": {"name": name, "change": change}}


@pytest.mark.parametrize(
    ("message", "name", "expected"),
    [
        ("No module named 'pkg.models'", "pkg.models", True),
        ("No module named 'pkg.gone'", "pkg.gone", False),
        ("cannot import name 'Model' from 'pkg'", "pkg.Model", True),
        ("cannot import name 'Other' from 'pkg'", "pkg.Other", False),
        ("'Model' object has no attribute 'inherited'", "pkg.models.Model.inherited", True),
        ("'Model' object has no attribute 'weights'", "pkg.models.Model.weights", True),
        ("'Model' object has no attribute 'absent'", "pkg.models.Model.absent", False),
        (
            "Model.__init__() got an unexpected keyword argument 'dtype'",
            "pkg.models.Model.__init__(dtype)",
            True,
        ),
        (
            "Model.__init__() got an unexpected keyword argument 'device'",
            "pkg.models.Model.__init__(device)",
            False,
        ),
        (
            "Model.forward() got an unexpected keyword argument 'mask'",
            "pkg.models.Model.forward(mask)",
            None,
        ),
        (
            "Collator.__init__() got an unexpected keyword argument 'mlm_probability'",
            "pkg.models.Collator.__init__(mlm_probability)",
            True,
        ),
        (
            "Collator.__init__() missing 1 required positional argument: 'tokenizer'",
            "pkg.models.Collator.__init__(tokenizer)",
            True,
        ),
        (
            "Model.__init__() missing 1 required keyword-only argument: 'dtype'",
            "pkg.models.Model.__init__(dtype)",
            False,
        ),
        ("cannot import name 'anything' from 'pkg.models'", "pkg.models.anything", None),
    ],
)
def test_has_name(root, message, name, expected) -> None:
    """Modules, lazy top-level names, own, inherited and instance members, keywords of plain
    functions and dataclasses; None where **kwargs or a module __getattr__ could answer."""
    assert expected == has_name(root, _record(message, name))


def test_has_change_reads_the_side(root) -> None:
    """has_change is True where the release is like changedIn."""
    removed = _record("cannot import name 'Model' from 'pkg'", "pkg.Model", "removed")
    added = _record("cannot import name 'Model' from 'pkg'", "pkg.Model", "added")
    assert (False, True) == (has_change(root, removed), has_change(root, added))


def test_record_kind_follows_the_message() -> None:
    """The kind of a skew record is read from the message errkb wrote for it."""
    assert "keyword" == record_kind({"errorMessage": "f() got an unexpected keyword argument 'k'"})
    assert record_kind({"errorMessage": "something else"}) is None


def test_exports_leave_out_what_the_package_imports_from_elsewhere(root) -> None:
    """A lazy top-level module offers its TYPE_CHECKING imports and table, not sys or typing."""
    assert {"Model"} == exports(root, "pkg")
