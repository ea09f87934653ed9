"""Finding many needles in a large log without a compiled automaton: a plan from a sample.

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
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = ["FindPlan", "line_around"]

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
