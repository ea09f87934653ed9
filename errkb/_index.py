"""The prefilter: which records are worth a regex search for a message.

Every pattern's required literals (see :func:`errkb._patterns.required_literals`) are known
before any regex runs. Each record is filed under one whole word of those literals, the rarest
among the records; a message is split into its words once, and each word is a dict lookup, so
the work grows with the message, not with the number of records. A candidate must then contain
all of its literals (plain substring tests) before its regex runs.

Records whose literals hold no whole word are checked by substring on a short list, and records
with no usable literal at all are always checked. The result is exactly that of checking every
record: a record whose required literals are missing from a message cannot match it.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["LiteralIndex", "words_of_literal"]

#: Literals shorter than this are too common to narrow anything.
MIN_LITERAL = 3
_WORD = re.compile(r"\w+")

T = TypeVar("T")
_Item = tuple[int, T, tuple[str, ...]]


def words_of_literal(literal: str) -> list[str]:
    """The words of a literal that are whole in any text containing it.

    A word at either edge of the literal may continue into what the pattern matches around it,
    so only words with a non-word character of the literal on both sides count.
    """
    return [m.group() for m in _WORD.finditer(literal) if 0 < m.start() and m.end() < len(literal)]


class LiteralIndex(Generic[T]):
    """Candidates for a message, from items paired with their required literals."""

    def __init__(self, items: Iterable[tuple[T, tuple[str, ...] | None]]) -> None:
        prepared: list[tuple[int, T, tuple[str, ...], list[str]]] = []
        frequency: Counter[str] = Counter()
        self.always: list[tuple[int, T]] = []
        self.substring: list[_Item[T]] = []
        for order, (item, literals) in enumerate(items):
            usable = tuple(lit for lit in literals or () if len(lit) >= MIN_LITERAL)
            if not usable:
                self.always.append((order, item))
                continue
            words = sorted(
                {w for lit in usable for w in words_of_literal(lit) if len(w) >= MIN_LITERAL}
            )
            if not words:
                self.substring.append((order, item, usable))
                continue
            frequency.update(words)
            prepared.append((order, item, usable, words))
        self._by_word: dict[str, list[_Item[T]]] = defaultdict(list)
        for order, item, usable, words in prepared:
            word = min(words, key=lambda w: (frequency[w], -len(w), w))
            self._by_word[word].append((order, item, usable))

    def candidates(self, message: str) -> list[T]:
        """The items that may match ``message``, in the order they were given."""
        found: dict[int, T] = dict(self.always)
        table = self._by_word
        for word in set(_WORD.findall(message)):
            found.update(
                (order, item)
                for order, item, literals in table.get(word, ())
                if all(lit in message for lit in literals)
            )
        found.update(
            (order, item)
            for order, item, literals in self.substring
            if all(lit in message for lit in literals)
        )
        return [found[k] for k in sorted(found)]
