r"""Reading exceptions out of pasted text: a bare message, ``Class: message``, or tracebacks.

People paste what their tools printed, in the shape those tools gave it: CPython's traceback
(chained sections, exception groups behind ``|`` margins), rich's box with the message wrapped
at the terminal width, IPython's and Jupyter's ``Cell In[5]`` frames, pytest's ``E   `` lines
and its ``FAILED ... - Class: message...`` summary, a log whose every line starts with a header
(vLLM's ``ERROR 11-30 14:02:11 [core.py:41]``, a process tag such as ``(EngineCore_0 pid=123)``,
torchrun's ``[default0]:``, syslog's), a GitHub quote reply (``> ``), colour codes, or what is
left of them when the ESC byte was lost (``^[[31m``, ``#033[0m``).

The text is data: it is read, never run. :func:`parse_text` is a pipeline of three steps, each
a function below:

1. :func:`normalise`: colour codes and their remnants go, line ends become ``\n``.
2. :func:`_streams`: each line loses the tags that repeat from line to line (syslog's header, a
   process tag, a rank, a quote marker); lines with the same tags form one stream, so lines
   from interleaved processes, or prose around a quote, do not mix. The log header of each
   line (level, time, source) is kept aside: a line whose header differs starts a new record.
3. :class:`_Reader` reads each stream: the tracebacks in it (CPython, IPython, rich, pytest)
   and their messages; a message ends where the text around it resumes (a new log record, a
   new traceback, a banner, a fence, a blank line followed by what is not message text).
   Without a traceback anywhere, pytest's summary lines, then ``Class: message`` lines that
   start a record, then a class named inside the first line, then the whole text are read.

The exceptions come back in the order printed (causes first), each with its class name (as
printed: IPython prints ``OutOfMemoryError``, rich ``ValueError``), its message and the frames
listed above it. Each step is linear in the length of the text.
"""

from __future__ import annotations

import itertools
import re
import textwrap
from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb._patterns import lazy_compile

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    import regex

__all__ = [
    "MAX_LINE",
    "MAX_LINES",
    "ParsedException",
    "ParsedFrame",
    "class_at",
    "log_prefix",
    "normalise",
    "parse_lines",
    "parse_text",
    "stated_releases",
]

_CLASS = r"[A-Za-z_][\w]*(?:\.[A-Za-z_]\w*)*"
# A class as printed; Ray's wrapper names the class it wraps after its own:
# "ray.exceptions.RayTaskError(ValueError): ...".
_AFTER_TRACEBACK = lazy_compile(rf"^(?P<cls>{_CLASS})(?:\({_CLASS}\)(?=:))?(?::[ ]?(?P<msg>.*))?$")
#: How the names of exception classes end; a word so ended, then ": ", is read as a class.
_SUFFIXES = ("Error", "Exception", "Exit", "Interrupt", "Warning", "Iteration", "Group")
# A class inside a line: after anything but a letter, digit, "_" or "." of a name (a log prefix
# such as "[core.py:700] " or "ERROR:root:", a quote, Markdown's "`" or "*", a word of another
# script), dotted or not, followed by ": ".
_IN_LINE = lazy_compile(rf"(?<![A-Za-z0-9_.])(?P<cls>[A-Za-z_][\w.]*(?:{'|'.join(_SUFFIXES)})): ")
# A line that opens an exception: "Class: message", indented or not, after a list item's
# number or bullet and inside Markdown's code or bold marks ("**ValueError: x**", "`OSError: y`").
_OPENING = lazy_compile(
    rf"^[ \t]*(?:\d{{1,3}}[.)][ \t]+|[-*+][ \t]+)?(?P<mark>`{{1,3}}|\*\*|__)?"
    rf"(?P<cls>{_CLASS})(?:\({_CLASS}\))?: ?(?P<msg>.*)$"
)
_LEVELS = ("DEBUG", "INFO", "WARNING", "WARN", "ERROR", "CRITICAL", "FATAL", "NOTICE", "TRACE")
_LEVEL = "(?:" + "|".join(_LEVELS) + ")"


@attrs.frozen(kw_only=True)
class ParsedFrame:
    """A frame line of a pasted traceback."""

    file: str
    line: int
    function: str | None


@attrs.frozen(kw_only=True)
class ParsedException:
    """One exception found in a text: class name (None for a bare message), message, frames.

    ``chained`` is true when the exception was printed as part of the failure before it: after
    "The above exception was the direct cause ..." or "During handling of the above exception
    ...", or as a member of an exception group.
    """

    class_name: str | None
    message: str
    frames: tuple[ParsedFrame, ...] = ()
    chained: bool = False

    @property
    def files(self) -> tuple[str, ...]:
        """The files of the frames, innermost last."""
        return tuple(f.file for f in self.frames)


def class_at(line: str) -> tuple[str | None, str]:
    """The first exception class named in ``line`` and the message after it.

    ``(class name, the rest of the line)``, or ``(None, line)`` when no word ending in
    ``Error``, ``Exception``, ``Warning``, ... is followed by ``": "``. Log prefixes before
    the class are skipped; this is how ``errkb scan`` reads a log line and how a pasted text
    with no traceback and no class at the start of a line is read.

    >>> class_at("ERROR 11-30 [core.py:700] RuntimeError: Engine core initialization failed.")
    ('RuntimeError', 'Engine core initialization failed.')
    >>> class_at("INFO all good")
    (None, 'INFO all good')
    """
    m = _IN_LINE.search(line)
    if m is None:
        return None, line
    rest = line[m.end() :]
    before = line[m.start("cls") - 1] if m.start("cls") else ""
    if before and before in _MARKS:  # a code span, bold or a JSON string ends the text
        rest = _unmark(rest, _MARKS[before])
    return m["cls"], rest


#: What closes a span that opens just before a class: Markdown's code and bold, a JSON string
#: (torch's elastic error file: ``"message": "RuntimeError: ...",``).
_MARKS = {"`": "`", "*": "**", '"': '"'}


def _unmark(message: str, mark: str) -> str:
    """``message`` up to the mark that closes the span it opened in, if any."""
    end = message.find(mark[0] if mark[0] == "`" else mark)
    return message if end < 0 else message[:end]


