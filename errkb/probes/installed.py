"""The installed probe: which release of a distribution this Python has, from its metadata.

Reads the distributions' metadata folders only (:mod:`errkb._dists`): nothing is imported from the distribution itself (asking
for transformers' version never imports transformers, let alone torch), and a distribution
that is not installed is a reading too (``None``). Versions are looked up when first asked for
and kept for the rest of the diagnosis.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb.probes._on_demand import OnDemand

if TYPE_CHECKING:
    from errkb.evidence import Evidence

__all__ = ["InstalledVersions", "compare_versions", "probe"]


class InstalledVersions(OnDemand["str | None"]):
    """Distribution name -> installed version, ``None`` when it is not installed.

    Any name can be asked for (``versions["transformers"]``); only names asked for are listed.
    Tests inject a plain mapping instead: ``readings={"installed": {"transformers": "4.53.0"}}``.
    """

    def read(self, name: str) -> str | None:
        """The installed version of the distribution ``name``, from its metadata."""
        from errkb._dists import version

        return version(name)


def probe(evidence: Evidence, timeout: float) -> InstalledVersions | None:  # noqa: ARG001 - the probe protocol
    """The reading: versions read on demand from the installed distributions' metadata.

    ``None`` with probes off: a traceback pasted from another machine (``errkb explain
    --no-probes``, ``errkb serve``) says nothing of what this Python has installed.
    """
    if not evidence.options.probes:
        return None
    return InstalledVersions()


def compare_versions(a: str, b: str) -> int | None:
    """-1, 0 or 1 as release ``a`` is older than, the same as, or newer than ``b``.

    Public version numbers (PEP 440's common forms: ``4.52.0``, ``0.5.0rc1``, ``2.1.0.post1``,
    a local ``+cu121`` part ignored); ``None`` when either is not a version number.
    """
    from errkb.records import release_key

    ka, kb = release_key(a), release_key(b)
    if ka is None or kb is None:
        return None
    return (ka > kb) - (ka < kb)
