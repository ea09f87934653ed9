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

import re
from collections import Counter
from operator import itemgetter
from typing import TYPE_CHECKING, Generic, TypeVar

from errkb._patterns import EDGE

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

__all__ = [
    "AFFIX",
    "KINDS",
    "LONG_AFFIX",
    "LiteralIndex",
    "literal_keys",
    "literal_test",
    "message_keys",
    "plan_keys",
    "requirements",
    "word_keys",
    "words_of",
]

#: Literals and words shorter than this are too common to narrow anything.
MIN_LITERAL = 3
#: How many characters of a word at a literal's edge key it...
AFFIX = 3
#: ...or, for a word this long or longer, this many: nearly as rare as the whole word.
LONG_AFFIX = 8
#: The kinds of the second level's keys end with this (see :func:`plan_keys`).
SECOND = "2"
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
MessageKeys = tuple[set[str], set[str], set[str]]  # words, prefix keys, suffix keys
#: The kinds of key, first level then second: each level's in the order of :data:`MessageKeys`.
KINDS = ("word", "prefix", "suffix", "word2", "prefix2", "suffix2")
Requirement = tuple[str, ...]  # an any-of set
Sets = tuple[Requirement, ...]  # every one must be met
# (order, item, literals that must all be there, any-of sets that must each have one there)
_Entry = tuple[int, T, tuple[str, ...], tuple[Requirement, ...]]


def literal_keys(literal: str) -> tuple[Key, ...]:
    """The keys under which a literal can be found in a message's words."""
    words = _WORD.findall(literal)
    if not words:
        return ()
    # Only the first word can touch the literal's start, and only the last its end.
    open_start, open_end = _is_word(literal[0]), _is_word(literal[-1])
    last = len(words) - 1
    keys: list[Key] = []
    for i, word in enumerate(words):
        at_start, at_end = i == 0 and open_start, i == last and open_end
        if not (at_start or at_end):
            if len(word) >= MIN_LITERAL:
                keys.append(("word", word))
        elif len(word) < AFFIX or (at_start and at_end):
            continue
        elif at_end:  # runs on past the literal's end
            keys.append(("prefix", word[: LONG_AFFIX if len(word) >= LONG_AFFIX else AFFIX]))
        else:  # may start before the literal
            keys.append(("suffix", word[-LONG_AFFIX if len(word) >= LONG_AFFIX else -AFFIX :]))
    return tuple(keys)


def _is_word(char: str) -> bool:
    r"""Whether ``char`` is a word character, as ``\w`` reads it."""
    return char.isalnum() or char == "_"


def _usable(sets: Sets | None) -> tuple[Requirement, ...]:
    """The requirements whose every literal is long enough to narrow anything."""
    if not sets:
        return ()
    return tuple(s for s in sets if s and min(map(_length, s)) >= MIN_LITERAL)


def _length(literal: str) -> int:
    """A literal's length, without the :data:`~errkb._patterns.EDGE` marks of key sets."""
    return len(literal) - literal.count(EDGE)


def requirements(sets: Sets | None) -> tuple[tuple[str, ...], tuple[Requirement, ...]]:
    """What a candidate must contain: literals that must all be there, and any-of sets."""
    usable = _usable(sets)
    return (
        tuple(r[0] for r in usable if len(r) == 1),
        tuple(r for r in usable if len(r) > 1),
    )


#: Literals that must all be in a message, and any-of sets that must each have one there.
Needs = tuple[tuple[str, ...], tuple[Requirement, ...]]


def beyond_head(whole: Sets | None, head: Sets | None) -> Needs:
    """What every whole match of a pattern holds beyond what its head requires.

    ``whole`` and ``head`` are the literal sets of the pattern and of its head (what the index
    tests: a message cut short must still be found). Each literal stands here as its longest
    piece between whitespace: a wrapped or collapsed paste changes the whitespace, which
    :func:`errkb._patterns.loosen` lets match any whitespace, never the text between, so a
    plain substring test of a piece is exact (:func:`holds`). Sets the head requires as well
    are left out.
    """

    def pieces(sets: Sets | None) -> set[Requirement]:
        return {tuple(sorted({max(x.split(), key=len, default="") for x in s})) for s in sets or ()}

    return requirements(tuple(sorted(pieces(whole) - pieces(head))))


