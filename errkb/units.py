"""Sizes with units, as people write them (``24GiB``, ``80 GB``, ``512M``) and as errkb shows them."""

from __future__ import annotations

from errkb._lazy_regex import lazy_compile
from errkb.exceptions import UsageError

__all__ = ["GIB", "MAX_SIZE", "MIB", "SizeTooLargeError", "format_bytes", "parse_size", "to_bytes"]

KIB, MIB, GIB, TIB = 1 << 10, 1 << 20, 1 << 30, 1 << 40
#: The largest size :func:`parse_size` reads, 1 EiB: past it a number is no memory size, and
#: ``300 nines TiB`` would overflow a float.
MAX_SIZE = 1 << 60
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


class SizeTooLargeError(UsageError):
    """A size written as one, but past :data:`MAX_SIZE`: the caller may say its own range."""


_SIZE = lazy_compile(r"^\s*(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>[a-zA-Z]*)\s*$")


def to_bytes(value: float, unit: str) -> int:
    """``value`` in ``unit`` (``GiB``, ``GB``, ``MiB`` ...) as a whole number of bytes.

    ``UsageError`` for an unknown unit, and for a size past :data:`MAX_SIZE` (infinity too).
    """
    factor = _UNITS.get(unit.strip().lower()[:10])
    if factor is None:
        shown = unit if len(unit) <= 10 else unit[:10] + "..."
        raise UsageError(
            f"unknown size unit {shown!r}: expected B, KiB, MiB, GiB, TiB, KB, MB, GB or TB"
        )
    size = value * factor
    if not size <= MAX_SIZE:  # also NaN and infinity
        raise SizeTooLargeError(f"expected a size of at most 1 EiB, got {value:.3g} {unit}")
    return round(size)


def parse_size(text: str) -> int:
    """``"24GiB"`` -> bytes. A bare single letter (``24G``) is binary, as in most ML tools.

    ``UsageError`` when ``text`` is not a size; the message says what was expected and what
    came, and the caller, who knows where the text came from, puts that place in front.
    """
    m = _SIZE.match(text[:1000])
    if m is None or len(text) > 1000:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise UsageError(f"expected a size such as 24GiB or 80GB, got {shown!r}")
    # float() of 300 nines is 1e300, and of 400 infinity: to_bytes refuses both.
    return to_bytes(float(m["num"]), m["unit"])


def format_bytes(n: float) -> str:
    """Bytes as the largest binary unit that keeps the number at or above 1 (``2.5 GiB``)."""
    for unit, factor in (("TiB", TIB), ("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if abs(n) >= factor:
            return f"{n / factor:.2f} {unit}".replace(".00 ", " ")
    return f"{int(n)} B"