def _opening(text: str) -> tuple[str, str] | None:
    """``(class, message)`` when ``text`` opens an exception (see :data:`_OPENING`), else None.

    A Markdown mark before the class ends the message where it closes.
    """
    if ":" not in text:
        return None
    m = _OPENING.match(text)
    if m is None or not _looks_like_class(m["cls"]):
        return None
    return m["cls"], (_unmark(m["msg"], m["mark"]) if m["mark"] else m["msg"])


def parse_text(text: str) -> list[ParsedException]:
    r"""The exceptions in ``text``, in the order they are printed (causes first).

    Never empty: a text in which no exception can be told apart is one exception of unknown
    class whose message is the whole text (without colour codes and line prefixes).

    >>> [(p.class_name, p.message) for p in parse_text("> ValueError: boom\n> \nThanks!")]
    [('ValueError', 'boom')]
    """
    streams, every = _streams(normalise(text))
    readers = [_Reader(stream) for stream in streams]
    for step in (_Reader.tracebacks, _Reader.summaries, _Reader.bare, _Reader.inline):
        found = sorted((x for reader in readers for x in step(reader)), key=lambda x: x[0])
        if found:
            return [
                c for _, p in (found[:1] if step is _Reader.inline else found) for c in _carried(p)
            ]
    return [ParsedException(class_name=None, message="\n".join(every).strip())]


# Wrappers that carry the error they wrap in their own message, after these words: transformers'
# lazy module ("Failed to import transformers.X because of the following error (look up to see
# its traceback):\n<the error's message>", transformers/utils/import_utils.py, read in the
# 4.40.0 wheel; a paste may join its two lines with a space).
_CARRIER = lazy_compile(r"because of the following error \(look up to see its\s+traceback\):\s+")


# torch's launcher (torchrun) ends its ChildFailedError's message with a summary of the failed
# ranks; the first one's "Root Cause (first observed failure):" block has a "traceback :" field
# that holds the rank's own traceback (or "Signal 9 (SIGKILL) received by PID ..."), indented.
_ROOT_FIELD = lazy_compile(r"^[ \t]*traceback[ \t]*:[ \t]?", re.MULTILINE)
_RULE = lazy_compile(r"^[ \t]*={10,}[ \t]*$", re.MULTILINE)


def _root_cause(p: ParsedException) -> list[ParsedException]:
    """``p`` (torch's ChildFailedError), after the first failed rank's error its summary holds."""
    block = p.message.partition("Root Cause (first observed failure):")[2]
    field = _ROOT_FIELD.search(block)
    if field is None:
        return [p]
    rest = block[field.end() :]
    end = _RULE.search(rest)
    first, _, below = rest[: end.start() if end else len(rest)].partition("\n")
    inner = (first + "\n" + textwrap.dedent(below)).strip()
    if not inner:
        return [p]
    causes = [attrs.evolve(c, chained=c.chained or i > 0) for i, c in enumerate(parse_text(inner))]
    if not inner.startswith("Signal ") and not any(c.class_name for c in causes):
        return [p]  # no error of the rank's own: torch's hint on how to record one
    causes[0] = attrs.evolve(causes[0], chained=p.chained)
    return [*causes, attrs.evolve(p, chained=True)]


def _carried(p: ParsedException) -> list[ParsedException]:
    """``p``, after the error its message carries when it is a wrapper's (:data:`_CARRIER`).

    The carried error is read as a message of its own, with its class when it names one (a
    paste of the wrapper alone has no other trace of it), and printed before its wrapper: it is
    the cause, the wrapper continues its failure.
    """
    if "Root Cause (first observed failure):" in p.message:
        return _root_cause(p)
    m = _CARRIER.search(p.message) if "look up to see" in p.message else None
    if m is None or not p.message[m.end() :].strip():
        return [p]
    inner = p.message[m.end() :].strip()
    head = _opening(inner.partition("\n")[0])
    cls, message = (
        (head[0], head[1] + inner[len(inner.partition("\n")[0]) :]) if head else (None, inner)
    )
    cause = ParsedException(class_name=cls, message=message, chained=p.chained)
    return [cause, attrs.evolve(p, chained=True)]


#: How many lines of a text :func:`parse_lines` reads at most (the last ones), and how long each.
MAX_LINES, MAX_LINE = 200, 4096
_WORDY = lazy_compile(r"[A-Za-z]{3}")
# A line without a class that still tells of an error: a logger's error or warning level, or
# an error's words.
_ERROR_LIKE = lazy_compile(
    r"\b(?:ERRO|ERROR|WARN|WARNING|CRITICAL|FATAL|[Ee]rror|[Ff]ail(?:ed|ure|s)?|[Mm]ismatch"
    r"|[Ii]nvalid|[Cc]annot|[Uu]nable|[Nn]ot (?:found|supported|enough)|[Oo]ut of memory)\b"
)


def parse_lines(text: str) -> list[ParsedException]:
    r"""Each line of ``text`` read alone, as if it were pasted alone, in the order printed.

    What a paste holds besides its exceptions: a log record above a traceback (``model load
    failed``), a warning, the error line of a traceback cut before its end. Each line loses its
    tags, log header and colour codes; a class it names (at its start, or after other words) is
    read, and its message is the rest of the line. Lines that neither name a class nor tell of
    an error (a logger's error or warning level, "failed", "mismatch", "cannot", ...: source,
    prose, progress), frame lines and lines without a word are left out, and a line printed
    twice counts once; at most :data:`MAX_LINES` lines, the last ones,
    each cut at :data:`MAX_LINE` characters.

    >>> [(p.class_name, p.message) for p in parse_lines("x = f(y)\nERROR:x:model load failed")]
    [(None, 'model load failed')]
    """
    text = normalise(text)
    _, every = _streams(text)
    found: dict[tuple[str | None, str], ParsedException] = {}
    for raw, line in zip(reversed(text.split("\n")), reversed(every), strict=True):
        body = line.strip()[:MAX_LINE]
        if len(found) >= MAX_LINES or not _WORDY.search(body):
            continue
        if _FRAME.match(body) or _TRACEBACK.match(body) or body.startswith(("File ", "│", "|")):
            continue
        head = _opening(body)
        cls, message = head if head is not None else class_at(body)
        if cls is None and not _ERROR_LIKE.search(raw[:MAX_LINE]):
            continue  # a line of source, prose or progress: no error in it
        found.setdefault((cls, message.strip()), ParsedException(class_name=cls, message=message))
    return list(reversed(found.values()))


