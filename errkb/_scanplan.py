r"""What a scan looks for: many needles in a large log, and which patterns run over lines.

**Needles without a compiled automaton: a plan from a sample.**

``bytes.find`` runs at C speed, but each needle costs a pass over the block, so a hundred
needles cost a hundred passes. Two observations cut the passes down; which of them pays is
decided from the log itself (its first block), since logs differ:

* **Rare bytes.** Bytes that are rare in this log (a backtick, ``<``, a capital ``Q``, most
  control bytes) are mapped by one ``bytes.translate`` to a single marker byte, and one
  ``find`` loop visits every marker. A needle holding a rare byte is then found by that one
  pass: each visited line is checked for the needles holding that byte.
* **Shared anchors.** The other needles are covered by few substrings that several of them
  share (``" must be "``, ``"CUDA error: "``), each searched with one ``find`` pass; a line
  holding an anchor is checked for the needles that contain it. A greedy set cover picks the
  anchors that cover most needles for the least cost: a pass, plus a check for every line the
  anchor turns up on in the sample.

A needle is only ever looked for through something it contains, so the lines found are
exactly the lines holding a needle, whatever the sample was like; a sample unlike the rest
of the log only makes the plan slower.

**Patterns that run over lines.** :func:`spans_lines` reads a pattern for anything that can
match a newline (``\n``, ``\s``, a negated class that does not exclude it, ``.`` under the
``s`` flag); the scan matches such a record on a window of the lines that follow the one it
starts on.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import TYPE_CHECKING, NamedTuple

from errkb._lazy_regex import lazy_re
from errkb._patterns import best_set, head_pattern, known_newline, literal_sets

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "FindPlan",
    "NeedlePlan",
    "first_line",
    "first_newline",
    "line_around",
    "plan_needles",
    "spans_lines",
]

#: The share of a log's bytes that the rare-byte pass may stop at.
RARE_SHARE = 1 / 4096
#: What checking one line found by a pass costs, in bytes of a ``find`` pass.
CHECK_COST = 1500
#: The lengths of the substrings tried as shared anchors.
ANCHOR_LENGTHS = range(4, 13)
#: How much of the first block is read to make the plan.
SAMPLE = 1 << 20
#: Above this many needles, shared anchors are not looked for (the search for them grows
#: with the square of the needles); such a registry wants the ``fast`` extra.
MAX_SHARED = 1000


def _pass_cost(length: int) -> float:
    """The relative cost per byte of a ``find`` pass: longer needles skip further."""
    return 1 / (0.9 + 0.07 * min(length, 30))


Span = tuple[int, int]
# A record as the needles are chosen for it: its pattern, the literal sets of its pattern's head
# (errkb.records.RecordRef.literal_sets), and whether it is retired.
Row = tuple[str, "tuple[tuple[str, ...], ...] | None", bool]


class NeedlePlan(NamedTuple):
    """What a scan looks for in a log, chosen from its records (see :func:`plan_needles`).

    Records are named by their place in the rows the plan was made from (a records index
    keeps the plan of its rows: see :mod:`errkb.packs`).
    """

    #: The byte strings to look for: a line that holds none is passed over.
    needles: tuple[bytes, ...]
    #: The records whose pattern runs over lines, by the literal their first line holds.
    spanning: dict[str, list[int]]
    #: Those whose first line holds no literal to look for: tried on every line.
    anywhere: list[int]
    #: The records with no literal to look for, searched for over each block whole.
    unfindable: list[int]

    def to_json(self) -> dict[str, object]:
        """As a records index keeps it (the needles are UTF-8 text: trimming keeps them so)."""
        return {
            "needles": [n.decode("utf-8") for n in self.needles],
            "spanning": self.spanning,
            "anywhere": self.anywhere,
            "unfindable": self.unfindable,
        }

    @classmethod
    def from_json(cls, data: object, rows: int) -> NeedlePlan | None:
        """The plan :meth:`to_json` wrote for ``rows`` rows; None where it is not one."""
        try:
            needles = tuple(n.encode("utf-8") for n in data["needles"])  # type: ignore[index]
            spanning = {str(k): list(v) for k, v in data["spanning"].items()}  # type: ignore[index]
            anywhere, unfindable = list(data["anywhere"]), list(data["unfindable"])  # type: ignore[index]
        except (TypeError, KeyError, AttributeError, UnicodeError):
            return None
        named = [r for rs in (*spanning.values(), anywhere, unfindable) for r in rs]
        if not all(type(r) is int and 0 <= r < rows for r in named):
            return None
        return cls(needles, spanning, anywhere, unfindable)


def plan_needles(rows: Iterable[Row]) -> NeedlePlan:
    """The needles for records, and those of them a needle does not find alone.

    Each record contributes the longest literal its pattern requires (or, when its literals
    are alternatives, all of them). A record whose pattern runs over lines contributes the one
    that the line its match starts on must hold (see :func:`first_line`), or, when the pattern
    does not tell, every literal it requires: its message is found when the line it starts on
    holds one. A needle is trimmed of the spaces and punctuation at its ends (see
    :func:`_trimmed`); one that contains another is dropped, and so is one that spans lines (no
    single line can hold it). A retired record contributes nothing.
    """
    needles: set[bytes] = set()
    spanning: dict[str, list[int]] = {}
    anywhere: list[int] = []
    unfindable: list[int] = []
    for row, (pattern, literals, retired) in enumerate(rows):
        if retired:
            continue
        sets = _usable(literals)
        if spans_lines(pattern):
            chosen = _choose(_first_line_sets(pattern)) or {
                x for s in sets for x in s if "\n" not in x
            }
            for literal in sorted(chosen):
                spanning.setdefault(literal, []).append(row)
            needles.update(x.encode() for x in chosen)
            if chosen:
                continue
            anywhere.append(row)
        chosen = _choose(sets)
        if chosen:
            needles.update(x.encode() for x in chosen)
        else:
            unfindable.append(row)
    kept: list[bytes] = []
    for needle in sorted(set(map(_trimmed, needles)), key=lambda n: (len(n), n)):
        # find, not `in`: bytes' `in` tries its operand as an integer first, and makes and
        # drops a TypeError each time (9 ms of a scan's start for 200 needles).
        if b"\n" not in needle and all(needle.find(k) < 0 for k in kept):
            kept.append(needle)
    return NeedlePlan(tuple(kept), spanning, anywhere, unfindable)


def _trimmed(needle: bytes) -> bytes:
    """``needle`` without the spaces and punctuation at its ends, when enough is left.

    What remains is in every line the needle is in. The automaton's SIMD search first looks
    for a needle's opening bytes: a space or a bracket opens far more places in a log than a
    letter does (a quarter of the search's time on the benchmark's log).
    """
    trimmed = needle.strip(_EDGE_BYTES)
    return trimmed if len(trimmed) >= _TRIMMED_MIN else needle


_EDGE_BYTES = bytes(b for b in range(128) if not chr(b).isalnum() and b != ord("_"))
_TRIMMED_MIN = 5


def _usable(sets: tuple[tuple[str, ...], ...] | None) -> list[tuple[str, ...]]:
    """The any-of sets whose every literal is long enough to be worth looking for."""
    return [s for s in sets or () if min(len(x) for x in s) >= 3]


def _choose(sets: list[tuple[str, ...]]) -> set[str]:
    """The needles for a record: its longest required literal, else its best any-of set."""
    singles = [s[0] for s in sets if len(s) == 1]
    if singles:
        return {max(singles, key=len)}
    return set(best_set(sets) or ())


def _first_line_sets(pattern: str) -> list[tuple[str, ...]]:
    """What the line a match of ``pattern`` starts on must hold, whole or cut after its head."""
    part = first_line(pattern)
    head = head_pattern(pattern)
    if part is not None and head is not None and len(head) < len(part):
        part = head  # both are the start of the pattern: the shorter asks less
    return _usable(literal_sets(part)) if part else []


class FindPlan:
    """Which needles are found through rare bytes, and which through which anchors.

    Without a ``sample`` (a text too small to be worth planning), each needle is its own
    anchor: a ``find`` pass per needle.
    """

    def __init__(self, needles: Iterable[bytes], sample: bytes | None = None) -> None:
        #: For each rare byte, the needles found through it.
        self.by_byte: dict[int, list[bytes]] = {}
        if sample is None:
            #: (anchor, the needles found through it), in the order they are searched.
            self.anchors = [(needle, [needle]) for needle in needles]
            return
        sample = sample[:SAMPLE]
        size = max(len(sample), 1)
        frequency = Counter(sample)
        rare: set[int] = set()
        total = 0
        for byte in sorted(range(256), key=lambda b: frequency[b]):
            if byte == 0x0A:  # newline: lines are cut at it
                continue
            if total + frequency[byte] > RARE_SHARE * size:
                break
            rare.add(byte)
            total += frequency[byte]
        rest: list[bytes] = []
        for needle in needles:
            held = [b for b in set(needle) if b in rare]
            if held:
                self.by_byte.setdefault(min(held, key=lambda b: frequency[b]), []).append(needle)
            else:
                rest.append(needle)
        table = bytearray(range(256))
        for byte in range(256):
            table[byte] = 0 if byte in self.by_byte else (byte or 1)
        self._table = bytes(table)
        self.anchors = _cover(rest, lambda sub: sample.count(sub) / size)

    def lines(self, block: bytes) -> set[Span]:
        """(start, end) of every line of ``block`` that holds a needle."""
        spans: set[Span] = set()
        if self.by_byte:
            marked = block.translate(self._table)
            _visit(block, marked.find, b"\0", spans, self._holds_rare_needle)
        for anchor, group in self.anchors:
            _visit(block, block.find, anchor, spans, _holds_any(group))
        return spans

    def _holds_rare_needle(self, line: bytes) -> bool:
        """Whether ``line`` holds a needle of a rare byte it holds (it may hold several)."""
        return any(
            byte in line and any(needle in line for needle in group)
            for byte, group in self.by_byte.items()
        )


def _holds_any(needles: list[bytes]) -> Callable[[bytes], bool]:
    def holds(line: bytes) -> bool:
        return any(needle in line for needle in needles)

    return holds


def _visit(
    block: bytes,
    find_in: Callable[[bytes, int], int],
    what: bytes,
    spans: set[Span],
    holds_needle: Callable[[bytes], bool],
) -> None:
    """Check the line of each place ``what`` is found for the needles it stands for.

    The search goes on after the line, so a line is checked once however often it holds
    ``what``: ``holds_needle`` must check every needle the line could be found for.
    """
    at = find_in(what, 0)
    while at != -1:
        start, end = line_around(block, at)
        if holds_needle(block[start:end]):
            spans.add((start, end))
        at = find_in(what, end)


def line_around(block: bytes, at: int) -> Span:
    """(start, end) of the line of ``block`` that holds position ``at``, without its newline."""
    end = block.find(b"\n", at)
    return block.rfind(b"\n", 0, at) + 1, len(block) if end == -1 else end


def _cover(
    needles: list[bytes], share: Callable[[bytes], float]
) -> list[tuple[bytes, list[bytes]]]:
    """Anchors covering every needle, chosen greedily by needles covered per unit of cost."""
    covers: dict[bytes, set[int]] = {}
    shared = len(needles) <= MAX_SHARED
    for i, needle in enumerate(needles):
        covers.setdefault(needle, set()).add(i)
        for length in ANCHOR_LENGTHS if shared else ():
            for at in range(len(needle) - length + 1):
                covers.setdefault(needle[at : at + length], set()).add(i)
    # Only shared substrings can save a pass; a needle alone is best searched whole. Widest
    # first, so the search below can stop once no anchor could beat the best so far.
    whole = set(needles)
    ranked = sorted(
        ((a, c) for a, c in covers.items() if len(c) > 1 or a in whole),
        key=lambda item: (-len(item[1]), -len(item[0]), item[0]),
    )
    known: dict[bytes, float] = {}

    def cost(anchor: bytes) -> float:
        if anchor not in known:
            known[anchor] = _pass_cost(len(anchor)) + share(anchor) * CHECK_COST
        return known[anchor]

    left = set(range(len(needles)))
    plan: list[tuple[bytes, list[bytes]]] = []
    while left:
        # Every needle left covers itself, so some anchor gains and beats the zero start.
        best_value, best = 0.0, b""
        for anchor, covered in ranked:
            gain = len(covered & left)
            if not gain or gain / _pass_cost(len(anchor)) <= best_value:
                continue
            value = gain / cost(anchor)
            if value > best_value:
                best_value, best = value, anchor
        chosen = covers[best] & left
        plan.append((best, [needles[i] for i in sorted(chosen)]))
        left -= chosen
    return plan


# The pieces of a pattern that decide whether, and where, it can first match a newline:
# escapes, classes, flag groups, parentheses, a newline written as itself, ".", "|".
_PIECE = lazy_re(
    r"""
    \\(?:x\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}
        |[NpP]\{[^}]*\}|.)
    | \[\^?\]?(?:\\.|\[:[a-z]+:\]|[^\]\\])*\]
    | \(\?[a-zA-Z]*-?[a-zA-Z]*[:)]
    | [()|.\n]
    """,
    re.VERBOSE | re.DOTALL,
)
# One member of a class: an escape, a POSIX class, or a character.
_MEMBER = lazy_re(
    r"\\(?:x\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|[0-7]{1,3}|[NpP]\{[^}]*\}|.)"
    r"|\[:[a-z]+:\]|.",
    re.DOTALL,
)
# Escapes that match a newline, or may (a property, a named character, a grapheme).
_NEWLINE_ESCAPES = frozenset("nsWDvRXpPN")


def spans_lines(pattern: str) -> bool:
    r"""Whether a match of ``pattern`` may run over a newline (conservatively: when unsure, yes).

    >>> spans_lines(r"Error\(s\) in loading state_dict for (\w+):\n\t"), spans_lines(r"[^,\n]+")
    (True, False)
    """
    return first_newline(pattern) is not None


def first_line(pattern: str) -> str | None:
    r"""The part of ``pattern`` that the first line of a match runs through, or None.

    The pattern up to the first thing that can match a newline (or up to the outermost group
    that holds it), when no top-level alternative follows: the line a match starts on matches
    this part. The whole pattern when nothing in it can match a newline; None when an
    alternative follows the cut.

    >>> first_line(r"(\d{3}) Client Error\.\s+Cannot access gated repo")
    '(\\d{3}) Client Error\\.'
    """
    found = first_newline(pattern)
    if found is None:
        return pattern
    at, alternatives = found
    return None if alternatives else pattern[:at]


def first_newline(pattern: str) -> tuple[int, bool] | None:
    """Where a match can first run over a newline, and whether an alternative follows.

    The start of the first piece that can match a newline, or of the outermost group that
    holds it; and whether a top-level ``|`` comes after it. None when no piece can. The
    records index holds it for each hand-written pattern (:func:`errkb._patterns.know_newline`).
    """
    try:
        return known_newline(pattern)
    except KeyError:
        return _first_newline(pattern)


@functools.lru_cache(maxsize=1 << 14)
def _first_newline(pattern: str) -> tuple[int, bool] | None:
    dotall = False
    depth = outer = 0  # outer: where the outermost open group starts
    first: int | None = None
    for found in _PIECE.finditer(pattern):
        piece = found.group()
        if piece == "(" or (piece.startswith("(?") and piece.endswith(":")):
            if depth == 0:
                outer = found.start()
            depth += 1
        elif piece == ")":
            depth = max(depth - 1, 0)
        elif piece == "|":
            if first is not None and depth == 0:
                return first, True
            continue
        if first is not None:
            continue  # only looking for a later top-level alternative
        if piece.startswith("(?"):
            # (?s) lets "." match a newline; (?x) makes the text hard to read: assume it may.
            dotall = dotall or bool(set(piece[2:].split("-")[0]) & set("sx"))
            crosses = dotall and "x" in piece[2:].split("-")[0]
        elif piece == "\n":
            crosses = True
        elif piece == ".":
            crosses = dotall
        elif piece.startswith("["):
            negated = piece.startswith("[^")
            holds = _class_holds_newline(piece[2 if negated else 1 : -1])
            crosses = holds is None or holds != negated
        elif piece.startswith("\\"):
            crosses = piece[1] in _NEWLINE_ESCAPES or _code(piece) == 0x0A
        else:
            crosses = False
        if crosses:
            first = outer if depth else found.start()
    return None if first is None else (first, False)


def _class_holds_newline(body: str) -> bool | None:
    r"""Whether a class with members ``body`` (no brackets, no ``^``) holds a newline; None: unsure.

    A property (``\p{...}``), a named character or a POSIX class may or may not hold one.
    """
    members = _MEMBER.findall(body)
    holds: bool | None = False
    i = 0
    while i < len(members):
        member = members[i]
        if i + 2 < len(members) and members[i + 1] == "-":
            low, high = _code(member), _code(members[i + 2])
            if low is None or high is None:
                holds = None
            elif low <= 0x0A <= high:
                return True
            i += 3
            continue
        if member.startswith("[:") or member[:2] in ("\\p", "\\P", "\\N"):
            holds = None
        elif _code(member) == 0x0A or (member.startswith("\\") and member[1] in "nsWDvRX"):
            return True
        i += 1
    return holds


def _code(member: str) -> int | None:
    r"""The code point a class member or escape stands for; None for a class such as ``\w``."""
    if len(member) == 1:
        return ord(member)
    letter = member[1]
    if letter in "xuU":
        return int(member[2:].strip("{}"), 16)
    if letter.isdigit():
        return int(member[1:], 8)
    if letter in "nrtfae":
        return ord({"n": "\n", "r": "\r", "t": "\t", "f": "\f", "a": "\a", "e": "\x1b"}[letter])
    return ord(letter) if len(member) == 2 and not letter.isalnum() else None
