"""Sizes with units, as people write them (``24GiB``, ``80 GB``, ``512M``) and as errkb shows them."""

from __future__ import annotations

import regex

from errkb.exceptions import UsageError

__all__ = ["GIB", "MIB", "format_bytes", "parse_size", "to_bytes"]

KIB, MIB, GIB, TIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
_UNITS = {
    "": 1,
    "b": 1,
    "bytes": 1,  # as torch's allocator writes sizes under 1 KiB
    "k": KIB,
    "kb": 1000,
    "kib": KIB,
    "m": MIB,
    "mb": 1000**2,
    "mib": MIB,
    "g": GIB,
    "gb": 1000**3,
    "gib": GIB,
    "t": TIB,
    "tb": 1000**4,
    "tib": TIB,
}
_SIZE = regex.compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[a-zA-Z]*)\s*$")


def to_bytes(value: float, unit: str) -> int:
    """``value`` in ``unit`` (``GiB``, ``GB``, ``MiB`` ...) as a whole number of bytes."""
    factor = _UNITS.get(unit.strip().lower())
    if factor is None:
        raise UsageError(
            f"unknown size unit {unit!r}: expected B, KiB, MiB, GiB, TiB, KB, MB, GB or TB"
        )
    return round(value * factor)


def parse_size(text: str) -> int:
    """``"24GiB"`` -> bytes. A bare single letter (``24G``) is binary, as in most ML tools.

    ``UsageError`` when ``text`` is not a size; the message says what was expected and what
    came, and the caller, who knows where the text came from, puts that place in front.
    """
    m = _SIZE.match(text)
    if m is None:
        raise UsageError(f"expected a size such as 24GiB or 80GB, got {text!r}")
    return to_bytes(float(m["num"]), m["unit"])


def format_bytes(n: float) -> str:
    """Bytes as the largest binary unit that keeps the number at or above 1 (``2.5 GiB``)."""
    for unit, factor in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= factor:
            return f"{n / factor:.2f} {unit}".replace(".00 ", " ")
    return f"{int(n)} B"
