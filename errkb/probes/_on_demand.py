"""A mapping whose readings are made when first asked for (the probes that read by name)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterator, Mapping
from typing import TypeVar

V = TypeVar("V")


class OnDemand(Mapping[str, V]):
    """Name -> reading, each read by :meth:`read` when first asked for, then kept.

    Any name can be asked for; only the names asked for are listed.
    """

    def __init__(self) -> None:
        self._seen: dict[str, V] = {}

    @abstractmethod
    def read(self, name: str) -> V:
        """The reading for ``name`` (a subclass's own)."""

    def __getitem__(self, name: str) -> V:
        if name not in self._seen:
            self._seen[name] = self.read(name)
        return self._seen[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._seen)

    def __len__(self) -> int:
        return len(self._seen)
