"""Reading exceptions out of pasted text: a bare message, ``Class: message``, or tracebacks.

A pasted traceback may hold several exceptions (chained with "The above exception was the
direct cause ..." or "During handling of the above exception ..."), or an exception group,
whose members Python prints behind ``|`` margins. Each comes back in the order printed, with its
class name and the frames listed above it.
"""

from __future__ import annotations

import attrs
import regex

__all__ = ["ParsedException", "ParsedFrame", "class_at", "parse_text"]

_ANSI = regex.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)")
_TRACEBACK = regex.compile(r"^\s*(?:Exception Group )?Traceback \(most recent call last\):\s*$")
_FRAME = regex.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')
_MARGIN = regex.compile(r"^(?:[ \t]*\|[ ]?)+|^[ \t]*\+ (?=Exception Group Traceback)")
_SEP = "\x00member"
_SEPARATOR = regex.compile(r"^[ \t]*\+[-+]*(?: ?(?:\d+|\.\.\.) [-+ ]*.*)?$")
_CHAIN = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
_CLASS = r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*"
_AFTER_TRACEBACK = regex.compile(rf"^(?P<cls>{_CLASS})(?::[ ]?(?P<msg>.*))?$")
#: How the names of exception classes end; a word so ended, then ": ", is read as a class.
_SUFFIXES = ("Error", "Exception", "Exit", "Interrupt", "Warning", "Iteration", "Group")
# A class inside a line: after its start, a space, a bracket, ">", "|" or ":" (log prefixes
# such as "[core.py:700] " or "ERROR:root:"), dotted or not, followed by ": ".
_IN_LINE = regex.compile(rf"(?:^|[\s\]\)>|:])(?P<cls>[A-Za-z_][\w.]*(?:{'|'.join(_SUFFIXES)})): ")


@attrs.frozen(kw_only=True)
class ParsedFrame:
    """A frame line of a pasted traceback."""

    file: str
    line: int
    function: str | None


@attrs.frozen(kw_only=True)
class ParsedException:
    """One exception found in a text: class name (None for a bare message), message, frames."""

    class_name: str | None
    message: str
    frames: tuple[ParsedFrame, ...] = ()

    @property
    def files(self) -> tuple[str, ...]:
        """The files of the frames, innermost last."""
        return tuple(f.file for f in self.frames)


def class_at(line: str) -> tuple[str | None, str]:
    """The first exception class named in ``line`` and the message after it.

    ``(class name, the rest of the line)``, or ``(None, line)`` when no word ending in
    ``Error``, ``Exception``, ``Warning``, ... is followed by ``": "``. Log prefixes before
    the class are skipped; this is how ``errkb scan`` reads a log line and how a pasted text
    with no traceback is read.

    >>> class_at("ERROR 11-30 [core.py:700] RuntimeError: Engine core initialization failed.")
    ('RuntimeError', 'Engine core initialization failed.')
    >>> class_at("INFO all good")
    (None, 'INFO all good')
    """
    m = _IN_LINE.search(line)
    return (m["cls"], line[m.end() :]) if m else (None, line)


def parse_text(text: str) -> list[ParsedException]:
    """The exceptions in ``text``, in the order they are printed (causes first)."""
    lines = [_clean(line) for line in _ANSI.sub("", text).replace("\r\n", "\n").split("\n")]
    if not any(_TRACEBACK.match(line) for line in lines):
        return [_bare(lines)]
    found: list[ParsedException] = []
    frames: list[ParsedFrame] = []
    i = 0
    in_traceback = False
    while i < len(lines):
        line = lines[i]
        if line == _SEP:
            # A member of an exception group: printed with or without a traceback of its own.
            in_traceback, frames = True, []
            i += 1
            continue
        if _TRACEBACK.match(line):
            in_traceback, frames = True, []
            i += 1
            continue
        frame = _FRAME.match(line) if in_traceback else None
        if frame:
            frames.append(
                ParsedFrame(file=frame["file"], line=int(frame["line"]), function=frame["func"])
            )
            i += 1
            continue
        head = _AFTER_TRACEBACK.match(line) if in_traceback and line[:1].strip() else None
        if head:
            body = [head["msg"] or ""]
            i += 1
            while i < len(lines) and not _ends_message(lines, i):
                body.append(lines[i])
                i += 1
            message = "\n".join(body).strip("\n")
            found.append(
                ParsedException(class_name=head["cls"], message=message, frames=tuple(frames))
            )
            in_traceback, frames = False, []
            continue
        i += 1
    return found or [_bare(lines)]


def _clean(line: str) -> str:
    """A line without exception-group margins; separator lines become a marker."""
    if _SEPARATOR.match(line) and "|" not in line:
        return _SEP
    return _MARGIN.sub("", line) if _MARGIN.match(line) else line


def _ends_message(lines: list[str], i: int) -> bool:
    line = lines[i].strip()
    if lines[i] == _SEP:
        return True
    if _TRACEBACK.match(lines[i]) or line in _CHAIN:
        return True
    if not line:
        rest = next((x.strip() for x in lines[i + 1 :] if x.strip()), "")
        return rest in _CHAIN or rest == _SEP.strip() or bool(_TRACEBACK.match(rest)) or not rest
    return False


def _bare(lines: list[str]) -> ParsedException:
    """A text with no traceback: ``Class: message`` on some line, else the whole text."""
    lines = [line for line in lines if line != _SEP]
    text = "\n".join(lines).strip()
    for index, line in enumerate(lines):
        head = _AFTER_TRACEBACK.match(line) if index == 0 else None
        if head and head["msg"] is not None and _looks_like_class(head["cls"]):
            message = "\n".join([head["msg"], *lines[index + 1 :]]).strip()
            return ParsedException(class_name=head["cls"], message=message)
        cls, rest = class_at(line)
        if cls is not None:
            message = "\n".join([rest, *lines[index + 1 :]]).strip()
            return ParsedException(class_name=cls, message=message)
    return ParsedException(class_name=None, message=text)


def _looks_like_class(name: str) -> bool:
    last = name.rpartition(".")[2]
    return last[:1].isupper() and last.endswith(_SUFFIXES)