def holds(needs: Needs, message: str) -> bool:
    """Whether ``message`` holds every literal of ``needs`` and one of each of its sets."""
    singles, alternatives = needs
    if not all(map(message.__contains__, singles)):
        return False
    for alternative in alternatives:  # noqa: SIM110 - a loop: most needs have none, no generator
        if not any(map(message.__contains__, alternative)):
            return False
    return True


def plan_keys(all_sets: Sequence[Sets | None], counted: Iterable[Key] = ()) -> list[list[Key]]:
    """For each item's requirements, the keys to file it under; ``[]``: none, check it always.

    An item is filed at two levels, and is a candidate only when a message meets a key of each:
    the first level holds a key for each member of its most selective requirement (any one will
    do), the second (kinds ending in ``2``) the rarest other key its literals all require, or
    the first level's keys again when there is none. Keys are chosen by how many items share
    them (``counted`` adds keys chosen before, such as those of a cached pack), so the choice is
    the same wherever the items are planned; any choice is exact, a rarer key only makes
    lookups cheaper. Two passes (count, then choose) derive each item's keys twice rather than
    hold them all: for 100k items that saves more memory than the index itself takes.
    """
    frequency: Counter[Key] = Counter(k for k in counted if not k[0].endswith(SECOND))
    for sets in all_sets:
        for member_keys in _keyable(sets):
            if all(member_keys):
                for keys in member_keys:
                    frequency.update(set(keys))
    return [_choose(_keyable(sets), frequency) for sets in all_sets]


def _keyable(sets: Sets | None) -> list[list[tuple[Key, ...]]]:
    """For each usable requirement, the keys of each of its members."""
    return [[literal_keys(x) for x in s] for s in _usable(sets)]


def _choose(keyable: list[list[tuple[Key, ...]]], frequency: Counter[Key]) -> list[Key]:
    """The first level's keys and the second's (see :func:`plan_keys`).

    The first level: for the most selective requirement, the cheapest key of each member.
    ``keyable`` holds, for each requirement, the keys of each of its members. A key's cost is
    how many items share it, times how often such a key turns up in messages: a three-letter
    affix (``ces`` of "devices") is far commoner than a word.
    """

    def rank(key: Key) -> tuple[int, int, Key]:
        short = key[0] != "word" and len(key[1]) < LONG_AFFIX
        common = short or key[1].lower() in _COMMON_WORDS
        return (frequency[key] * (_AFFIX_PENALTY if common else 1), -len(key[1]), key)

    best: list[Key] = []
    best_cost = 0
    for member_keys in keyable:
        if not all(member_keys):
            continue
        ranked = [min(map(rank, options)) for options in member_keys]
        total = sum(r[0] for r in ranked)
        if not best or total < best_cost:
            best, best_cost = [r[2] for r in ranked], total
    # Every key of a literal that must be there is needed: the rarest one not chosen already.
    needed = {k for member_keys in keyable if len(member_keys) == 1 for k in member_keys[0]}
    second = min(map(rank, needed - set(best)), default=None)
    again = best if second is None else [second[2]]
    return [*best, *((kind + SECOND, text) for kind, text in again)] if best else []


