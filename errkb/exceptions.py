"""Errors errkb raises for bad input, and the warning class it uses.

Every error keeps the pieces of its message as attributes, so that tools can read them without
parsing text: where (``source``), which record (``record_id``), which field (``field``), and
what was expected.
"""

from __future__ import annotations

__all__ = ["ErrkbError", "ErrkbWarning", "RecordError", "RegistryError", "UsageError"]


class ErrkbError(Exception):
    """Base class of every error errkb raises on purpose."""


class ErrkbWarning(UserWarning):
    """Something errkb skipped but could go on without (a broken plugin, a slow pattern)."""


class RecordError(ErrkbError, ValueError):
    """A record, or a file of records, is not valid.

    The message names the place, the record and the field, then the expectation and the value:
    ``records/vllm/kv.json: record "vllm-kv": field "messagePattern": invalid regex (...)``.
    """

    def __init__(
        self,
        source: str,
        problem: str,
        *,
        record_id: str | None = None,
        field: str | None = None,
    ) -> None:
        self.source = source
        self.record_id = record_id
        self.field = field
        self.problem = problem
        super().__init__(self.line)

    @property
    def line(self) -> str:
        """The one-line form: ``source: record "id": field "name": problem``."""
        parts = [self.source]
        if self.record_id is not None:
            parts.append(f"record {self.record_id!r}".replace("'", '"'))
        if self.field is not None:
            parts.append(f'field "{self.field}"')
        parts.append(self.problem)
        return ": ".join(parts)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild_record_error, (self.source, self.problem, self.record_id, self.field))


def _rebuild_record_error(
    source: str, problem: str, record_id: str | None, field: str | None
) -> RecordError:
    return RecordError(source, problem, record_id=record_id, field=field)


class RegistryError(ErrkbError, LookupError):
    """A record asked for by id or slug is not in the registry."""


class UsageError(ErrkbError, ValueError):
    """A value given by the user (a flag, an option) is not valid."""