_RELEASE_TEXT = (
    r"v?(?P<ver>\d{1,9}(?:\.\d{1,9}){1,5}(?:(?:a|b|rc)\d+|\.post\d+|\.dev\d+)*(?:\+[\w.]+)?)"
)
#: Where a text states which release of a distribution ran, each with the distribution's name
#: (a ``name`` group) or the distribution it is about.
_STATED: tuple[tuple[regex.Pattern[str], str | None], ...] = (
    # vLLM's own banners: "vLLM API server version 0.9.2", "Initializing a V1 LLM engine (v0.9.2)".
    (lazy_compile(rf"\bvLLM API server version {_RELEASE_TEXT}"), "vllm"),
    (lazy_compile(rf"\bInitializing an? (?:V\d )?LLM engine \({_RELEASE_TEXT}\)"), "vllm"),
    # A pin or a freeze: "transformers==4.45.2".
    (
        lazy_compile(
            rf"(?<![\w.\-])(?P<name>[A-Za-z][\w.\-]{{0,80}}?)==\s*{_RELEASE_TEXT}(?![\w])"
        ),
        None,
    ),
    # An installed path: "site-packages/vllm-0.9.2-py3.11.egg/", "torch-2.4.0.dist-info".
    (
        lazy_compile(
            rf"[/\\](?P<name>[A-Za-z][\w.]{{0,80}}?)-{_RELEASE_TEXT}"
            r"(?=(?:-py\d[\w.\-]*)?(?:\.dist-info|\.egg-info|\.egg)?[/\\])"
        ),
        None,
    ),
    # An environment report: "- `transformers` version: 4.45.2", "PyTorch version: 2.4.0+cu121".
    (
        lazy_compile(
            rf"(?:^|[\s`(-])`?(?P<name>[A-Za-z][\w.\-]{{0,80}})`? [Vv]ersion: {_RELEASE_TEXT}",
            re.MULTILINE,
        ),
        None,
    ),
)
#: Names that texts give distributions whose PyPI name differs.
_DIST_ALIASES = {
    "pytorch": "torch",
    "huggingface-hub": "huggingface-hub",
    "hf-hub": "huggingface-hub",
}


_SEPARATORS = lazy_compile(r"[-_.]+")


def _distribution(name: str) -> str:
    normal = _SEPARATORS.sub("-", name).lower()
    return _DIST_ALIASES.get(normal, normal)


def stated_releases(text: str) -> dict[str, str]:
    """The releases that ``text`` says ran, by distribution (its PEP 503 name).

    A pasted log's own statement of what was running, where a diagnosis cannot read the
    installed metadata.

    Read from vLLM's banners (``vLLM API server version 0.9.2``, ``Initializing a V1 LLM engine
    (v0.9.2)``), pins (``transformers==4.45.2``), installed paths
    (``site-packages/vllm-0.9.2-py3.11.egg/``) and environment reports (``PyTorch version:
    2.4.0``). A distribution stated at two different releases is left out: which one ran
    cannot be told.

    >>> stated_releases("INFO 07-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.2")
    {'vllm': '0.9.2'}
    >>> stated_releases("pip install transformers==4.45.2 ... transformers==4.46.0")
    {}
    """
    from errkb.records import release_key

    found: dict[str, set[str]] = {}
    keys: dict[str, set[object]] = {}
    for pattern, dist in _STATED:
        for m in pattern.finditer(text):
            name = dist or _distribution(m["name"])
            found.setdefault(name, set()).add(m["ver"])
            keys.setdefault(name, set()).add(release_key(m["ver"]) or m["ver"])
    return {name: min(found[name]) for name in sorted(found) if len(keys[name]) == 1}


# Step 1: normalise ----------------------------------------------------------------------------

# ESC lost, the rest kept: caret notation (^[[31m), rsyslog's octal (#033[31m), escapes written
# out in JSON or source (\x1b[, \033[, \u001b[, \e[). Each becomes a real ESC, stripped below.
_LOST_ESC = lazy_compile(r"\^\[(?=[\[\]])|#033(?=\[)|\\(?:x1[bB]|033|u001[bB]|e)(?=\[)")
_ANSI = lazy_compile(
    r"\x1b\[[0-?]{0,64}[ -/]{0,8}[@-~]"  # CSI: colours, cursor moves
    r"|\x1b\][^\x07\x1b\n]{0,2048}(?:\x07|\x1b\\|\^G)?"  # OSC: titles, hyperlinks
    r"|\x1b[ -/]{0,4}[0-~]?"  # any other escape, or a lone ESC
)
# What a terminal copy keeps of a colour code whose ESC was dropped: "[31m", "[0m".
_BARE_SGR = lazy_compile(r"\[[0-9;]{1,20}m")
_CONTROLS = lazy_compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_SYSLOG_CR = lazy_compile(r"#015(?=\n|$|#012)")


def normalise(text: str) -> str:
    r"""``text`` without colour codes, their remnants and carriage returns.

    Real escape sequences and the forms they take once the ESC byte is lost (``^[[31m``,
    rsyslog's ``#033[31m`` and ``#015`` for CR, ``\x1b[`` written out) are removed; a text
    that shows colour codes with no ESC at all (``[0m``) loses those too. CRLF and lone CRs
    become line feeds; other control characters but tabs go.

    >>> normalise("^[[91mValueError^[[39m: boom#015\nnext\r\n")
    'ValueError: boom\nnext\n'
    """
    if "#033[" in text or "#015" in text:
        text = _SYSLOG_CR.sub("\r", text).replace("#011", "\t")
    text = _LOST_ESC.sub("\x1b", text)
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    if "[0m" in text or "[0;0m" in text:
        text = _BARE_SGR.sub("", text)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROLS.sub("", text)
    return _COLLAPSED.sub(_uncollapse, text) if "last): File" in text else text


# A whole traceback on one line, its line breaks lost to a paste (an issue title, a chat, a log
# that joined them with spaces): the header, then frames each followed by its source line.
_COLLAPSED = lazy_compile(
    r"^(?P<before>.*?)Traceback \(most recent call last\): (?=File \")(?P<rest>.+)$",
    re.MULTILINE,
)
_FRAME_IN_LINE = lazy_compile(r'File "[^"\n]+", line \d+(?:, in \S+)?')