class LiteralIndex(Generic[T]):
    """Candidates for a message, from items paired with what their matches must contain.

    Each item comes with its literal requirements (:func:`errkb._patterns.literal_sets`, for the
    substring tests), and either the keys already planned for it by :func:`plan_keys` (a cached
    pack's) or, to be planned here, its key sets (:func:`errkb._patterns.key_sets`).
    """

    def __init__(
        self, items: Iterable[tuple[T, Sets | None, Sequence[Key] | None, Sets | None]]
    ) -> None:
        given = list(items)
        todo = [i for i, (_, _, keys, _) in enumerate(given) if keys is None]
        # Keys from a cache file are JSON lists; the count needs them as tuples.
        counted = ((k[0], k[1]) for _, _, keys, _ in given if keys is not None for k in keys)
        planned = dict(zip(todo, plan_keys([given[i][3] for i in todo], counted), strict=True))
        self.always: list[tuple[int, T]] = []
        self._tables: dict[str, dict[str, list[_Entry[T]]]] = {kind: {} for kind in KINDS}
        for order, (item, sets, known, _) in enumerate(given):
            keys = planned[order] if known is None else known
            if not keys:
                self.always.append((order, item))
                continue
            entry = (order, item, *requirements(sets))
            for kind, text in keys:
                self._tables[kind].setdefault(text, []).append(entry)

    def candidates(self, message: str, keys: MessageKeys | None = None) -> list[T]:
        """The items that may match ``message``, in the order they were given.

        ``keys``: the message's :func:`message_keys`, when the caller has them already.
        """
        found: dict[int, T] = dict(self.always)
        met = keys or message_keys(message)
        tables = self._tables
        second = {
            entry[0]
            for kind, have in zip(KINDS[3:], met, strict=True)
            for key in have & tables[kind].keys()
            for entry in tables[kind][key]
        }
        if not second:
            return [found[k] for k in sorted(found)]
        contains = literal_test(message)
        for kind, have in zip(KINDS[:3], met, strict=True):
            table = tables[kind]
            for key in have & table.keys():
                for order, item, singles, alternatives in table[key]:
                    if (
                        order in second
                        and order not in found
                        and all(map(contains, singles))
                        and (not alternatives or all(any(map(contains, a)) for a in alternatives))
                    ):
                        found[order] = item
        return [found[k] for k in sorted(found)]


def literal_test(message: str) -> Callable[[str], bool]:
    """Whether ``message`` holds a pattern's literal, whatever whitespace a paste put in it.

    A record's literals are written with the library's spaces; a wrapped or collapsed paste
    has newlines or single spaces there (see :func:`errkb._patterns.loosen`), or no-break
    spaces where a web page or a chat client put them. An ASCII message with no such whitespace
    is tested as it is, at C speed.
    """
    # Chained tests, not any() over a tuple: this runs on every lookup.
    if (
        message.isascii()
        and "\n" not in message
        and "  " not in message
        and "\t" not in message
        and "\r" not in message
    ):
        return message.__contains__
    flat = " ".join(message.split())

    def holds(literal: str) -> bool:
        return literal in message or " ".join(literal.split()) in flat

    return holds


_PREFIX, _SUFFIX = itemgetter(slice(AFFIX)), itemgetter(slice(-AFFIX, None))
_LONG_PREFIX = itemgetter(slice(LONG_AFFIX))
_LONG_SUFFIX = itemgetter(slice(-LONG_AFFIX, None))


def message_keys(message: str, words: set[str] | None = None) -> MessageKeys:
    """The keys a message can meet, worked out once for every index it is looked up in.

    Its words (``words``, when the caller has them), and the prefix and suffix keys of its
    words (each word's first and last :data:`AFFIX` and :data:`LONG_AFFIX` characters; a
    shorter word gives itself, which no key of those lengths equals).
    """
    tokens = set(words_of(message)) if words is None else words
    starts = set(map(_PREFIX, tokens))
    ends = set(map(_SUFFIX, tokens))
    # A word shorter than LONG_AFFIX would give itself, which no long key equals.
    long = [t for t in tokens if len(t) >= LONG_AFFIX]
    if long:
        starts.update(map(_LONG_PREFIX, long))
        ends.update(map(_LONG_SUFFIX, long))
    return tokens, starts, ends


def word_keys(word: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """The keys one word of a message can meet, by kind: :func:`message_keys` for one word."""
    if len(word) >= LONG_AFFIX:
        return (word,), (word[:AFFIX], word[:LONG_AFFIX]), (word[-AFFIX:], word[-LONG_AFFIX:])
    return (word,), (word[:AFFIX],), (word[-AFFIX:],)


# Every ASCII byte that \w does not match, as a space: an ASCII message splits into its words
# with bytes.translate and str.split, several times faster than a regex or str.translate.
_ASCII_NON_WORD = bytes(
    c if c < 128 and (chr(c).isalnum() or chr(c) == "_") else ord(" ") for c in range(256)
)


def words_of(message: str) -> list[str]:
    r"""The words of a message, as ``\w+`` finds them."""
    if message.isascii():
        return message.encode().translate(_ASCII_NON_WORD).decode().split()
    return _WORD.findall(message)
