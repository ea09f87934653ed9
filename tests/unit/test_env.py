"""errkb._env: one reader for ERRKB_* variables, with one meaning of on and off."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from errkb import _env

ERRKB = Path(_env.__file__).parent


@pytest.mark.parametrize("value", ["", "0", "false", "FALSE", "no", "off", " Off "])
def test_off_values(monkeypatch, value):
    """Empty, 0, false, no and off (any case, spaces around) are off."""
    monkeypatch.setenv("ERRKB_DEBUG", value)
    assert _env.flag("ERRKB_DEBUG") is False


@pytest.mark.parametrize("value", ["1", "true", "yes", "on", "2"])
def test_on_values(monkeypatch, value):
    """Any other value is on."""
    monkeypatch.setenv("ERRKB_NO_CACHE", value)
    assert _env.flag("ERRKB_NO_CACHE") is True


def test_unset_is_off(monkeypatch):
    """An unset switch is off."""
    monkeypatch.delenv("ERRKB_DISABLE", raising=False)
    assert _env.flag("ERRKB_DISABLE") is False


def test_number_falls_back_on_nonsense(monkeypatch):
    """A number that does not parse gives the default."""
    monkeypatch.setenv("ERRKB_TIMEOUT", "soon")
    assert 5.0 == _env.number("ERRKB_TIMEOUT", 5.0)
    monkeypatch.setenv("ERRKB_TIMEOUT", "2.5")
    assert 2.5 == _env.number("ERRKB_TIMEOUT", 5.0)


def test_an_unknown_variable_is_a_programming_error():
    """Reading a variable that is not declared fails loudly, so the table cannot drift."""
    with pytest.raises(KeyError, match="ERRKB_TYPO"):
        _env.flag("ERRKB_TYPO")


def test_every_variable_errkb_names_is_declared():
    """Every ERRKB_* name in errkb's source is in VARIABLES (and so in the docs' table)."""
    named = set()
    for path in ERRKB.rglob("*.py"):
        named.update(re.findall(r"ERRKB_[A-Z_]+[A-Z]", path.read_text(encoding="utf-8")))
    named.discard("ERRKB_TYPO")
    assert set() == named - set(_env.VARIABLES)


def test_the_docs_table_lists_exactly_the_variables_errkb_reads():
    """docs/environment.md has one row per variable of VARIABLES, no more."""
    # The docs sit beside the tests in a checkout (errkb itself may be the installed copy).
    page = Path(__file__).resolve().parents[2] / "docs" / "environment.md"
    if not page.is_file():
        pytest.skip("needs the source tree")
    rows = set(
        re.findall(r"^\| `(ERRKB_[A-Z_]+)` \|", page.read_text(encoding="utf-8"), re.MULTILINE)
    )
    assert set(_env.VARIABLES) == rows
