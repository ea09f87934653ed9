"""The one reader of errkb's ``ERRKB_*`` environment variables.

Every variable errkb reads is listed in :data:`VARIABLES` (and in ``docs/environment.md``; a
test keeps the two equal), and
every switch has one meaning: unset, empty, ``0``, ``false``, ``no`` and ``off`` (any case,
spaces around ignored) are off, and any other value is on. Numbers that do not parse fall back
to the default.
This module imports only :mod:`os`: the hook reads it at ``install()`` time.
"""

from __future__ import annotations

import os

__all__ = ["VARIABLES", "flag", "number", "paths", "text"]

#: Every variable errkb reads, with its meaning (``docs/environment.md`` says the same).
VARIABLES: dict[str, str] = {
    "ERRKB_AUTOINSTALL": "switch: install the hook at start-up in every Python process of the "
    "environment (and in `errkb run`'s children)",
    "ERRKB_CACHE_DIR": "folder: where the build caches of large record packs are kept "
    "(default `$XDG_CACHE_HOME/errkb`, else `~/.cache/errkb`)",
    "ERRKB_DEBUG": "switch: print errkb's own traceback when errkb fails (hook, advisors)",
    "ERRKB_DISABLE": "switch: `errkb.install()` does nothing",
    "ERRKB_NO_CACHE": "switch: never read or write the pack build cache",
    "ERRKB_RECORDS": "paths, separated by the OS path separator: extra record files or folders",
    "ERRKB_SCAN_ENGINE": "`python`, `ahocorasick` or `auto`: how `errkb scan` finds literals",
    "ERRKB_SERVE_TOKEN": "text: the token `errkb serve` asks of every /v1 request (as `--token`)",
    "ERRKB_TIMEOUT": "seconds (default 5): the bound on one diagnosis",
}

_OFF = ("", "0", "false", "no", "off")


def _known(name: str) -> str:
    if name not in VARIABLES:
        msg = f"errkb reads no variable {name!r}; add it to errkb._env.VARIABLES"
        raise KeyError(msg)
    return name


def flag(name: str) -> bool:
    """Whether the switch ``name`` is on (see the module docstring for what counts as off)."""
    return os.environ.get(_known(name), "").strip().lower() not in _OFF


def text(name: str) -> str | None:
    """The value of ``name``, ``None`` when it is unset or blank."""
    value = os.environ.get(_known(name), "").strip()
    return value or None


def number(name: str, default: float) -> float:
    """The value of ``name`` as a number; ``default`` when unset or not a number."""
    try:
        return float(os.environ.get(_known(name), default))
    except ValueError:
        return default


def paths(name: str) -> list[str]:
    """The non-empty entries of the path list ``name``."""
    return [p for p in os.environ.get(_known(name), "").split(os.pathsep) if p]
