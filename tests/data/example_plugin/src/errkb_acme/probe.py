"""The probe: how many spare widgets this machine has (from ACME_SPARE_WIDGETS)."""

from __future__ import annotations

import os


def read_widgets() -> dict[str, int]:
    """A reading: the spare widgets on this machine."""
    return {"spare_widgets": int(os.environ.get("ACME_SPARE_WIDGETS", "0"))}
