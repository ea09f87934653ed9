"""Reading record files: the walk over a folder, and the JSON values of each file.

The limits on what is read (:data:`MAX_FILE`, :data:`MAX_LINE`) live here; what the values
mean is :mod:`errkb.records._validate`'s job.
"""

from __future__ import annotations

import json
import os
import stat
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from errkb.exceptions import RecordError
from errkb.records._schema import SCHEMA_VERSION

if TYPE_CHECKING:
    from collections.abc import Iterator

#: The largest record file read; a bigger one is reported, not loaded.
MAX_FILE = 256 * 1024 * 1024
#: The longest line of a .jsonl file read.
MAX_LINE = 16 * 1024 * 1024
#: The names of JSON-lines packs: plain, or gzip-compressed (as ``errkb mine --format`` writes).
PACK_SUFFIXES = (".jsonl", ".jsonl.gz")


def is_pack(path: Path) -> bool:
    """Whether a file is a JSON-lines pack (``.jsonl`` or ``.jsonl.gz``)."""
    return path.name.endswith(PACK_SUFFIXES)


def open_pack(path: Path) -> BinaryIO:
    """A pack's bytes, decompressed when it is a ``.jsonl.gz`` (offsets count those bytes)."""
    if path.name.endswith(".gz"):
        import gzip  # a plain pack's reader never needs it

        return gzip.open(path, "rb")  # type: ignore[return-value]
    return path.open("rb")


def record_files(path: Path, problems: list[RecordError]) -> Iterator[Path]:
    """The record files at ``path``: itself, or every .json/.jsonl below it, sorted, no loops.

    A folder that cannot be listed is reported in ``problems`` and passed over.
    """

    def walk_error(error: OSError) -> None:
        where = error.filename or str(path)
        problems.append(
            RecordError(str(where), f"cannot list the folder ({error.strerror or error})")
        )

    if not path.is_dir():
        yield path
        return
    seen: set[tuple[int, int]] = set()
    for root, dirs, names in os.walk(path, followlinks=True, onerror=walk_error):
        try:
            st = os.stat(root)  # noqa: PTH116 - a Path is made below only if it holds files
        except OSError:
            dirs.clear()
            continue
        if (st.st_dev, st.st_ino) in seen:
            dirs.clear()
            continue
        seen.add((st.st_dev, st.st_ino))
        dirs.sort()
        folder = None
        for name in sorted(names):
            if name.endswith((".json", *PACK_SUFFIXES)):
                folder = folder or Path(root)
                yield folder / name


def json_items(path: Path, label: str, problems: list[RecordError]) -> Iterator[tuple[object, str]]:
    """The JSON values in one file, each with the label of its place; problems are appended.

    A ``.jsonl`` file is streamed line by line, so a pack of any size is read in constant
    memory; a ``.json`` file is read whole, up to :data:`MAX_FILE` bytes.
    """
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):
            # A FIFO or a device (a link to /dev/zero, say) would block or never end.
            problems.append(RecordError(label, "not a regular file, skipped"))
            return
        if is_pack(path):
            yield from _jsonl(path, label, problems)
            return
        if st.st_size > MAX_FILE:
            problems.append(
                RecordError(
                    label, f"a file of {st.st_size:,} bytes, more than the {MAX_FILE:,} read"
                )
            )
            return
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(RecordError(label, f"cannot read the file ({_reason(exc)})"))
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        problems.append(RecordError(label, f"invalid JSON ({exc.msg} at {where})"))
        return
    except RecursionError:
        problems.append(RecordError(label, "invalid JSON (nested too deeply)"))
        return
    if isinstance(data, list):
        yield from ((item, f"{label}[{i}]") for i, item in enumerate(data))
    else:
        yield data, label


def _jsonl(path: Path, label: str, problems: list[RecordError]) -> Iterator[tuple[object, str]]:
    for data, n, _offset, _length in jsonl_values(path, label, problems):
        yield data, f"{label}:{n}"


def pack_value(value: object) -> object:
    """A pack line's value as a record: a line may leave out ``schemaVersion``, 2 is understood.

    58,000 mined lines each saying ``"schemaVersion":2`` were a megabyte of the installed
    package; a record file (the original dataset's format) still says it, and a line that says
    another version is still refused by the loader.
    """
    if isinstance(value, dict) and "schemaVersion" not in value:
        return {"schemaVersion": SCHEMA_VERSION, **value}
    return value


def jsonl_values(
    path: Path, label: str, problems: list[RecordError]
) -> Iterator[tuple[object, int, int, int]]:
    """Each JSON value of a ``.jsonl`` file, with its line number, byte offset and length.

    Blank lines are skipped; a line that is too long or not JSON is reported in ``problems``.
    A ``.jsonl.gz`` file is read decompressed; the offsets are those of the decompressed bytes.
    Each value is a :func:`pack_value`.
    """
    try:
        with open_pack(path) as file:
            offset = 0
            for n, raw in enumerate(iter(lambda: file.readline(MAX_LINE + 1), b""), 1):
                at, offset = offset, offset + len(raw)
                if len(raw) > MAX_LINE:
                    problems.append(
                        RecordError(f"{label}:{n}", f"a line longer than {MAX_LINE:,} bytes")
                    )
                    offset += len(file.readline())  # the rest of that line
                    continue
                if not raw.strip():
                    continue
                try:
                    yield pack_value(json.loads(raw)), n, at, len(raw)
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    problems.append(
                        RecordError(f"{label}:{n}", f"invalid JSON ({getattr(exc, 'msg', exc)})")
                    )
                except RecursionError:
                    problems.append(RecordError(f"{label}:{n}", "invalid JSON (nested too deeply)"))
    except (OSError, EOFError, zlib.error) as exc:
        problems.append(RecordError(label, f"cannot read the file ({_reason(exc)})"))


def _reason(exc: Exception) -> str:
    return exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
