"""Reading a long text whole, streamed, in bounded memory: windows of lines.

Errors sit at the end of logs, so a log is read to its end; but a 50 MB log must not be held in
memory, nor parsed in one piece. :class:`Windows` cuts a stream of lines into windows of at
most :data:`WINDOW` characters, each starting :data:`OVERLAP` characters before the previous
one ended (at a line boundary), so a traceback cut by one window's end is whole in the next.
When there is more than one window, only a window that holds a sign of an error
(:data:`SIGNS`) is handed on; the rest is read past. A text that fits in one window is handed
on whole, as it is. What could not be kept whole (a line longer than a window) is said in :attr:`notes`.
A leaf: it knows nothing of records or parsing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

__all__ = ["OVERLAP", "SIGNS", "WINDOW", "Windows"]

#: The most characters one window holds.
WINDOW = 1 << 20
#: How far a window reaches back into the previous one: the longest traceback kept whole.
OVERLAP = 1 << 16
#: What a window must hold to be worth parsing: a traceback, or a line that names an error.
SIGNS = ("Traceback", "Error", "Exception", "error", "rror:", "Exit", "Interrupt", "Warning")


class Windows:
    """The windows of a stream of lines (see the module docstring); iterate once.

    ``signs`` are the texts that make a window worth parsing (:data:`SIGNS` by default; a
    caller may add the literals of its records). ``bytes_read`` and ``lines_read`` count what
    was read, ``notes`` what was cut.
    """

    def __init__(
        self,
        lines: Iterable[str],
        *,
        window: int = WINDOW,
        overlap: int = OVERLAP,
        signs: Iterable[str] = SIGNS,
    ) -> None:
        self._lines = lines
        self._window, self._overlap = window, min(overlap, window // 2)
        self._signs = tuple(signs)
        self.lines_read = 0
        self.chars_read = 0
        self.notes: list[str] = []

    def __iter__(self) -> Iterator[str]:
        """Every window worth parsing; a text that fits in one window is that window, always."""
        pending: str | None = None
        for number, text in enumerate(self._all()):
            if number == 0:
                pending = text  # alone, it is the whole text: held until a second one comes
                continue
            if pending is not None:
                yield from self._worth(pending)
                pending = None
            yield from self._worth(text)
        if pending is not None:
            yield pending

    def _all(self) -> Iterator[str]:
        kept: list[str] = []
        size = 0
        fresh = False  # whether the window holds lines no earlier window had
        for whole in self._lines:
            self.lines_read += 1
            self.chars_read += len(whole)
            line = whole[: self._window]
            if len(whole) > self._window:
                self._note(
                    f"line {self.lines_read} was cut at {self._window:,} of its "
                    f"{len(whole):,} characters"
                )
            if size + len(line) > self._window and kept:
                if fresh:
                    yield "".join(kept)
                kept, size = self._tail(kept)
                fresh = False
            kept.append(line)
            size += len(line)
            fresh = True
        if fresh:
            yield "".join(kept)

    def _worth(self, text: str) -> Iterator[str]:
        if any(sign in text for sign in self._signs):
            yield text

    def _tail(self, kept: list[str]) -> tuple[list[str], int]:
        """The last lines of ``kept`` that fit in the overlap: the next window starts with them."""
        tail: list[str] = []
        size = 0
        for line in reversed(kept):
            if size + len(line) > self._overlap:
                break
            tail.append(line)
            size += len(line)
        tail.reverse()
        return tail, size

    def _note(self, text: str) -> None:
        if len(self.notes) < 10:
            self.notes.append(text)
