"""Loading: every record at some paths, in order, each id once, into records or refs.

Which reader a trusted ``.jsonl`` pack gets is the caller's choice (``read_pack``): the registry
passes :func:`errkb.packs.load_pack`, which keeps each record's body in its file. This package
never imports :mod:`errkb.packs`, which is built on it.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from errkb._attrs import attrs
from errkb.exceptions import RecordError
from errkb.records._files import json_items, record_files
from errkb.records._refs import RecordRef
from errkb.records._schema import Record
from errkb.records._validate import record_from_dict

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator


@attrs.frozen(kw_only=True)
class LoadResult:
    """What loading gave: the valid records, and one :class:`RecordError` per problem found."""

    records: tuple[Record, ...]
    problems: tuple[RecordError, ...]


class ReadPack(Protocol):
    """Reads one trusted record file into refs, such as :func:`errkb.packs.load_pack`.

    It is given the file (a ``.jsonl`` pack, or a ``.json`` record file), the label of its
    place in messages, and the list to append the problems it finds to. ``None``: a ``.json``
    file it leaves to the usual reading (a pack it must read).
    """

    def __call__(
        self, path: Path, label: str, problems: list[RecordError], /
    ) -> Iterable[RecordRef] | None: ...


def load_paths(
    paths: Iterable[str | os.PathLike[str]],
    *,
    strict: bool = False,
    validate: bool = True,
    trusted: Iterable[str | os.PathLike[str]] = (),
) -> LoadResult:
    """Load and validate every record at ``paths`` (files or folders), in order.

    A bad record is reported and skipped; the rest still load. A record whose id is already
    taken by an earlier one is a problem too. With ``strict=True`` the first problem is raised
    as :class:`~errkb.exceptions.RecordError` instead. ``validate=False`` skips compiling the
    patterns and checking the examples (see :func:`record_from_dict`); ``trusted`` names paths
    loaded that way while the others are validated.
    """
    problems: list[RecordError] = []
    found = _load(
        paths, problems, strict=strict, validate=validate, trusted=trusted, read_pack=None
    )
    records = tuple(r for r in found if isinstance(r, Record))
    return LoadResult(records=records, problems=tuple(problems))


def load_refs(
    paths: Iterable[str | os.PathLike[str]],
    *,
    strict: bool = False,
    trusted: Iterable[str | os.PathLike[str]] = (),
    read_pack: ReadPack | None = None,
) -> tuple[list[RecordRef], list[RecordError]]:
    """Load as :func:`load_paths` does, into the refs a registry keeps.

    The files among the ``trusted`` paths are given to ``read_pack`` first when there is one
    (the registry's reads packs and indexed files lazily, their bodies on demand); what it
    leaves is loaded whole as the other trusted records are. The records of the other paths
    are loaded whole and validated.
    """
    problems: list[RecordError] = []
    found = _load(
        paths, problems, strict=strict, validate=True, trusted=trusted, read_pack=read_pack
    )
    return [r if isinstance(r, RecordRef) else RecordRef.of(r) for r in found], problems


def _load(
    paths: Iterable[str | os.PathLike[str]],
    problems: list[RecordError],
    *,
    strict: bool,
    validate: bool,
    trusted: Iterable[str | os.PathLike[str]],
    read_pack: ReadPack | None,
) -> Iterator[Record | RecordRef]:
    skip = {os.fspath(p) for p in trusted}
    seen: dict[str, Record | RecordRef] = {}
    for given in paths:
        top = Path(given)
        if not top.exists():
            problems.append(RecordError(str(given), "no such file or folder"))
            continue
        checked = validate and os.fspath(given) not in skip
        for file in record_files(top, problems):
            # A file below top is named as record_files joined it (no pathlib work each).
            label = os.fspath(given) if file == top else str(file)
            found: Iterable[Record | RecordRef] | None = None
            if read_pack is not None and not checked:
                found = read_pack(file, label, problems)
            if found is None:
                found = _records_in(file, label, problems, validate=checked)
            for record in found:
                first = seen.setdefault(record.id, record)
                if first is not record:
                    problems.append(
                        RecordError(
                            record.source,
                            f"duplicate id, already defined in {first.source}",
                            record_id=record.id,
                            field="id",
                        )
                    )
                    continue
                yield record
            if strict and problems:
                raise problems[0]


def _records_in(
    file: Path, label: str, problems: list[RecordError], *, validate: bool
) -> Iterator[Record]:
    for data, where in json_items(file, label, problems):
        record, found = record_from_dict(data, source=where, validate=validate)
        problems.extend(found)
        if record is not None:
            yield record
