"""Plugins found by entry point: one that cannot be loaded is skipped and reported."""

from __future__ import annotations


def test_broken_probe_plugin_gives_no_reading(monkeypatch):
    """A probe plugin that cannot be loaded is skipped: no probe, and one line in the reports."""
    from errkb import _plugins, probes

    class FakeEntryPoint:
        name, value, group = "broken-probe", "no_such_module_for_errkb:probe", "errkb.probes"

        def load(self):
            raise ModuleNotFoundError("No module named 'no_such_module_for_errkb'")

    monkeypatch.setattr(_plugins, "entry_points", lambda group: [FakeEntryPoint()])
    monkeypatch.setattr(probes, "_plugins_loaded", {})
    # The report stays in this test: later ones in the process must not see a broken plugin.
    monkeypatch.setattr(_plugins, "_problems", [])
    assert None is probes.plugin_probe("broken-probe")
    assert 1 == sum("'broken-probe'" in line for line in _plugins.problems())
