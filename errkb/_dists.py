"""Installed distributions, read the cheap way: from the metadata folders on ``sys.path``.

``importlib.metadata`` answers the same questions, but importing it (and ``email``, ``zipfile``
and ``csv`` with it) costs tens of milliseconds on the diagnosis path, and it builds a
``Distribution`` for every folder to answer one question. Here a folder listing of each
``sys.path`` entry finds the ``*.dist-info`` and ``*.egg-info`` folders; a version is read from
the ``Version:`` line of its metadata file, entry points from its ``entry_points.txt``. The
first distribution of a name on ``sys.path`` wins, as the import system would find it.
Distributions inside zip files, or found by a custom finder, are not seen: a version is then
unknown, which every caller already allows.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = [
    "EntryPoint",
    "entry_points",
    "forget",
    "metadata_folder",
    "metadata_folders",
    "normalize",
    "version",
]

_lock = threading.Lock()
# sys.path as it was when the folders were listed, and normalized name -> metadata folder.
_seen_path: list[str] | None = None
_folders: dict[str, str] = {}
_groups: dict[str, list[EntryPoint]] = {}  # group -> its entry points, while the listing holds


class EntryPoint:
    """One entry point of an installed distribution: ``name = value`` in a ``[group]``."""

    __slots__ = ("group", "name", "value")

    def __init__(self, name: str, value: str, group: str) -> None:
        self.name, self.value, self.group = name, value, group

    def __repr__(self) -> str:
        return f"EntryPoint(name={self.name!r}, value={self.value!r}, group={self.group!r})"

    def load(self) -> Any:
        """Import the module the value names and return the object after its colon, if any."""
        import importlib

        target = self.value.split("[", 1)[0].strip()  # extras are not errkb's business
        module, _, attribute = target.partition(":")
        obj: Any = importlib.import_module(module.strip())
        for part in filter(None, attribute.strip().split(".")):
            obj = getattr(obj, part)
        return obj


def normalize(name: str) -> str:
    """A distribution name as its folders spell it, lowercase (PEP 503 and wheel escaping)."""
    return "".join("_" if char in "-_." else char for char in name.lower())


def _listed() -> dict[str, str]:
    """Normalized name -> its metadata folder, for the distributions on ``sys.path`` now."""
    global _seen_path  # noqa: PLW0603 - one listing per sys.path, kept for the process
    with _lock:
        if _seen_path != sys.path:
            found: dict[str, str] = {}
            for entry in sys.path:
                for name, folder in metadata_folders(entry or "."):
                    found.setdefault(name, folder)
            _folders.clear()
            _folders.update(found)
            _groups.clear()
            _seen_path = list(sys.path)
        return _folders


def metadata_folders(entry: str) -> Iterator[tuple[str, str]]:
    """(normalized name, metadata folder) for each distribution in the folder ``entry``."""
    try:
        with os.scandir(entry) as items:
            names = sorted(item.name for item in items if item.name.endswith(_SUFFIXES))
    except OSError:  # not a folder (a zip), or gone
        return
    for name in names:
        stem = name.rsplit(".", 1)[0]
        # String work, not pathlib: this runs for each distribution installed.
        yield normalize(stem.split("-", 1)[0]), os.path.join(entry, name)  # noqa: PTH118


_SUFFIXES = (".dist-info", ".egg-info")


def forget() -> None:
    """Drop what was read, so that the next question lists ``sys.path`` again (tests)."""
    global _seen_path  # noqa: PLW0603
    with _lock:
        _seen_path = None


def metadata_folder(name: str) -> str | None:
    """The metadata folder of the distribution ``name`` on ``sys.path``, or ``None``."""
    return _listed().get(normalize(name))


def version(name: str) -> str | None:
    """The installed version of the distribution ``name``, or ``None`` when none is found."""
    folder = _listed().get(normalize(name))
    if folder is None:
        return None
    for file in ("METADATA", "PKG-INFO"):
        try:
            with Path(folder, file).open(encoding="utf-8", errors="replace") as meta:
                for line in meta:
                    if line.startswith("Version:"):
                        return line.partition(":")[2].strip() or None
                    if not line.strip():  # the headers end at the first empty line
                        break
        except OSError:
            continue
    return None


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group`` that the installed distributions declare, in path order."""
    folders = _listed()
    known = _groups.get(group)
    if known is not None:
        return list(known)
    found: list[EntryPoint] = []
    wanted = group.encode()
    for folder in list(folders.values()):
        # os.open and os.read, not open() or pathlib: this runs for each distribution
        # installed, and a file object costs four more system calls than the three needed.
        try:
            fd = os.open(os.path.join(folder, "entry_points.txt"), os.O_RDONLY)  # noqa: PTH118
        except OSError:
            continue
        try:
            data = _read_all(fd)
        except OSError:
            continue
        finally:
            os.close(fd)
        if wanted in data:  # most never name errkb's groups: not decoded or parsed
            found.extend(_parse(data.decode("utf-8", errors="replace"), group))
    with _lock:
        _groups[group] = found
    return list(found)


def _read_all(fd: int) -> bytes:
    """The rest of an open file's bytes."""
    parts = []
    while chunk := os.read(fd, 1 << 16):
        parts.append(chunk)
    return b"".join(parts)


def _parse(text: str, group: str) -> Iterator[EntryPoint]:
    """The entries of one ``[group]`` section of an ``entry_points.txt``."""
    current = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1].strip()
        elif current == group and "=" in line:
            name, _, value = line.partition("=")
            yield EntryPoint(name.strip(), value.strip(), group)
