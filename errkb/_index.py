"""The prefilter: which records are worth a regex search for a message.

What every match of a pattern must contain is known before any regex runs: literal runs, and
any-of sets where the pattern alternates (see :func:`errkb._patterns.literal_sets`). Each record
is filed under keys taken from those literals, the rarest among the records:

* a whole word of a literal (one with a non-word character of the literal on both sides) is
  a whole word of any message that matches;
* a word at the end of a literal begins a word of the message, and a word at its start ends
  one, so their first or last three characters key them.

A message is split into its words once, and each word costs three dict lookups, so the work
grows with the message, not with the number of records. A candidate must then contain all of
its literals (plain substring tests) before its regex runs. Records with nothing to key are
always checked. The result is exactly that of checking every record: a record whose required
literals are missing from a message cannot match it.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import TYPE_CHECKING, Generic, TypeVar

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["AFFIX", "LiteralIndex", "literal_keys"]

#: Literals and words shorter than this are too common to narrow anything.
MIN_LITERAL = 3
#: How many characters of a word at a literal's edge key it.
AFFIX = 3
#: How much commoner in messages a three-character affix is than a whole word, roughly.
_AFFIX_PENALTY = 32
#: Words so frequent in messages and logs that a key made of one narrows little.
_COMMON_WORDS = frozenset(
    """
    the and for with which that this not was are from when than must cannot can could will
    error errors failed failure exception found expected value type types invalid one two
    is be by of on to in at or an as it if no use using set get got has have had
    """.split()  # noqa: SIM905 - a block of words reads better than a long literal
)
_WORD = re.compile(r"\w+")

T = TypeVar("T")
Key = tuple[str, str]  # ("word" | "prefix" | "suffix", text)
Requirement = tuple[str, ...]  # an any-of set
# (order, item, literals that must all be there, any-of sets that must each have one there)
_Entry = tuple[int, T, tuple[str, ...], tuple[Requirement, ...]]


@functools.lru_cache(maxsize=65536)
def literal_keys(literal: str) -> tuple[Key, ...]:
    """The keys under which a literal can be found in a message's words."""
    keys: list[Key] = []
    for m in _WORD.finditer(literal):
        word, start, end = m.group(), m.start(), m.end()
        if start > 0 and end < len(literal):
            if len(word) >= MIN_LITERAL:
                keys.append(("word", word))
        elif start > 0 and len(word) >= AFFIX:  # runs on past the literal's end
            keys.append(("prefix", word[:AFFIX]))
        elif end < len(literal) and len(word) >= AFFIX:  # may start before the literal
            keys.append(("suffix", word[-AFFIX:]))
    return tuple(keys)


class LiteralIndex(Generic[T]):
    """Candidates for a message, from items paired with what their matches must contain."""

    def __init__(self, items: Iterable[tuple[T, tuple[Requirement, ...] | None]]) -> None:
        prepared: list[tuple[int, T, tuple[Requirement, ...]]] = []
        frequency: Counter[Key] = Counter()
        self.always: list[tuple[int, T]] = []
        for order, (item, sets) in enumerate(items):
            usable = tuple(s for s in sets or () if s and min(len(x) for x in s) >= MIN_LITERAL)
            keyable = [[literal_keys(x) for x in s] for s in usable]
            keyable_sets = [k for k in keyable if all(k)]
            if not keyable_sets:
                self.always.append((order, item))
                continue
            for member_keys in keyable_sets:
                for keys in member_keys:
                    frequency.update(set(keys))
            prepared.append((order, item, usable))
        self._tables: dict[str, dict[str, list[_Entry[T]]]] = {
            "word": {},
            "prefix": {},
            "suffix": {},
        }
        for order, item, usable in prepared:
            singles = tuple(r[0] for r in usable if len(r) == 1)
            alternatives = tuple(r for r in usable if len(r) > 1)
            for kind, text in self._choose(usable, frequency):
                self._tables[kind].setdefault(text, []).append((order, item, singles, alternatives))

    @staticmethod
    def _choose(usable: tuple[Requirement, ...], frequency: Counter[Key]) -> list[Key]:
        """For the most selective requirement, the cheapest key of each of its members.

        A key's cost is how many records share it, times how often such a key turns up in
        messages: a three-letter affix (``ces`` of "devices") is far commoner than a word.
        """

        def cost(key: Key) -> int:
            common = key[0] != "word" or key[1].lower() in _COMMON_WORDS
            return frequency[key] * (_AFFIX_PENALTY if common else 1)

        best: list[Key] | None = None
        best_cost = 0
        for requirement in usable:
            keys = []
            for member in requirement:
                options = literal_keys(member)
                if not options:
                    break
                keys.append(min(options, key=lambda k: (cost(k), -len(k[1]), k)))
            else:
                total = sum(cost(k) for k in keys)
                if best is None or total < best_cost:
                    best, best_cost = keys, total
        return best or []

    def candidates(self, message: str) -> list[T]:
        """The items that may match ``message``, in the order they were given."""
        found: dict[int, T] = dict(self.always)
        tokens = set(_WORD.findall(message))
        words, prefixes, suffixes = (
            self._tables["word"],
            self._tables["prefix"],
            self._tables["suffix"],
        )
        buckets = [words[t] for t in tokens & words.keys()]
        if prefixes:
            buckets += [prefixes[k] for k in {t[:AFFIX] for t in tokens} & prefixes.keys()]
        if suffixes:
            buckets += [suffixes[k] for k in {t[-AFFIX:] for t in tokens} & suffixes.keys()]
        contains = message.__contains__
        for bucket in buckets:
            for order, item, singles, alternatives in bucket:
                if (
                    order not in found
                    and all(map(contains, singles))
                    and all(any(map(contains, alt)) for alt in alternatives)
                ):
                    found[order] = item
        return [found[k] for k in sorted(found)]