def _uncollapse(m: regex.Match[str]) -> str:
    """The traceback of one line (:data:`_COLLAPSED`) laid out again as CPython prints it.

    Each frame goes on its own line with its source below it; the last frame's source ends
    where the first exception class followed by ": " starts the exception line, and a fence
    glued to its end goes on a line of its own.

    >>> print(_uncollapse(_COLLAPSED.match(
    ...     'Traceback (most recent call last): File "a.py", line 3, in f g() KeyError: 1```')))
    Traceback (most recent call last):
      File "a.py", line 3, in f
        g()
    KeyError: 1
    ```
    """
    rest = m["rest"]
    frames = list(_FRAME_IN_LINE.finditer(rest))
    lines = (
        [m["before"].rstrip(), "Traceback (most recent call last):"]
        if m["before"].strip()
        else ["Traceback (most recent call last):"]
    )
    for k, frame in enumerate(frames):
        end = frames[k + 1].start() if k + 1 < len(frames) else len(rest)
        source = rest[frame.end() : end].strip()
        lines.append("  " + frame[0])
        if k + 1 == len(frames) and (exc := _IN_LINE.search(source)):
            source, last = source[: exc.start()].strip(), source[exc.start() :].rstrip()
            fence = last.endswith(("```", "~~~"))
            lines.extend(["    " + source] * bool(source) + [last[:-3].rstrip() if fence else last])
            lines.extend([last[-3:]] * fence)
        elif source:
            lines.append("    " + source)
    return "\n".join(lines)


# Step 2: line prefixes and streams ------------------------------------------------------------

# Tags that a tool writes before every line it passes on, whatever the line says.
_TAG = lazy_compile(
    r"""
    (?P<syslog>[A-Z][a-z]{2}\ [\ \d]\d\ \d\d:\d\d:\d\d\ \S{1,200}\ [\w./-]{1,200}(?:\[\d+\])?:\ ?)
  | (?P<process>\([^()\n]{0,80}\bpid=\d+[^()\n]{0,80}\)\ ?)
  | (?P<rank>\[(?:default|rank)\d+\]:\ ?)
  | (?P<stamp>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\ )
  | (?P<quote>>(?:\ |$))
  | (?P<compose>[\w.-]{1,60}\ +\|(?:\ |$))
    """,
    re.VERBOSE,
)
# Tags that ordinary text may start with too: taken only when the next or previous line that is
# not blank carries the same tags ("> " of a quote; pytest's "> " marks one source line).
_WEAK_TAGS = ("quote", "compose")
# Log headers: the level, time and source a logger writes before each record.
_HEADER = lazy_compile(
    rf"""
    {_LEVEL}\ (?:\d{{4}}-)?\d\d-\d\d\ \d\d:\d\d:\d\d(?:[.,]\d+)?\ \[[^\]\n]{{1,200}}\]\ ?  # vLLM
  | {_LEVEL}\ \d\d-\d\d\ \d\d:\d\d:\d\d\ [\w.-]{{1,200}}:\d{{1,9}}\]\ ?  # vLLM before 0.6.4
  | [IWEF]\d{{4}}\ \d\d:\d\d:\d\d\.\d+\ +\d+\ [^\]\n]{{1,200}}\]\ ?  # glog (c10, torch.distributed)
  | {_LEVEL}:(?:[\w.-]{{1,200}}:|\ +)  # logging's default format, uvicorn
    """,
    re.VERBOSE,
)
_STAMP = lazy_compile(
    r"[\[(]?\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?[\])]?[ \t|\-:]*"
)
# After a time stamp: up to two fields, the level, and a logger name ending in ": ".
_STAMP_FIELDS = lazy_compile(
    rf"(?:[^\s\[\]|]{{1,80}}[ \t|\-]{{1,5}}){{0,2}}\[?{_LEVEL}\b\]?"
    rf"(?:[ \t](?P<name>[^\s\[\]|]{{1,120}}?)(?::|[ \t]-|[ \t]\|)(?=\s))?[ \t|\-]*"
)


class _Stream:
    """The lines of one stream, as three lists.

    ``index``: where each line is in the text; ``header``: its log header, or None; ``text``:
    the line without its tags and header.
    """

    __slots__ = ("header", "index", "text")

    def __init__(self) -> None:
        self.index: list[int] = []
        self.header: list[str | None] = []
        self.text: list[str] = []


_Tag = tuple[str, bool, int]  # (key, weak, where the tag ends)


def _streams(text: str) -> tuple[list[_Stream], list[str]]:
    """The lines of ``text`` without their tags and headers: by stream, and all in order.

    The tags (syslog's source, a process tag, a rank, a quote marker, docker compose's service)
    name the stream a line belongs to; lines that carry the same tags make one stream, so a
    vLLM engine's lines, the front end's, or a quote and the prose around it are read apart.
    What a logger writes before each record (``ERROR 11-30 14:02:11 [core.py:41] ``,
    ``2026-11-30 14:02:11,123 ERROR app: ``, ``ERROR:root:``) is taken off and kept as the
    line's header; exception-group margins (``|``) are taken off too.
    """
    raw = text.split("\n")
    tags = [_tags(line) if line else () for line in raw]
    if any(weak for found in tags for _, weak, _ in found):
        _drop_lone_weak_tags(raw, tags)
    untagged = _Stream()
    streams: dict[tuple[str, ...], _Stream] = {(): untagged}
    every: list[str] = []
    for index, (line, found) in enumerate(zip(raw, tags, strict=True)):
        stream, header, body = untagged, None, line
        if body:
            if found:
                key = tuple(k for k, _, _ in found)
                stream = streams.get(key) or streams.setdefault(key, _Stream())
                body = body[found[-1][2] :]
            header, body = _header(body)
            body = _clean(body)
        stream.index.append(index)
        stream.header.append(header)
        stream.text.append(body)
        every.append(body)
    return [s for s in streams.values() if s.index], every


def _tags(line: str) -> Sequence[_Tag]:
    """The tags at the start of ``line``, outermost first (a quote may hold a process tag)."""
    m = _TAG.match(line)
    if m is None:
        return ()
    found: list[_Tag] = []
    while m is not None and len(found) < 6:
        kind, tag, end = m.lastgroup, m.group(), m.end()
        if kind == "syslog":  # "Nov 30 14:02:11 host prog[12]: ": the source names the stream
            key = "syslog " + tag[16:].rstrip(": ")
        elif kind == "quote":
            key = ">"
        elif kind == "stamp":
            key = "stamp"
        elif kind == "compose":
            key = tag.partition(" ")[0]
        else:
            key = tag.strip()
        found.append((key, kind in _WEAK_TAGS, end))
        m = _TAG.match(line, end) if end < len(line) else None
    return found


