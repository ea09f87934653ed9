"""The split of a record into its ref, kept in memory, and its body, read when needed.

A registry keeps a :class:`RecordRef` for each record: what matching, ranking and listing need.
The ref's :class:`Body` says where the rest of the record is: the record itself, or a line of
a large pack (:mod:`errkb.packs`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from errkb._patterns import head_pattern, key_sets, literal_sets
from errkb.records._schema import Record, brief, library_of

if TYPE_CHECKING:
    from collections.abc import Sequence

_UNREAD: Any = object()


class Body(Protocol):
    """Where a ref's whole record comes from: the record itself, or a line of a pack."""

    @property
    def source(self) -> str:
        """The place, as :attr:`Record.source` says it."""
        ...

    def read(self, record_id: str) -> Record:
        """The record; :class:`~errkb.exceptions.RegistryError` if it is gone."""
        ...


class _Kept:
    """The body of a record kept whole in memory."""

    __slots__ = ("record",)

    def __init__(self, record: Record) -> None:
        self.record = record

    @property
    def source(self) -> str:
        return self.record.source

    def read(self, record_id: str) -> Record:  # noqa: ARG002 - the Body protocol
        return self.record


class Listed(NamedTuple):
    """What a listing shows of a record (``errkb list``, the console's record list).

    Read from a pack's index, so that listing tens of thousands of records reads none of them.
    """

    id: str
    slug: str
    title: str | None
    severity: str | None
    library: str
    tags: tuple[str, ...]

    @property
    def heading(self) -> str:
        """As :attr:`~errkb.records.Record.heading`: the title, else the slug."""
        return self.title or self.slug


class RecordRef:
    """A record as the registry keeps it: in memory, what matching, ranking and listing need.

    The rest of the record (its documentation, solutions, source code, ...) is its *body*:
    either the :class:`Record` itself, or, for records of a large ``.jsonl`` pack (see
    :mod:`errkb.packs`), a place in that file, read by :meth:`load` when the record is first
    needed. A registry of 100k records so keeps a few hundred bytes for each.
    """

    __slots__ = (
        "_body",
        "_record",
        "error_class",
        "error_classes",
        "file_path",
        "id",
        "keys",
        "message_pattern",
        "repo",
        "retired",
        "sets",
        "severity",
        "slug",
        "tags",
        "title",
        "variant_of",
    )

    def __init__(
        self,
        *,
        id: str,  # noqa: A002 - the record's field name
        slug: str,
        title: str | None,
        severity: str | None,
        repo: str | None,
        message_pattern: str,
        error_class: str | None,
        file_path: str | None,
        retired: bool,
        variant_of: str | None,
        tags: tuple[str, ...],
        error_classes: tuple[str, ...] = (),
        sets: tuple[tuple[str, ...], ...] | None = _UNREAD,
        keys: Sequence[tuple[str, str]] | None = None,
        body: Body,
    ) -> None:
        self.id, self.slug, self.title, self.severity = id, slug, title, severity
        self.repo, self.message_pattern, self.error_class = repo, message_pattern, error_class
        self.file_path, self.retired, self.variant_of, self.tags = (
            file_path,
            retired,
            variant_of,
            tags,
        )
        self.error_classes = error_classes
        # The literal analysis of the pattern and the index keys, when a pack cache has them.
        self.sets, self.keys = sets, keys
        self._body = body
        # The whole record once read (at once for a record kept in memory).
        self._record = body.record if isinstance(body, _Kept) else None

    @classmethod
    def of(cls, record: Record, *, body: Body | None = None, keep: bool = False) -> RecordRef:
        """The ref of a record: kept whole, or, given its ``body``, to be read again from it.

        ``keep=True`` with a ``body`` keeps the record already read, so that the first
        :meth:`load` does not read it again (the body still names where it lives).
        """
        ref = cls(
            id=record.id,
            slug=record.slug,
            title=record.title,
            severity=record.severity,
            repo=record.repo,
            message_pattern=record.message_pattern,
            error_class=record.error_class,
            file_path=record.file_path,
            retired=record.retired,
            variant_of=record.variant_of,
            tags=record.tags,
            error_classes=record.error_classes,
            body=body or _Kept(record),
        )
        if keep:
            ref._record = record
        return ref

    def __repr__(self) -> str:
        return f"RecordRef({self.id!r})"

    @property
    def source(self) -> str:
        """Where the record was read from, as :attr:`Record.source` says it."""
        return self._body.source

    @property
    def heading(self) -> str:
        """As :attr:`Record.heading`."""
        return self.title or self.slug

    def brief(self) -> dict[str, object]:
        """As :meth:`Record.brief`."""
        return brief(self)

    @property
    def library(self) -> str:
        """As :attr:`Record.library`."""
        return library_of(self.source, self.repo)

    def literal_sets(self) -> tuple[tuple[str, ...], ...] | None:
        """What every match of the pattern, whole or cut after its head, must contain.

        The literal sets (:func:`errkb._patterns.literal_sets`) of the pattern's head
        (:func:`errkb._patterns.head_pattern`), or of the whole pattern when it has no head:
        a message cut short is still found by the index and by ``errkb scan``.
        """
        if self.sets is _UNREAD:
            self.sets = literal_sets(head_pattern(self.message_pattern) or self.message_pattern)
        return self.sets

    def listed(self) -> Listed:
        """What a listing shows of the record."""
        return Listed(self.id, self.slug, self.title, self.severity, self.library, tuple(self.tags))

    def key_sets(self) -> tuple[tuple[str, ...], ...] | None:
        """What every match must contain, read for the index's keys.

        See :func:`errkb._patterns.key_sets`; computed when keys are planned, not kept.
        """
        return key_sets(self.message_pattern)

    def load(self) -> Record:
        """The whole record, read from its file the first time it is needed."""
        if self._record is None:
            self._record = self._body.read(self.id)
        return self._record
