"""Installed distributions, read the cheap way: from the metadata folders on ``sys.path``.

``importlib.metadata`` answers the same questions, but importing it (and ``email``, ``zipfile``
and ``csv`` with it) costs tens of milliseconds on the diagnosis path, and it builds a
``Distribution`` for every folder to answer one question. Here a folder listing of each
``sys.path`` entry finds the ``*.dist-info`` and ``*.egg-info`` folders; a version is read from
the ``Version:`` line of its metadata file, entry points from its ``entry_points.txt``. The
first distribution of a name on ``sys.path`` wins, as the import system would find it.
Distributions inside zip files, or found by a custom finder, are not seen: a version is then
unknown, which every caller already allows.

What an installer's folder (``site-packages``, ``dist-packages``) holds is kept between
processes (:class:`_Kept`): a first diagnosis otherwise lists a hundred and fifty metadata
folders and tries to open an ``entry_points.txt`` in each, three hundred system calls, to find
that none names errkb's groups.
"""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

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
# Metadata folder -> the groups its entry_points.txt names, where a kept listing told (_Kept).
_declared: dict[str, tuple[str, ...] | None] = {}


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
            declared: dict[str, tuple[str, ...] | None] = {}
            kept = _Kept()
            for entry in sys.path:
                for name, folder, groups in kept.dists(entry or "."):
                    found.setdefault(name, folder)
                    declared[folder] = groups
            kept.save()
            _folders.clear()
            _folders.update(found)
            _declared.clear()
            _declared.update(declared)
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
        named = _declared.get(folder)
        if named is not None and group not in named:
            continue  # a kept listing says so: the file is not opened
        data = _entry_points_file(folder)
        if data and wanted in data:  # most never name errkb's groups: not decoded or parsed
            found.extend(_parse(data.decode("utf-8", errors="replace"), group))
    with _lock:
        _groups[group] = found
    return list(found)


def _entry_points_file(folder: str) -> bytes | None:
    """The bytes of a metadata folder's ``entry_points.txt``; ``None`` when it has none."""
    # os.open and os.read, not open() or pathlib: this runs for each distribution installed
    # (on a listing not kept), and a file object costs four more system calls than the three.
    try:
        fd = os.open(os.path.join(folder, "entry_points.txt"), os.O_RDONLY)  # noqa: PTH118
    except OSError:
        return None
    try:
        return _read_all(fd)
    except OSError:
        return None
    finally:
        os.close(fd)


def _groups_named(data: bytes | None) -> tuple[str, ...]:
    """The ``[group]`` sections an ``entry_points.txt`` holds, in its order."""
    if not data or b"[" not in data:
        return ()
    lines = (raw.strip() for raw in data.decode("utf-8", errors="replace").splitlines())
    return tuple(
        line[1:-1].strip() for line in lines if line.startswith("[") and line.endswith("]")
    )


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


# The listing of an installer's folder, kept beside this module's bytecode (errkb._beside) by
# the folder's modification time and inode, which change when a distribution is installed,
# upgraded or removed there, since installers write and remove whole metadata folders. Other
# folders (a project checkout, whose egg-info a `setup.py develop` rewrites in place) are
# listed every time.
_KEPT_FORMAT = 1
_KEPT_MAX = 32  # folders remembered
_INSTALLERS = ("site-packages", "dist-packages")


class _Kept:
    """The kept listings, read at the first folder that may have one; written when they grew."""

    def __init__(self) -> None:
        self.folders: dict[str, Any] | None = None
        self.changed = False

    def dists(self, entry: str) -> Sequence[tuple[str, str, tuple[str, ...] | None]]:
        """(normalized name, metadata folder, the groups its entry points name) in ``entry``.

        The groups are ``None`` (not read) outside an installer's folder.
        """
        if os.path.basename(os.path.normpath(entry)) not in _INSTALLERS:  # noqa: PTH119
            return [(name, folder, None) for name, folder in metadata_folders(entry)]
        where = os.path.abspath(entry)  # noqa: PTH100
        try:
            st = os.stat(where)  # noqa: PTH116
        except OSError:
            return []
        mark = [st.st_mtime_ns, st.st_ino]
        known = self._read().get(where)
        if isinstance(known, list) and len(known) == 3 and known[:2] == mark:
            try:
                # String work, not pathlib: this runs for each distribution installed.
                return [
                    (str(name), os.path.join(where, str(base)), tuple(map(str, groups)))  # noqa: PTH118
                    for name, base, groups in known[2]
                ]
            except (TypeError, ValueError):
                pass  # not what this code writes: listed again
        listed = [
            (name, folder, _groups_named(_entry_points_file(folder)))
            for name, folder in metadata_folders(where)
        ]
        import time

        from errkb._beside import SETTLED_NS

        if time.time_ns() - st.st_mtime_ns >= SETTLED_NS:  # else listed again next time
            folders = self._read()
            folders.pop(where, None)  # a folder listed anew goes last: the latest are kept
            folders[where] = [
                *mark,
                [[n, os.path.basename(f), list(g)] for n, f, g in listed],  # noqa: PTH119
            ]
            self.changed = True
        return listed

    def _read(self) -> dict[str, Any]:
        if self.folders is None:
            import json

            try:
                data = json.loads(_kept_path().read_bytes())
                folders = data["folders"] if data.get("format") == _KEPT_FORMAT else {}
            except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):
                folders = {}
            self.folders = folders if isinstance(folders, dict) else {}
        return self.folders

    def save(self) -> None:
        """Write the listings, when one was made anew (see :mod:`errkb._beside`)."""
        if not self.changed:
            return
        import json

        from errkb import _beside

        folders = dict(list(self._read().items())[-_KEPT_MAX:])  # the latest listed last
        data = json.dumps({"format": _KEPT_FORMAT, "folders": folders}).encode()
        _beside.write(_kept_path(), data)


def _kept_path() -> Path:
    from errkb import _beside

    return _beside.path(__file__, "dists.json")