def log_prefix(line: str) -> str:
    """What a tool and a logger wrote before the message of ``line``, as a paste's line is read.

    The tags that name a stream (syslog's source, a process tag, a rank, a time stamp) and the
    log header after them (``ERROR 11-30 14:02:11 [core.py:41] ``, ``ERROR:root:``); ``""``
    when the line has neither. A tag that ordinary text may start with too (a quote's ``> ``,
    docker compose's ``service |``) is taken in a paste only where the next or previous line
    carries it, so it ends what is taken from a line read alone. This is how ``errkb scan``
    reads a line that names no exception class: its message is what follows.

    >>> log_prefix("(EngineCore_0 pid=123) ERROR 11-30 14:02:11 [core.py:41] CUDA error: x")
    '(EngineCore_0 pid=123) ERROR 11-30 14:02:11 [core.py:41] '
    """
    end = 0
    for _, weak, tag_end in _tags(line):
        if weak:
            break
        end = tag_end
    header, _ = _header(line[end:])
    return line[: end + len(header or "")]


def _drop_lone_weak_tags(raw: Sequence[str], tags: list[Sequence[_Tag]]) -> None:
    """Keep a weak tag only where a neighbouring non-blank line carries the same tags."""
    nonblank = [i for i, line in enumerate(raw) if line.strip()]
    keys = [tuple(k for k, _, _ in tags[i]) for i in nonblank]
    for n, i in enumerate(nonblank):
        found = tags[i]
        for depth, (_, weak, _) in enumerate(found):
            if not weak:
                continue
            mine = keys[n][: depth + 1]
            before = keys[n - 1][: depth + 1] if n else None
            after = keys[n + 1][: depth + 1] if n + 1 < len(keys) else None
            if mine not in (before, after):
                tags[i] = found[:depth]
                break


def _header(body: str) -> tuple[str | None, str]:
    """``(log header, the rest)`` of a line, or ``(None, body)`` when it has none."""
    first = body[:1]
    if not (first.isupper() or first.isdigit() or first in {"[", "("}):
        return None, body
    m = _HEADER.match(body)
    if m:
        return m.group(), body[m.end() :]
    m = _STAMP.match(body)
    if m is None:
        return None, body
    end = m.end()
    fields = _STAMP_FIELDS.match(body, end)
    if fields:
        name = fields["name"]
        # "TIME ERROR ValueError: boom" has no logger name: the class is the message's.
        end = fields.start("name") if name and _looks_like_class(name) else fields.end()
    return body[:end], body[end:]


# Exception groups: Python prints members behind "|" margins, between "+---- 1 ----" lines.
_MARGIN = lazy_compile(r"^(?:[ \t]*\|[ ]?)+|^[ \t]*\+ (?=Exception Group Traceback)")
_SEP = "\x00member"
_SEPARATOR = lazy_compile(r"^[ \t]*\+[-+]*(?: ?(?:\d+|\.\.\.) [-+ ]*.*)?$")


def _clean(line: str) -> str:
    """A line without exception-group margins; separator lines become a marker."""
    if line[:1] not in " \t|+":
        return line
    if _SEPARATOR.match(line) and "|" not in line:
        return _SEP
    return _MARGIN.sub("", line) if _MARGIN.match(line) else line


# Step 3: reading a stream ---------------------------------------------------------------------

# A header may follow a Markdown fence on its line ("```Traceback ..."); a frame may have lost
# its indent in a paste.
_TRACEBACK = lazy_compile(
    r"^\s*(?:```\w*\s*)?(?:Exception Group )?Traceback \(most recent call last\):\s*$"
)
_FRAME = lazy_compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')
_CHAIN = (
    "The above exception was the direct cause of the following exception:",
    "During handling of the above exception, another exception occurred:",
)
# IPython and Jupyter: a rule, "ValueError     Traceback (most recent call last)", then frames
# as "Cell In[5], line 3" or "File /path/x.py:12, in f(a, b)" (8.0-8.3: "Input In [5], in
# <cell line: 3>()"; 7.x: "/path/x.py in f(a, b)" with the line on the "---> 12" arrow).
_IPY_RULE = lazy_compile(r"^-{20,}\s*$")
_IPY_HEADER = lazy_compile(rf"^(?P<cls>{_CLASS})[ \t]{{2,}}Traceback \(most recent call last\)\s*$")
_IPY_FILE = lazy_compile(r"^File (?P<file>[^\n]+?):(?P<line>\d+), in (?P<func>[^\s(]+)")
_IPY_CELL = lazy_compile(r"^Cell In ?\[(?P<cell>\d+)\], line (?P<line>\d+)")
_IPY_INPUT = lazy_compile(r"^Input In ?\[(?P<cell>\d+)\], in (?P<func><[^>\n]*>|[^\s(]+)")
_IPY_OLD = lazy_compile(
    r"^(?P<file><ipython-input-[^>\s]+>|(?:~|/|[A-Za-z]:\\)[^\n]*?) in (?P<func>[\w.<>]+)(?:\(.*\))?\s*$"
)
_CELL_LINE = lazy_compile(r"line: (\d+)>")  # "<cell line: 3>", IPython 8.0-8.3
_IPY_ARROW = lazy_compile(r"^-+> ?(?P<line>\d+)")
# rich: a box from "╭─── Traceback (most recent call last) ───╮" to "╰───╯", frames as
# "│ /path/x.py:12 in f │" (wrapped over lines when long), the message below it wrapped at the
# terminal width with a space left at the end of each wrapped line.
_RICH_TOP = lazy_compile(r"^╭─+ ?Traceback \(most recent call last\) ?─+╮\s*$")
_RICH_FRAME = lazy_compile(r"^(?P<file>[^\n]+?):(?P<line>\d+) in (?P<func>\S+)$")
# pytest: "E   " before each line of the message; frames as "path.py:12: in f" (short) or a
# "path.py:12: " line after each frame's source (long), "path.py:12: ValueError" last.
_E_LINE = lazy_compile(r"^E(?:[ \t]{2,}|[ \t]*$)")
_LOCATION = lazy_compile(
    r"^(?P<file>(?:[A-Za-z]:[\\/])?[^\s:][^:\n]*?):(?P<line>\d+):"
    rf"(?: in (?P<func>\S+)| (?P<cls>{_CLASS})(?::.*)?)?[ \t]*$"
)
_TEST_HEADER = lazy_compile(r"^_{3,} .+ _{3,}\s*$")
_SUMMARY = lazy_compile(rf"^(?:FAILED|ERROR) [^\n]+? - (?P<cls>{_CLASS}): (?P<msg>.*)$")
# Lines that end a message: a banner ("==== short test summary info ===="), a fence, and after
# a blank line, a prompt, a heading, a rule or another "Class: message".
_BANNER = lazy_compile(r"^([=_\-~*#])\1{2,} .*\S.* \1{3,}\s*$")
_FENCE = lazy_compile(r"^\s*(?:```|~~~)")
# Lines that resume after an error without a blank line: the interpreter's or PowerShell's
# prompt, and the line CPython prints above a report of its own (multiprocessing's "Process
# SpawnProcess-1:", threading's "Exception in thread Thread-2:", a failing sys.excepthook's, an
# error in a finaliser: "Exception ignored in: <function f>", Python 2's "Exception NameError: ...
# ignored").
_RESUMES = lazy_compile(
    r"^(?:>>>(?: |$)|PS [A-Za-z]:\\[^>\n]{0,400}>(?: |$)|Process [\w-]{1,80}:$"
    r"|Exception in thread [^\n]{1,200}:$|Error in sys\.excepthook:$|Original exception was:$"
    r"|Exception ignored in: |Exception [\w.]{1,200}: )"
)
# tqdm's progress bar: "Steps:   0%|          | 0/800 [00:04<?, ?it/s]".
_PROGRESS = lazy_compile(r"^[^|\n]{0,200}?\d{1,3}%\|[^|\n]*\|\s*\d+(?:\.\d+)?[kMG]?/")
# A line of dashes alone, at any indent.
_DASHES = lazy_compile(r"^[ \t]*-{20,}[ \t]*$")
_AFTER_BLANK = lazy_compile(
    r"^(?:\$ |>>> |In \[\d+\]: |#{1,6} |[ \t]*(?:-{20,}|={20,})\s*$|Process finished with exit code)"
)

