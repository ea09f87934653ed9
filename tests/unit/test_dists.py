"""Installed distributions read the cheap way give what importlib.metadata gives."""

from __future__ import annotations

import sys
from importlib import metadata

import pytest

from errkb import _dists


@pytest.fixture(autouse=True)
def _fresh():
    _dists.forget()
    yield
    _dists.forget()


def test_every_installed_version_equals_importlib_metadatas():
    names = {d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"]}
    assert len(names) > 20  # the test environment: torch, transformers, rich, pytest...
    for name in sorted(names):
        assert _dists.version(name) == metadata.version(name), name
    assert _dists.version("no-such-distribution-for-errkb") is None


@pytest.mark.parametrize("group", ["console_scripts", "pytest11", "errkb.records"])
def test_entry_points_equal_importlib_metadatas(group):
    expected = sorted((e.name, e.value) for e in metadata.entry_points(group=group))
    assert sorted((e.name, e.value) for e in _dists.entry_points(group)) == expected


def test_a_distribution_on_a_new_path_is_seen_and_its_entry_point_loads(tmp_path, monkeypatch):
    info = tmp_path / "Acme_Gears-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: Acme.Gears\nVersion: 1.2.3\n\nBody"
    )
    (info / "entry_points.txt").write_text(
        "# comment\n[errkb.records]\ngears = acme_gears_mod:where [extra]\n[other]\nx = y\n"
    )
    (tmp_path / "acme_gears_mod.py").write_text("where = {'pack': 'here'}\n")
    assert _dists.version("acme-gears") is None
    monkeypatch.setattr(sys, "path", [str(tmp_path), *sys.path])
    assert _dists.version("acme-gears") == "1.2.3" == _dists.version("ACME_gears")
    [ep] = _dists.entry_points("errkb.records")
    assert (ep.name, ep.value, ep.group) == (
        "gears",
        "acme_gears_mod:where [extra]",
        "errkb.records",
    )
    assert ep.load() == {"pack": "here"}
