"""Evidence: what an advisor reads, readings injected through Options."""

from __future__ import annotations


def test_evidence_probe_uses_injected_readings():
    """Evidence.probe returns an injected reading without loading any plugin."""
    from errkb import Options
    from errkb.evidence import Evidence
    from errkb.probes import Measurements

    options = Options(measurements=Measurements(readings={"acme-widgets": {"spare_widgets": 2}}))
    assert {"spare_widgets": 2} == Evidence(options=options, exceptions=()).probe("acme-widgets")