_Found = tuple[int, ParsedException]


class _Reader:
    """The exceptions of one stream (step 3); each public method a way of reading it."""

    def __init__(self, stream: _Stream) -> None:
        self.text, self.header, self.index = stream.text, stream.header, stream.index
        self._summaries: list[_Found] = []
        # For each line, the first line at or after it that is not blank (len(text) if none).
        n = len(self.text)
        self._next = [n] * n
        following = n
        for i in range(n - 1, -1, -1):
            line = self.text[i]
            if line and not line.isspace():
                following = i
            self._next[i] = following

    def tracebacks(self) -> Iterator[_Found]:
        """The exceptions of the tracebacks in the stream: CPython's, IPython's, rich's, pytest's.

        Each exception's class is read at the start of the line that ends its traceback, and
        nowhere else; its frames are those listed since the traceback began. pytest's summary
        lines are kept for :meth:`summaries` on the way.
        """
        lines, n = self.text, len(self.text)
        frames: list[ParsedFrame] = []
        pending: list[ParsedFrame] = []  # pytest's location lines since its test's header
        in_traceback = wrapped = chained = False
        i = 0
        while i < n:
            text = lines[i]
            if not text or text.isspace():
                i += 1
                continue
            first = text[0]
            mark = "(most recent call last)" in text
            if text == _SEP:  # a member of an exception group: printed with or without frames
                in_traceback, wrapped, frames, chained = True, False, [], True
            elif mark and _TRACEBACK.match(text):
                in_traceback, wrapped, frames = True, False, []
            elif "above exception" in text and text.strip() in _CHAIN:
                in_traceback, chained = False, True
            elif mark and first == "╭" and _RICH_TOP.match(text):
                frames, i = self._rich_box(i)
                in_traceback, wrapped = True, True
                continue
            elif mark and _IPY_HEADER.match(text):
                in_traceback, wrapped, frames = True, False, []
            elif first == "E" and _E_LINE.match(text):
                found, i = self._pytest(i, pending, chained)
                if found:
                    yield found
                    pending, chained = [], False
                continue
            elif (in_traceback or first in " F") and (frame := _frame(text, frames)) is not None:
                # A frame outside a traceback starts one: a paste that begins below the header.
                frames = frames if in_traceback else []
                in_traceback = True
                if frame is not _ARROW:
                    frames.append(frame)
            elif in_traceback and (head := _exception_line(text)):
                if head[0] not in _LEVELS:
                    message, end = self._message(i, head[1], wrapped=wrapped)
                    exc = ParsedException(
                        class_name=head[0],
                        message=message,
                        frames=tuple(frames),
                        chained=chained,
                    )
                    yield self.index[i], exc
                    in_traceback = chained = False
                    frames = []
                    i = end
                    continue
            else:
                pending = self._pytest_report(i, pending)
            i += 1

    def _pytest_report(self, i: int, pending: list[ParsedFrame]) -> list[ParsedFrame]:
        """Read line ``i`` as a line of pytest's report; the test's location lines so far.

        Location lines gather in ``pending`` until a test's header or a banner; summary lines
        are kept for :meth:`summaries`.
        """
        text = self.text[i]
        first = text[0]
        if (first == "_" and _TEST_HEADER.match(text)) or (first == "=" and _BANNER.match(text)):
            return []
        if (location := _LOCATION.match(text)) is not None:
            pending.append(_located(location))
        elif first in {"F", "E"} and (summary := _SUMMARY.match(text)):
            message = summary["msg"].rstrip().removesuffix("...")  # pytest cut it
            exc = ParsedException(class_name=summary["cls"], message=message)
            self._summaries.append((self.index[i], exc))
        return pending

    def summaries(self) -> list[_Found]:
        """Pytest's short summary lines, ``FAILED t.py::test - ValueError: message...``.

        The message is cut at the terminal's width; pytest's ``...`` is taken off, so the
        matcher sees a message that ends early. Used only when no traceback was found.
        """
        return self._summaries

    def bare(self) -> Iterator[_Found]:
        """``Class: message`` lines: each opens an exception, wherever it is.

        The class must look like an exception's (``ValueError``, ``torch.OutOfMemoryError``);
        the line may be indented, numbered, bulleted or inside Markdown's code or bold marks.
        The lines before it (a source line, a warning, a log record, a caret line) are not part
        of it: a paste cut below its traceback's header keeps its class. A class that does not
        look like one at the start of a line inside a message (NCCL's ``ncclSystemError: ...``
        below ``NCCL error in: ...``) is part of that message.
        """
        lines, n = self.text, len(self.text)
        i = self._next[0] if n else 0
        while i < n:
            head = _opening(lines[i])
            if head is not None:
                message, end = self._message(i, head[1], wrapped=False)
                yield self.index[i], ParsedException(class_name=head[0], message=message)
                i = end
                continue
            i = self._next[i + 1] if i + 1 < n else n

    def inline(self) -> Iterator[_Found]:
        """A class named after other words on the first line of a record, else on any line.

        ``ray::f() (pid=1, ip=10.0.0.5) ValueError: ...``, or prose that quotes the error
        (``this produces `OSError: No such device` ``): read only when nothing else gives a
        class, so a class inside a message never hides the one that starts it.
        """
        lines, n = self.text, len(self.text)
        for anywhere in (False, True):
            i = self._next[0] if n else 0
            while i < n:
                if anywhere or self._starts_record(i):
                    cls, rest = class_at(lines[i])
                    if cls is not None and (not anywhere or _looks_like_class(cls)):
                        message, _ = self._message(i, rest, wrapped=False)
                        yield self.index[i], ParsedException(class_name=cls, message=message)
                        return
                i = self._next[i + 1] if i + 1 < n else n

    def _starts_record(self, i: int) -> bool:
        """Whether line ``i`` (not blank) starts a record: see :meth:`bare`."""
        if i == 0 or self._next[i - 1] == i:  # the first line, or one after a blank line
            return True
        before, header = self.header[i - 1], self.header[i]
        if header == before:
            return False
        if header is None:  # a bare line after a header: the record goes on, unless it repeats
            return i >= 2 and self.header[i - 2] == before
        return True

    def _message(self, i: int, first: str, *, wrapped: bool) -> tuple[str, int]:
        """The message that starts with ``first`` on line ``i``, and the line after its end.

        A message goes on over the lines below it until a new log record (a different header;
        for a logger that repeats its header on every line, any line without it), a traceback,
        a chain line, an exception group's separator, a banner or a fence; a blank line ends it
        when what follows would end it, or is a prompt, a heading, a rule, another "Class:
        message" line, pytest's location line, or nothing. rich's wrapped lines (``wrapped``)
        are joined back where they end with a space.
        """
        lines, n = self.text, len(self.text)
        header = self.header[i]
        repeats = header is not None and i > 0 and self.header[i - 1] == header
        parts = [first]
        j = i + 1
        while j < n:
            k = self._next[j]
            if k != j:  # blank lines
                if k >= n or self._ends(k, header, repeats) or _ends_after_blank(lines[k]):
                    break
                parts.extend("" for _ in range(k - j))
                j = k
                continue
            if self._ends(j, header, repeats):
                break
            if wrapped and parts[-1].endswith(" "):
                parts[-1] += lines[j]
            else:
                parts.append(lines[j])
            j += 1
        if not wrapped and header is None and _hard_wrapped(lines[i], parts):
            return "".join(parts), j
        return "\n".join(parts).strip("\n"), j

    def _ends(self, j: int, header: str | None, repeats: bool) -> bool:
        """Whether line ``j`` (not blank) ends a message whose first line has ``header``."""
        if self.header[j] != header and (self.header[j] is not None or repeats):
            return True
        text = self.text[j]
        first = text[0]
        mark = "(most recent call last)" in text
        if text == _SEP or ("above exception" in text and text.strip() in _CHAIN):
            return True
        if mark and (_TRACEBACK.match(text) or _RICH_TOP.match(text) or _IPY_HEADER.match(text)):
            return True
        if (  # IPython's rule above its next header
            first == "-"
            and _IPY_RULE.match(text)
            and j + 1 < len(self.text)
            and _IPY_HEADER.match(self.text[j + 1])
        ):
            return True
        if first in "- \t" and _DASHES.match(text):
            # A rule that closes the output the message was part of (pip's line of dashes
            # below a build's output): it ends the message when what follows it would.
            k = self._next[j + 1] if j + 1 < len(self.text) else len(self.text)
            return k >= len(self.text) or (
                not _DASHES.match(self.text[k]) and self._ends(k, header, repeats)
            )
        if first in "=_-~*#" and _BANNER.match(text):
            return True
        if "%|" in text and _PROGRESS.match(text):  # tqdm's bar: the program went on
            return True
        if text.startswith('  File "') and _FRAME.match(text):
            # A frame where CPython prints one: a traceback goes on below a message (Ray's
            # wrapper prints its task's frames so). Deeper ones are the message's own text
            # (torchrun's summary holds the failed rank's traceback, indented).
            return True
        if not first.isspace() and _opening(text) is not None:  # the next exception
            return True
        if first in ">PEO" and _RESUMES.match(text):  # the prompt again, or another report
            return True
        return ("```" in text or "~~~" in text) and bool(_FENCE.match(text))

    def _rich_box(self, i: int) -> tuple[list[ParsedFrame], int]:
        """The frames of the rich box that starts on line ``i``, and the line after the box."""
        lines, n = self.text, len(self.text)
        width = len(lines[i].rstrip()) - 4  # "│ " and " │" around the text
        frames: list[ParsedFrame] = []
        parts: list[str] = []
        j = i + 1
        while j < n:
            text = lines[j].rstrip()
            if not text.startswith("│"):
                j += text.startswith("╰")
                break
            inner = text[1:-1] if len(text) > 1 and text.endswith("│") else text[1:]
            inner = inner.removeprefix(" ")
            if inner[:1].strip() and inner[:1] not in "❱│╭╰" and not inner.startswith("..."):
                parts.append(inner.rstrip())  # a frame's header, or a piece of a wrapped one
            elif parts:
                frame = _rich_frame(parts, width)
                frames.extend([frame] if frame else [])
                parts = []
            j += 1
        if parts and (frame := _rich_frame(parts, width)):
            frames.append(frame)
        return frames, j

    def _pytest(
        self, i: int, pending: list[ParsedFrame], chained: bool
    ) -> tuple[_Found | None, int]:
        """The exception of pytest's ``E`` lines from line ``i``, and the line after them.

        The message is the ``E`` lines without the ``E`` and their common indent; the class is
        the first line's, else the one on the location line below (``x.py:7: AssertionError``),
        which is also the last frame.
        """
        lines, n = self.text, len(self.text)
        j = i
        body: list[str] = []
        while j < n and lines[j][:1] == "E" and _E_LINE.match(lines[j]):
            body.append(lines[j][1:].rstrip())
            j += 1
        indent = min((len(b) - len(b.lstrip()) for b in body if b), default=0)
        body = [b[indent:] for b in body]
        frames = list(pending)
        cls: str | None = None
        k = self._next[j] if j < n else n
        if k < n and k - j <= 1 and (location := _LOCATION.match(lines[k])):
            frames.append(_located(location))
            cls = location["cls"]
            j = k + 1
        head = _AFTER_TRACEBACK.match(body[0]) if body else None
        if head and head["msg"] is not None and head["cls"] not in _LEVELS:
            cls, body[0] = head["cls"], head["msg"]
        if cls is None:
            return None, j
        exc = ParsedException(
            class_name=cls,
            message="\n".join(body).strip("\n"),
            frames=tuple(frames),
            chained=chained,
        )
        return (self.index[i], exc), j


#: The narrowest width at which a message's lines are read as a hard wrap (see _hard_wrapped).
_HARD_WRAP = 40


def _hard_wrapped(opening: str, parts: Sequence[str]) -> bool:
    """Whether a message's lines are one line cut at a fixed width, words and figures split.

    What a fixed-width log, ``fold`` or a terminal that does not know its own wraps gives:
    every line but the last exactly as wide (two such lines at least, the first counted with
    the class before the message), none narrower than :data:`_HARD_WRAP`, the last no wider.
    Such lines are joined back as they were, with nothing between them.
    """
    if len(parts) < 3 or not all(parts):
        return False
    widths = {len(opening), *(len(p) for p in parts[1:-1])}
    width = max(widths)
    return len(widths) == 1 and width >= _HARD_WRAP and len(parts[-1]) <= width


def _exception_line(text: str) -> tuple[str, str] | None:
    """The class and message of the line that ends a traceback, if ``text`` is one.

    At the line's start any name counts (``KeyboardInterrupt``, ``MyFailure: x``); indented (a
    paste that indented the whole traceback but its header) only an exception-like name with a
    message, so that a frame's source line is never read as one.
    """
    if text[:1].isalpha():
        head = _AFTER_TRACEBACK.match(text)
        return (head["cls"], head["msg"] or "") if head else None
    return _opening(text.lstrip()) if text[:1] in " \t" else None


def _ends_after_blank(text: str) -> bool:
    """Whether ``text``, after a blank line, is not more of the message above."""
    if _AFTER_BLANK.match(text) or _LOCATION.match(text):
        return True
    head = _AFTER_TRACEBACK.match(text)
    return bool(head and head["msg"] is not None and _looks_like_class(head["cls"]))


_ARROW = ParsedFrame(file="", line=0, function=None)
#: The most digits a frame's line number is read with; a longer one is no line of a file
#: (and past 4,300 digits ``int()`` refuses it): the frame is kept, its line unknown (0).
_MAX_LINE_DIGITS = 9


def _line(digits: str) -> int:
    """A frame's line number, or 0 (unknown) for one of more than nine digits."""
    return int(digits) if len(digits) <= _MAX_LINE_DIGITS else 0


def _frame(text: str, frames: list[ParsedFrame]) -> ParsedFrame | None:
    """The frame a line of a CPython or IPython traceback names, if any.

    IPython 7's frames name their line on the "---> 12" arrow below them: that line fills in
    the last frame, and :data:`_ARROW` says the line was read.
    """
    first = text[:1]
    if first in " \tF" and (m := _FRAME.match(text)):
        return ParsedFrame(file=m["file"], line=_line(m["line"]), function=m["func"])
    if first == "F" and (m := _IPY_FILE.match(text)):
        return ParsedFrame(file=m["file"], line=_line(m["line"]), function=m["func"])
    if first == "C" and (m := _IPY_CELL.match(text)):
        return ParsedFrame(file=f"Cell In[{m['cell']}]", line=_line(m["line"]), function=None)
    if first == "I" and (m := _IPY_INPUT.match(text)):
        line = _CELL_LINE.search(m["func"])
        return ParsedFrame(
            file=f"Input In [{m['cell']}]",
            line=_line(line[1]) if line else 0,
            function=m["func"],
        )
    old = first in "<~/" or (first.isalpha() and text[1:3] == ":\\")
    if old and (m := _IPY_OLD.match(text)):
        return ParsedFrame(file=m["file"], line=0, function=m["func"])
    if first == "-" and frames and frames[-1].line == 0 and (m := _IPY_ARROW.match(text)):
        frames[-1] = attrs.evolve(frames[-1], line=_line(m["line"]))
        return _ARROW
    return None


def _rich_frame(parts: list[str], width: int) -> ParsedFrame | None:
    """The frame of a rich frame header, given as the pieces rich wrapped it into.

    rich folds a word that does not fit (the piece fills the width: joined as is) and
    breaks elsewhere at a space (joined with one); when that reading fails, each other join is
    tried.
    """
    if sum(len(p) for p in parts) > 4096:
        return None
    guess = parts[0]
    for before, part in itertools.pairwise(parts):
        guess += ("" if len(before) >= width else " ") + part
    candidates = [guess]
    if 1 < len(parts) <= 5:
        for mask in range(1 << (len(parts) - 1)):
            joined = parts[0]
            for bit, part in enumerate(parts[1:]):
                joined += (" " if mask >> bit & 1 else "") + part
            candidates.append(joined)
    for candidate in candidates:
        if m := _RICH_FRAME.match(candidate):
            return ParsedFrame(file=m["file"], line=_line(m["line"]), function=m["func"])
    return None


def _located(m: regex.Match[str]) -> ParsedFrame:
    return ParsedFrame(file=m["file"], line=_line(m["line"]), function=m["func"])


def _looks_like_class(name: str) -> bool:
    last = name.rpartition(".")[2]
    return last[:1].isupper() and last.endswith(_SUFFIXES)
