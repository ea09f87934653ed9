"""Compiling and running record patterns: one place for the regex flags, cache and timeout.

Patterns come from records, which are untrusted data: every search runs with a timeout, and
nothing here does more with a pattern than compile and search it.
"""

from __future__ import annotations

import functools
import re
import sys
import threading
from typing import TYPE_CHECKING, NamedTuple

from errkb import _lazy_regex
from errkb._lazy_regex import engine, lazy_compile, lazy_re

try:  # the C unpickler alone: importing pickle's Python module costs 3.5 ms of a first diagnosis
    from _pickle import Unpickler, UnpicklingError
except ImportError:  # an interpreter without it
    from pickle import Unpickler, UnpicklingError

if TYPE_CHECKING:
    from array import array
    from collections.abc import Iterable, Iterator, Mapping
    from pathlib import Path

    import regex

__all__ = [
    "DEFAULT_TIMEOUT",
    "EDGE",
    "CutChain",
    "PatternTimeoutError",
    "best_set",
    "compile_pattern",
    "cut_chain",
    "cut_pattern",
    "fill_template",
    "head_pattern",
    "key_sets",
    "know_facts",
    "know_newline",
    "know_sets",
    "known_newline",
    "lazy_compile",
    "loosen",
    "may_end_inside",
    "own_compiled",
    "own_compiled_path",
    "own_keys",
    "pattern_facts",
    "read_compiled",
    "required_literals",
    "search",
    "search_prefix",
    "specificity",
    "template_names",
    "use_compiled",
    "write_compiled",
    "write_own_compiled",
]

#: Seconds one pattern may spend on one message before it is given up. A real pattern takes
#: microseconds; a catastrophic one takes seconds or forever. The margin is wide because the
#: timeout is wall-clock time, which other busy threads stretch.
DEFAULT_TIMEOUT = 0.25


class PatternTimeoutError(TimeoutError):
    """A pattern ran past its timeout on a message."""


@functools.cache
def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """Compile a record's ``messagePattern`` once; raises ``regex.error`` when it is invalid.

    A pattern a file of compiled patterns holds (see :func:`use_compiled`) is taken from it:
    ``regex`` compiles in Python, about a millisecond a pattern, and a first diagnosis or a
    scan would otherwise compile a hundred. ``regex``'s Python half is imported only for a
    pattern the file does not hold (see :func:`errkb._lazy_regex.engine`).
    """
    if _compiled_files:
        _load_compiled()
    pickled = _find(_compiled, _key(pattern)) if _compiled else None
    found = _unpickle(pickled) if pickled is not None else None
    if found is not None:
        return found
    import regex

    return regex.compile(loosen(pattern))


# What a record writes as whitespace: a space, a newline, a tab (or one of them escaped).
_SPACE_ESCAPES = frozenset({"\\ ", "\\n", "\\t", "\\r"})
_SPACES = re.compile(r"[ \n\t\r]+")
_WHITESPACE = frozenset(" \n\t\r")


def loosen(pattern: str) -> str:
    r"""``pattern`` loosened for what a paste does to a message, to search pasted text with.

    A record writes a message as its library prints it; a paste wraps it (a terminal, an issue
    renderer, an editor's hard wrap), collapses double spaces, breaks a figure from its unit
    across lines, and a Markdown renderer drops the backticks of inline code. Every run of
    spaces, newlines and tabs the pattern requires becomes ``\s+`` (``\s*`` where the run was
    optional), and a literal backtick becomes optional; character classes, escapes and the
    rest are kept. A verbose pattern (``(?x)``, whose whitespace means nothing) is returned as
    it is. The literal analysis (:func:`literal_sets`) reads backticks as optional too.
    """
    if not _SPACES.search(pattern) and "\\" not in pattern and "`" not in pattern:
        return pattern
    if any("x" in flags.group()[2:] for flags in _FLAG_GROUP.finditer(pattern)):
        return pattern
    out: list[str] = []
    run: list[str] = []  # the pending whitespace, one entry a character, as the pattern wrote it

    def flush(*, edge: bool = False) -> None:
        if run:
            # At either end of the pattern the run is optional: a message's text is often
            # stripped (a log line, str() of a triple-quoted message, a paste).
            out.append("\\s*" if edge or not out else "\\s+")
            run.clear()

    tokens = [(t.lastgroup, t.group()) for t in _TOKEN.finditer(pattern)]
    for i, (kind, text) in enumerate(tokens):
        quantified = i + 1 < len(tokens) and tokens[i + 1][0] == "quant"
        if kind == "lit":
            start = 0
            for space in _SPACES.finditer(text):
                if space.start() > start:
                    flush()
                    out.append(_ticks(text[start : space.start()], quantified=False))
                run.extend(space.group())
                start = space.end()
            if start < len(text):
                flush()
                out.append(_ticks(text[start:], quantified=quantified))
        elif kind == "esc" and (text in _SPACE_ESCAPES or text[1:] in _WHITESPACE):
            run.append(text)  # \n, or a newline escaped as re.escape writes one
        elif kind == "esc" and text == "\\`" and not quantified:
            flush()
            out.append(_TICK_LOOSE)
        elif kind == "quant" and run:
            # The quantifier binds the run's last character only: the rest stays required.
            if text[0] == "{":
                out.extend(run)  # a counted run: kept exactly as written
                out.append(text)
            else:
                optional = text[0] in "?*" and len(run) == 1
                out.append("\\s*" if optional else "\\s+")
            run.clear()
        else:
            flush()
            out.append(text)
    flush(edge=True)
    return "".join(out)


#: A backtick, or none where none joins two word characters: inline code set off from its text
#: (``increasing `gpu_memory_utilization` or``) reads the same once a renderer drops its marks,
#: and the index files such a name as a whole word (see :data:`_TICK`).
_TICK_LOOSE = r"(?:`|(?<!\w)|(?!\w))"


def _ticks(text: str, *, quantified: bool) -> str:
    """Literal text with each backtick optional; a last one a quantifier binds is left alone."""
    if "`" not in text:
        return text
    if quantified and text.endswith("`"):
        return text[:-1].replace("`", _TICK_LOOSE) + "`"
    return text.replace("`", _TICK_LOOSE)


#: The format of a file of compiled patterns (:func:`write_compiled`).
COMPILED_FORMAT = "errkb.compiled/6"

#: A pattern's compiled form as a file holds it: pickled, then deflated with the file's own
#: dictionary (the first item), each on its own so that a process inflates only what it uses.
_Packed = tuple[bytes, bytes]

_compiled: list[_File] = []  # the files use_compiled was given, read: the latest first
_compiled_files: list[Path] = []  # given to use_compiled, not read yet
_compiled_lock = threading.Lock()


def use_compiled(path: Path) -> None:
    """Have :func:`compile_pattern` take the patterns of the file at ``path`` from it.

    The file is read when a pattern is first compiled; one that another ``regex`` release (or
    byte order) wrote, or that cannot be read, is passed over: its patterns are compiled as
    usual.
    """
    with _compiled_lock:
        _compiled_files.append(path)


def _load_compiled() -> None:
    with _compiled_lock:
        while _compiled_files:
            loaded = _read_pickled(_compiled_files.pop())
            if loaded is not None:
                _compiled.insert(0, loaded)


def _regex_stamp() -> str:
    """What the compiled form of a pattern depends on: the ``regex`` release and the machine.

    The release is read from ``regex`` when it is imported, else from its installed metadata
    (the same string), so that reading the file does not import it (:func:`engine`).
    """
    loaded = sys.modules.get("regex")
    release = getattr(loaded, "__version__", None)
    if release is None:
        from errkb._dists import version

        release = version("regex")
    if release is None:
        import regex

        release = regex.__version__
    code = engine()
    return (
        f"{release} {getattr(code, 'MAGIC', '?')} {getattr(code, 'CODE_SIZE', '?')} {sys.byteorder}"
    )


def write_compiled(path: Path, patterns: Iterable[str]) -> int:
    """Write ``patterns`` (those that compile), compiled, to ``path``; returns how many.

    The file is a JSON header line (its format, the ``regex`` stamp, a CRC of the patterns'
    texts) and then, pickled: a deflate dictionary (:func:`_dictionary`), each pattern's name
    (:func:`_key`), and each one's compiled form (:func:`loosen`'s, as ``regex`` pickles it:
    its own compiled code, which loads without compiling again), pickled and deflated on its
    own with the dictionary, so that a process inflates and unpickles only the patterns it
    uses (a few microseconds each), and the installed package stays within its size budget.
    """
    return _write_pickled(path, ((p, _compiled_or_none(loosen(p))) for p in sorted(set(patterns))))


#: The file of errkb's own patterns (:func:`errkb._lazy_regex.lazy_compile`), compiled as
#: regex compiles them, beside this module: a command that compiles thirty of them spends
#: twenty milliseconds. Written by the ``records`` session (:func:`write_own_compiled`),
#: checked current by a test.
OWN_COMPILED = "_own_patterns.compiled"

_own: list[_File] | None = None  # the file, read when a pattern is first asked for


def own_compiled_path() -> Path:
    """Where :data:`OWN_COMPILED` is: beside this module."""
    from pathlib import Path

    return Path(__file__).with_name(OWN_COMPILED)


def _own_key(pattern: str, flags: int) -> str:
    # By the flags' number: re's and regex's flag objects print differently ("re.VERBOSE",
    # "regex.X") and mean the same.
    return f"{int(flags)}:{pattern}"


def own_compiled(pattern: str, flags: int) -> regex.Pattern[str] | None:
    """``pattern`` compiled with ``flags``, from :data:`OWN_COMPILED`; None: not there."""
    global _own  # noqa: PLW0603 - the file is read once a process
    if _own is None:
        with _compiled_lock:
            if _own is None:
                loaded = _read_pickled(own_compiled_path())
                _own = [] if loaded is None else [loaded]
    pickled = _find(_own, _key(_own_key(pattern, flags)))
    return _unpickle(pickled) if pickled is not None else None


def own_keys(patterns: Iterable[tuple[str, int]]) -> set[str]:
    """How :data:`OWN_COMPILED` names each of ``patterns`` (pattern and flags)."""
    return {_own_key(pattern, flags) for pattern, flags in patterns}


def write_own_compiled(path: Path | None = None) -> int:
    """Write every pattern errkb's modules make with ``lazy_compile``, compiled, to ``path``.

    Every module of errkb is imported first, but those that need what this environment lacks
    (an extra's package: their patterns are compiled as usual, as is a pattern made inside a
    function when it runs); the records session installs what they need. The file is as
    :func:`write_compiled`'s, each pattern named with its flags (:func:`own_keys`) and
    compiled as written, not loosened. Returns how many. ``path``: :func:`own_compiled_path`
    when not given.
    """
    import importlib
    import pkgutil

    import regex

    from errkb._lazy_regex import own_patterns

    package = own_compiled_path().parent  # errkb's folder: every module of it, by name
    for module in pkgutil.walk_packages([str(package)], "errkb."):
        if module.name.endswith("__main__"):  # which would run the command line
            continue
        try:
            importlib.import_module(module.name)
        except ModuleNotFoundError as exc:  # an extra's module (pytest's plugin, the server)
            if (exc.name or "errkb").partition(".")[0] == "errkb":
                raise
    pairs = [
        (_own_key(pattern, flags), regex.compile(pattern, flags))
        for pattern, flags in sorted(set(own_patterns()))
    ]
    return _write_pickled(path or own_compiled_path(), pairs)


def _write_pickled(path: Path, pairs: Iterable[tuple[str, regex.Pattern[str] | None]]) -> int:
    import itertools
    import json
    import pickle
    from array import array

    pickled = [(p, pickle.dumps(c, protocol=4)) for p, c in pairs if c is not None]
    dictionary = _dictionary([data for _, data in pickled])
    names = [_key(p) for p, _ in pickled]
    if len(set(names)) != len(names):  # odds of 1 in 10^12 (_key), refused rather than met
        raise ValueError("two patterns have the same digest: another _KEY is needed")
    keys = b"".join(names)
    header = {
        "format": COMPILED_FORMAT,
        "regex": _regex_stamp(),
        "crc": patterns_crc(p for p, _ in pickled),
        "count": len(pickled),
    }
    # Each pattern named by a digest of its text: its text would be a third of the file and
    # two thirds of the time a process takes to read it. The packed forms are one run of bytes
    # with where each starts: reading the file makes four objects, not one a pattern.
    packed = [_deflate(data, dictionary) for _, data in pickled]
    starts = array("I", itertools.accumulate(map(len, packed), initial=0))
    body = (dictionary, keys, starts.tobytes(), b"".join(packed))
    path.write_bytes(json.dumps(header).encode() + b"\n" + pickle.dumps(body, protocol=4))
    return len(pickled)


#: The most a deflate dictionary holds (its window).
_DICTIONARY = 1 << 15


def _dictionary(pickled: list[bytes]) -> bytes:
    """What the compiled patterns share, for deflating each of them alone.

    A compiled pattern is a few hundred bytes of pickled code, too short for deflate to find
    much to repeat in it alone; with a dictionary of such code it finds the common runs there.
    Evenly spaced ones of ``pickled`` (in its order, the patterns'), so that it is the same for
    the same patterns: up to 32 KiB, and an eighth of them, since the file holds it too. A
    quarter of the size of deflating each alone (records/patterns.compiled).
    """
    total = sum(map(len, pickled))
    size = min(_DICTIONARY, total // 8)
    if not size:
        return b""
    return b"".join(pickled[:: max(1, total // size)])[-size:]


def _deflate(data: bytes, dictionary: bytes) -> bytes:
    import zlib

    packer = zlib.compressobj(9, zlib.DEFLATED, -15, 9, zlib.Z_DEFAULT_STRATEGY, dictionary)
    return packer.compress(data) + packer.flush()


def _inflate(data: bytes, dictionary: bytes) -> bytes:
    """What :func:`_deflate` deflated; raises ``zlib.error`` where it is not that."""
    import zlib

    unpacker = zlib.decompressobj(-15, dictionary)
    return unpacker.decompress(data) + unpacker.flush()


def _compiled_or_none(pattern: str) -> regex.Pattern[str] | None:
    import regex

    try:
        return regex.compile(pattern)
    except (regex.error, RecursionError, OverflowError):
        return None


def patterns_crc(patterns: Iterable[str]) -> str:
    """A CRC of a set of patterns: tells whether a file of compiled ones holds these."""
    import zlib

    digest = 0
    for pattern in sorted(set(patterns)):
        digest = zlib.crc32(pattern.encode("utf-8", "surrogatepass") + b"\0", digest)
    return f"{digest:08x}"


def read_compiled(path: Path, patterns: Iterable[str]) -> dict[str, regex.Pattern[str]] | None:
    """Those of ``patterns`` the file at ``path`` holds (see :func:`write_compiled`), compiled.

    ``None`` when there is no such file, when this ``regex`` did not write it, or when it is
    not one. Only ``regex``'s own compile is called to load it: the file holds no other code.
    """
    file = _read_pickled(path)
    if file is None:
        return None
    found = {p: _find([file], _key(p)) for p in patterns}
    loaded = {p: _unpickle(data) for p, data in found.items() if data is not None}
    return {pattern: compiled for pattern, compiled in loaded.items() if compiled is not None}


#: The bytes of a pattern's name in a file of compiled patterns (:func:`_key`).
_KEY = 8


def _key(pattern: str) -> bytes:
    """The name of ``pattern`` in a file of compiled patterns: a 64-bit BLAKE2 digest of it.

    A collision among a file's few thousand patterns has odds of about 1 in 10^12, and a file
    where two patterns would share a name is not written (:func:`_write_pickled`).
    """
    try:
        from _blake2 import blake2b  # what hashlib's is, without hashlib's import
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import blake2b

    return blake2b(pattern.encode("utf-8", "surrogatepass"), digest_size=_KEY).digest()


class _File(NamedTuple):
    """A file of compiled patterns, read (:func:`_read_pickled`): found by :func:`_find`."""

    dictionary: bytes
    names: bytes  # each pattern's _key, in the file's order
    starts: array[int]  # where each packed form starts in ``packed``, and where the last ends
    packed: bytes


def _read_pickled(path: Path) -> _File | None:
    """The file of compiled patterns at ``path``, its packed forms not unpacked.

    A process uses a few of the file's patterns: each is inflated and unpickled
    (:func:`_unpickle`) when :func:`compile_pattern` first asks for it, not all of them when
    the file is read. ``None`` when this ``regex`` did not write it, or when it is not one.
    """
    import json
    from array import array

    try:
        with path.open("rb") as file:
            header = json.loads(file.readline())
            if header.get("format") != COMPILED_FORMAT or header.get("regex") != _regex_stamp():
                return None
            loaded = _Unpickler(file).load()
    except (OSError, ValueError, TypeError, AttributeError, EOFError, UnpicklingError):
        return None
    if not (isinstance(loaded, tuple) and len(loaded) == 4):
        return None
    if not all(isinstance(part, bytes) for part in loaded):
        return None
    dictionary, names, start_bytes, packed = loaded
    starts = array("I")
    if len(start_bytes) % starts.itemsize:
        return None
    starts.frombytes(start_bytes)
    count = len(names) // _KEY
    # Starts out of order give slices that do not inflate: _unpickle gives None for them.
    if len(names) % _KEY or len(starts) != count + 1 or starts[-1] != len(packed):
        return None
    return _File(dictionary, names, starts, packed)


def _find(files: list[_File], name: bytes) -> _Packed | None:
    """The packed form of the pattern named ``name`` in the first of ``files`` that holds it."""
    for file in files:
        at = file.names.find(name)
        while at != -1 and at % _KEY:  # found across two names: look on
            at = file.names.find(name, at + 1)
        if at != -1:
            row = at // _KEY
            return file.dictionary, file.packed[file.starts[row] : file.starts[row + 1]]
    return None


def _unpickle(packed: _Packed) -> regex.Pattern[str] | None:
    """A compiled pattern from its packed form; ``None`` where it is not one."""
    import io
    import zlib

    dictionary, data = packed
    try:
        loaded = _Unpickler(io.BytesIO(_inflate(data, dictionary))).load()
    except (ValueError, TypeError, AttributeError, EOFError, UnpicklingError, zlib.error):
        return None
    kind = type(loaded)  # regex.Pattern, named without importing regex (see engine())
    return loaded if (kind.__module__, kind.__name__) == ("_regex", "Pattern") else None


class _Unpickler(Unpickler):
    """An unpickler that calls nothing but ``regex``'s own compile (its engine's)."""

    def find_class(self, module: str, name: str) -> object:
        if name == "compile" and module in ("regex._regex", "_regex"):
            return engine().compile
        raise UnpicklingError(f"{module}.{name} is not allowed here")


#: regex's concurrent and partial arguments, given by position (see search()).
_CONCURRENT, _WHOLE, _PARTIAL = True, False, True


def search(
    compiled: regex.Pattern[str], text: str, timeout: float = DEFAULT_TIMEOUT
) -> regex.Match[str] | None:
    """Search ``text`` for ``compiled``, giving up after ``timeout`` seconds.

    The timeout is wall-clock time, which a busy machine or other threads can stretch for a
    healthy pattern; so a search that times out is tried once more before the pattern is
    given up (a catastrophic pattern costs at most twice the timeout).
    """
    # The arguments by position: (text, pos, endpos, concurrent, partial, timeout). Keywords
    # cost a third of a short search. concurrent=True lets other threads run while a long
    # search goes on.
    try:
        return compiled.search(text, None, None, _CONCURRENT, _WHOLE, timeout)
    except TimeoutError:
        pass
    try:
        return compiled.search(text, None, None, _CONCURRENT, _WHOLE, timeout)
    except TimeoutError as exc:
        raise PatternTimeoutError(compiled.pattern) from exc


def search_prefix(
    cut: regex.Pattern[str],
    head: regex.Pattern[str],
    text: str,
    timeout: float = DEFAULT_TIMEOUT,
) -> regex.Match[str] | None:
    """A match of a pattern cut short by the end of ``text``, whose ``head`` is whole.

    A log line, an issue title or a first-line paste cuts a message; the part that is there
    still identifies it when it holds the pattern's head (:func:`head_pattern`). ``cut`` is the
    pattern compiled from :func:`cut_pattern`, so that a wildcard cannot run on to the end over
    the words that should have followed it. The match's groups are those captured before the
    cut. ``None`` when ``text`` does not end inside such a match; a full match is not looked
    for here (search first). :func:`may_end_inside` rules most texts out before it, without
    compiling the cut pattern.
    """
    for attempt in range(2):  # a timeout is tried once more, as in search()
        try:
            found = cut.search(text, None, None, _CONCURRENT, _PARTIAL, timeout)  # see search()
            break
        except TimeoutError as exc:
            if attempt:
                raise PatternTimeoutError(cut.pattern) from exc
    if found is None or not found.partial:
        return None
    whole_head = head.match(text, found.start(), None, _CONCURRENT, _WHOLE, timeout)
    return found if whole_head is not None else None


@functools.lru_cache(maxsize=1 << 16)
def cut_pattern(pattern: str) -> str:
    r"""``pattern`` for a search of a message cut short (:func:`search_prefix`).

    A cut match is one that the end of the text interrupts, so an unbounded wildcard (``.+?``,
    ``.*``) reaches that end over anything: ``max seq len \((?P<n>.+?)\)\. Try increasing
    `VLLM_CPU_KVCACHE_SPACE``` would read the whole of the GPU worker's message, which says
    ``gpu_memory_utilization`` there, as the CPU worker's cut short. Here each such wildcard may
    not run over the literal text that follows it in the pattern (its first three characters
    that are not spaces; a backtick, which a paste may drop, ends them): it stops where that
    text begins, as in a whole match, and the message must go on as the pattern does. A value
    that holds those characters itself is still found in a whole match. The pattern is
    returned as it is when no wildcard is followed by literal text, or when it is unreadable.
    """
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(pattern)]
    if "".join(text for _, text in tokens) != pattern:
        return pattern
    out: list[str] = []
    changed = False
    for i, (kind, text) in enumerate(tokens):
        if kind == "any" and text == "." and i + 1 < len(tokens) and tokens[i + 1][0] == "quant":
            following = _following_literal(tokens, i + 2)
            if following:
                out.append(f"(?:(?!{following}).)")
                changed = True
                continue
        out.append(text)
    return "".join(out) if changed else pattern


def _following_literal(tokens: list[tuple[str | None, str]], i: int) -> str:
    """The literal text every match requires at ``tokens[i]``, as a regex; ``""``: none.

    :func:`_following_text`, each character escaped but its one space: :func:`loosen` reads
    that as any run of spaces.
    """
    return "".join(c if c == " " else re.escape(c) for c in _following_text(tokens, i))


def _following_text(tokens: list[tuple[str | None, str]], i: int) -> str:
    """The literal text every match requires at ``tokens[i]``; ``""``: none.

    Groups that close there are passed over (unless quantified); it ends where the required
    literal characters do (:func:`_literal_chars`), at a backtick, or once it holds three
    characters that are not spaces. A run of spaces is written as one space; ``""`` when it
    holds nothing but spaces.
    """
    while i < len(tokens) and tokens[i][0] == "close":
        if i + 1 < len(tokens) and tokens[i + 1][0] == "quant":
            return ""
        i += 1
    chars: list[str] = []
    solid = 0
    for char in _literal_chars(tokens, i):
        if char == "`" or solid == 3:
            break
        if not char.isspace():
            chars.append(char)
            solid += 1
        elif not chars or chars[-1] != " ":
            chars.append(" ")
    return "".join(chars) if solid else ""


def _literal_chars(tokens: list[tuple[str | None, str]], i: int) -> Iterator[str]:
    """The characters every match requires from ``tokens[i]`` on, up to anything else.

    Plain text and escaped characters required once; a run whose last character a
    quantifier binds gives the others, and ends it.
    """
    for at in range(i, len(tokens)):
        kind, text = tokens[at]
        quantified = at + 1 < len(tokens) and tokens[at + 1][0] == "quant"
        if kind == "lit":
            yield from text[:-1] if quantified else text
            if quantified:
                return
        elif (
            kind == "esc"
            and len(text) == 2
            and not (quantified or text[1] in _CLASS_ESCAPES or text[1].isdigit())
        ):
            yield _LITERAL_ESCAPES.get(text[1], text[1])
        else:
            return


class CutChain(NamedTuple):
    r"""A pattern as :func:`may_end_inside` walks it: literal chunks between wildcards.

    ``lead`` is the literal text a cut match starts with (its head's, up to a backtick).
    ``steps`` are the first chunk (kind ``"^"``: where the match starts), then each wildcard:
    its kind (``"+"``, ``"*"``: ``.+``, ``.*``; ``"d"``: ``\d+``), its stop (what
    :func:`cut_pattern` does not let a ``.`` wildcard run over; ``None``: where the walk stops,
    as the pattern goes on in a way it does not read), and the chunk after it. A chunk is its
    text, a run of spaces written as one space; split at its backticks when it has any (each
    optional, as :func:`loosen` makes it).
    """

    lead: str
    steps: tuple[tuple[str, str | None, _Chunk], ...]


#: A chunk of a :class:`CutChain`: its text, or its parts between backticks when it has any.
_Chunk = str | tuple[str, ...]


#: :func:`may_end_inside`'s chunk ends: on a character the chunk does not hold, or in the chunk.
_MISSED, _ENDED = -1, -2
_DIGITS = "0123456789"


@functools.lru_cache(maxsize=1 << 16)
def cut_chain(pattern: str) -> CutChain | None:
    r"""``pattern`` as :func:`may_end_inside` walks it; ``None`` when it has no such start.

    The walk reads literal text, plain groups and unbounded wildcards (``.+?``, ``.*``,
    ``\d+``): what a message mined from a format string is, and the start of most written
    ones. It stops before anything else (a class, an alternation, an optional part): the
    regex tells what the text holds from there. The pattern must begin with literal text.

    >>> cut_chain(r"Loaded weights of (?P<n>.+?) into `model`\. Next: (?P<m>\d+) (?:a|b)")
    ... # doctest: +NORMALIZE_WHITESPACE
    CutChain(lead='Loaded weights of',
             steps=(('^', '', 'Loaded weights of '), ('+', ' int', (' into ', 'model', '. Next: ')),
                    ('d', '', ' ')))
    """
    head = head_pattern(pattern)
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(pattern)]
    if head is None or "".join(text for _, text in tokens) != pattern:
        return None
    read = _chain_items(tokens)
    if read is None:
        return None
    texts, kinds, whole = read
    head_tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(head)]
    # The head is searched alone: spaces at its end are optional (see loosen).
    lead = _SPACES.sub(" ", "".join(_literal_chars(head_tokens, 0))).split("`")[0].rstrip(" ")
    if (
        not lead
        or lead[0] == " "
        or not texts[0].startswith(lead)
        or (whole and texts[-1].endswith(" "))  # a pattern's last spaces are optional
        or any("``" in t for t in texts)
    ):
        return None
    steps: list[tuple[str, str | None, _Chunk]] = [("^", "", _chunk(texts[0]))]
    for before, (kind, stop), text in zip(texts[:-1], kinds, texts[1:], strict=True):
        # The walk stops at a wildcard with no one place to end: digits that run into what
        # follows, or one after an optional backtick (it may take the backtick itself).
        end = (
            stop is None
            or before.endswith("`")
            or (kind == "d" and (not text or text[0].isdecimal()))
        )
        steps.append((kind, None if end else stop, _chunk(text)))
        if end:
            break
    return CutChain(lead, tuple(steps))


def _chunk(text: str) -> _Chunk:
    return tuple(text.split("`")) if "`" in text else text


def _chain_items(
    tokens: list[tuple[str | None, str]],
) -> tuple[list[str], list[tuple[str, str | None]], bool] | None:
    """The chunks' texts and the wildcards' kinds and stops that :func:`cut_chain` reads.

    Last, whether they are the whole pattern. ``None``: an alternation at the top.
    """
    plain = _plain_groups(tokens)
    if plain is None:
        return None
    chunks: list[list[str]] = [[]]
    kinds: list[tuple[str, str | None]] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        quant = tokens[i + 1][1] if i + 1 < len(tokens) and tokens[i + 1][0] == "quant" else ""
        if kind == "any" and text == "." and quant in ("+", "+?", "*", "*?"):
            stop = _following_text(tokens, i + 2) or None
            kinds.append((quant[0], stop))
            chunks.append([])
            if stop is None:  # a wildcard that runs on: the text may end in it
                break
            i += 2
            continue
        if text == "\\d" and quant in ("+", "+?"):
            kinds.append(("d", ""))
            chunks.append([])
            i += 2
            continue
        if kind == "lit" and quant:
            chunks[-1].append(text[:-1])  # the quantifier binds its last character
            break
        if quant:
            break
        if kind == "lit":
            chunks[-1].append(text)
        elif (
            kind == "esc"
            and len(text) == 2
            and not (text[1] in _CLASS_ESCAPES or text[1].isdigit())
        ):
            chunks[-1].append(_LITERAL_ESCAPES.get(text[1], text[1]))
        elif not (kind == "close" or i in plain):  # the walk ends where anything else begins
            break
        i += 1
    whole = i >= len(tokens)
    return [_SPACES.sub(" ", "".join(chunk)) for chunk in chunks], kinds, whole


def _plain_groups(tokens: list[tuple[str | None, str]]) -> set[int] | None:
    """Where the groups open that a match goes through as written: no alternatives, no quantifier.

    Capturing, named or non-capturing ones only. ``None``: an alternation at the top.
    """
    plain: set[int] = set()
    open_: list[tuple[int, bool]] = []  # each open group's token, and whether it has alternatives
    for i, (kind, text) in enumerate(tokens):
        if kind == "open":
            opener = text in ("(", "(?:") or (
                text.startswith(("(?P<", "(?<")) and text.endswith(">")
            )
            open_.append((i, not opener))
        elif kind == "alt" and not open_:
            return None
        elif kind == "alt":
            open_[-1] = (open_[-1][0], True)
        elif kind == "close" and open_:
            at, other = open_.pop()
            if not other and not (i + 1 < len(tokens) and tokens[i + 1][0] == "quant"):
                plain.add(at)
    return plain


def may_end_inside(chain: CutChain, text: str) -> bool:
    """Whether ``text`` may end inside a match of the chain's pattern cut short.

    False means :func:`search_prefix` of that pattern finds nothing in ``text``, told by a few
    string searches rather than a partial regex search (which tries a whole match at every
    position, then a cut one). A cut match starts at the head; from there each wildcard
    stops where its stop begins (:func:`cut_pattern`) and a run of digits where they end, so
    each chunk has one place to be, and the text must go on as the chunk does or end in it.
    True is all that is said of text with other whitespace than single spaces.
    """
    last = _SPACED[0]  # the text's whitespace, told once for a lookup's candidates
    if last[0] is not text:
        last = _SPACED[0] = (text, "  " not in text and text.isprintable())
    if not last[1]:
        return True
    # Each place the head may start, walked in one loop (a call is a fifth of a walk).
    lead, steps, size = chain.lead, chain.steps, len(text)
    start = text.find(lead)
    while start >= 0:
        end = start
        for kind, stop, chunk in steps:
            if kind == "^":
                at = start
            elif stop is None:  # the walk goes no further: the regex tells
                return True
            elif kind == "d":
                if end == size or not text.isascii():  # \d is any decimal digit
                    return True
                rest = text[end:]
                at = end + len(rest) - len(rest.lstrip(_DIGITS))
                if at == end:
                    break
                if at == size:  # the text ends in the digits
                    return True
            else:
                at = text.find(stop, end)
                # The text ends in the wildcard, or near enough that its stop may be cut too.
                if at < 0 or at + len(stop) >= size - 1:
                    return True
                if at == end and kind == "+":
                    break
            if isinstance(chunk, str):  # no backtick: most chunks, compared here
                if not text.startswith(chunk, at):
                    if chunk.startswith(text[at:]):  # the text ends in it
                        return True
                    break
                end = at + len(chunk)
            else:
                end = _chunk_end(chunk, text, at)
                if end < 0:
                    if end == _ENDED:
                        return True
                    break
        else:
            return True  # a whole match, or the pattern's rest: the regex's to tell
        start = text.find(lead, start + 1)
    return False


#: The last text :func:`may_end_inside` told the whitespace of, and what it told.
_SPACED: list[tuple[str | None, bool]] = [(None, False)]


def _chunk_end(chunk: tuple[str, ...], text: str, at: int) -> int:
    """Where a chunk with backticks ends in ``text`` from ``at``: its end, or a flag.

    :data:`_MISSED`: the text goes on otherwise; :data:`_ENDED`: the text ends in the chunk.
    """
    for i, part in enumerate(chunk):
        if i and text.startswith("`", at):
            at += 1
        if text.startswith(part, at):
            at += len(part)
        else:
            return _ENDED if part.startswith(text[at:]) else _MISSED
    return at


#: A head ends at the first sentence end after this many literal characters...
HEAD_SENTENCE = 12
#: ...or once it holds this many: about the first line of a message identifies it.
HEAD_LITERALS = 30


#: What a prebuilt index holds of patterns (:func:`pattern_facts`), told by :func:`know_facts`.
_FACTS: dict[str, tuple[int, int, int]] = {}


def pattern_facts(pattern: str) -> tuple[int, int, int]:
    """The length of ``pattern``'s head (-1: none), its specificity and its head's.

    What :func:`head_pattern` and :func:`specificity` give, in numbers: the head is the
    start of the pattern. The records index keeps them for the hand-written records
    (:func:`know_facts`), so that a scan, which meets two hundred of them, does not read each
    pattern twice to score a match.
    """
    known = _FACTS.get(pattern)
    if known is None:
        head = _head_pattern(pattern)
        length = -1 if head is None else len(head)
        known = (length, specificity(pattern), specificity(head or ""))
    return known


def know_facts(pattern: str, facts: object) -> None:
    """Take ``facts`` of ``pattern`` as :func:`pattern_facts` gives them (from an index).

    Anything else (another code's index) is passed over: they are then read from the pattern.
    """
    if (
        isinstance(facts, (list, tuple))
        and len(facts) == 3
        and all(type(x) is int for x in facts)
        and -1 <= facts[0] <= len(pattern)
    ):
        _FACTS[pattern] = (facts[0], facts[1], facts[2])


def head_pattern(pattern: str) -> str | None:
    r"""The head of ``pattern``: the part a cut message must hold to be recognised.

    The pattern's top-level items (a literal run counts word by word) are taken up to the end
    of its first sentence (an escaped period followed by a space or the end, once
    :data:`HEAD_SENTENCE` literal characters are in) or until :data:`HEAD_LITERALS` literal
    characters are in. ``None`` when the head would
    be the whole pattern, or when the pattern cannot be split at the top level (an alternation
    there, or a construct the reader does not follow).

    >>> head_pattern(r"CUDA out of memory\. Tried to allocate (?P<n>\d+) MiB")
    'CUDA out of memory\.'
    """
    known = _FACTS.get(pattern)
    if known is not None:
        return pattern[: known[0]] if known[0] >= 0 else None
    return _head_pattern(pattern)


@functools.lru_cache(maxsize=1 << 16)
def _head_pattern(pattern: str) -> str | None:
    atoms = _top_level(pattern)
    if atoms is None:
        return None
    count = 0
    for i, (text, literal) in enumerate(atoms):
        count += literal
        nxt = atoms[i + 1][0] if i + 1 < len(atoms) else ""
        sentence_end = text == r"\." and (nxt.startswith(" ") or not nxt)
        if (sentence_end and count >= HEAD_SENTENCE) or count >= HEAD_LITERALS:
            if i + 1 == len(atoms):
                return None
            head = "".join(t for t, _ in atoms[: i + 1])
            # A word's trailing space is not needed to know the message: "... undefined" cut
            # before the space after it is still recognised.
            while head.endswith(" ") and not head.endswith("\\ "):
                head = head[:-1]
            return head
    return None


# A literal run splits into words (each with the spaces after it): a head may end mid-run.
_WORDS = re.compile(r"[^ ]+ *| +")


def _top_level(pattern: str) -> list[tuple[str, int]] | None:
    """The top-level items of ``pattern``, each with the literal characters it requires."""
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(pattern)]
    if "".join(text for _, text in tokens) != pattern:
        return None
    atoms: list[tuple[str, int]] = []
    i = 0
    while i < len(tokens):
        kind, text = tokens[i]
        if kind in {"alt", "close"}:
            return None  # an alternation at the top (or a stray parenthesis): no one head
        if kind == "open":
            depth, j = 1, i + 1
            while j < len(tokens) and depth:
                depth += {"open": 1, "close": -1}.get(str(tokens[j][0]), 0)
                j += 1
            if depth:
                return None
            text = "".join(t for _, t in tokens[i:j])
            # An alternation counts its shortest branch's literals (any-of sets count too).
            sets = literal_sets(text) if not text.startswith(_NON_CONSUMING) else None
            literal = sum(min(len(x) for x in s) for s in sets) if sets else 0
            if _FLAG_GROUP.fullmatch(tokens[i][1]) and not text.endswith(":)"):
                return None  # inline flags change how everything after reads
            i = j
        else:
            i += 1
            if kind == "lit":
                if i < len(tokens) and tokens[i][0] == "quant" and len(text) > 1:
                    # A quantifier binds the last character alone.
                    atoms.extend((word, len(word)) for word in _WORDS.findall(text[:-1]))
                    text = text[-1]
                else:
                    *words, text = _WORDS.findall(text)
                    atoms.extend((word, len(word)) for word in words)
                literal = len(text)
            elif kind == "esc":
                letter = text[1]
                literal = 0 if letter in _CLASS_ESCAPES or letter.isdigit() or len(text) > 2 else 1
            else:
                literal = 0
        while i < len(tokens) and tokens[i][0] == "quant":
            quant = tokens[i][1]
            text += quant
            if quant[0] in "?*" or quant.startswith(("{0", "{,")):
                literal = 0
            i += 1
        atoms.append((text, literal))
    return atoms


@functools.lru_cache(maxsize=4096)
def required_literals(pattern: str) -> tuple[str, ...] | None:
    """The literal runs that every match of ``pattern`` must contain, longest first.

    Returns ``None`` when no literal is certain (see :func:`literal_sets`); callers must then
    treat the pattern as able to match anything.
    """
    sets = literal_sets(pattern)
    if sets is None:
        return None
    return tuple(sorted({s[0] for s in sets if len(s) == 1}, key=len, reverse=True))


def literal_sets(pattern: str) -> tuple[tuple[str, ...], ...] | None:
    r"""What every match of ``pattern`` must contain, as a tuple of any-of sets.

    Each set holds literals of which at least one is in every match: a plain literal run is a
    set of one; an alternation whose every branch requires a literal is a set of those. A fast,
    conservative reading of the pattern text: groups made optional by a quantifier, classes,
    lookarounds and escapes such as ``\d`` require nothing. ``None`` when the pattern cannot be
    read this way (case-insensitive or verbose flags).

    The records index holds them for each hand-written pattern (:func:`know_sets`): a scan
    meets two hundred of them, and reading each costs about 150 us.
    """
    if pattern in _SETS:
        return _SETS[pattern]
    return _literal_sets(pattern)


#: The literal sets of whole patterns that a prebuilt index holds, told by :func:`know_sets`.
_SETS: dict[str, tuple[tuple[str, ...], ...] | None] = {}


def know_sets(pattern: str, sets: object) -> None:
    """Take ``sets`` as :func:`literal_sets` of ``pattern`` (from an index).

    Anything but None or lists of non-empty strings, each list non-empty (another code's
    index), is passed over: the sets are then read from the pattern.
    """
    if sets is None:
        _SETS[pattern] = None
        return
    if not isinstance(sets, list) or not all(
        isinstance(s, list) and s and all(isinstance(x, str) and x for x in s) for s in sets
    ):
        return
    _SETS[pattern] = tuple(tuple(s) for s in sets)


#: Where each pattern a prebuilt index knows can first match a newline, told by
#: :func:`know_newline` (what :func:`errkb._scanplan.first_newline` reads from a pattern).
_NEWLINES: dict[str, tuple[int, bool] | None] = {}


def know_newline(pattern: str, fact: object) -> None:
    """Take ``fact`` as where ``pattern`` can first match a newline (from an index).

    None (nowhere) or ``[place in the pattern, whether an alternative follows]``; anything
    else is passed over, and read from the pattern when asked for.
    """
    if fact is None:
        _NEWLINES[pattern] = None
    elif (
        isinstance(fact, list)
        and len(fact) == 2
        and type(fact[0]) is int
        and 0 <= fact[0] <= len(pattern)
        and type(fact[1]) is bool
    ):
        _NEWLINES[pattern] = (fact[0], fact[1])


def known_newline(pattern: str) -> tuple[int, bool] | None:
    """What :func:`know_newline` was told of ``pattern``; ``KeyError`` when nothing."""
    return _NEWLINES[pattern]


@functools.lru_cache(maxsize=1 << 18)
def _literal_sets(pattern: str) -> tuple[tuple[str, ...], ...] | None:
    try:
        return tuple(_requirements(_parse(pattern)))
    except _UnreadableError:
        return None


#: In the literals of :func:`key_sets`, a place where a word cannot run on: ``\b`` beside a
#: word character, or the end of a pattern's head where the pattern goes on with a non-word
#: character. Never in a message; the index's keys read it as a non-word character.
EDGE = "\x00"
# An alternation of plain literals is joined to the literals around it while the joined set
# stays this small: ``has no attribute (?:'X'|X\b)`` becomes two literals that both key on X.
_JOINED = 16


def key_sets(pattern: str) -> tuple[tuple[str, ...], ...] | None:
    r"""What every match of ``pattern``, whole or cut after its head, holds: for index keys.

    As :func:`literal_sets` of the head, but each literal keeps what is known of its edges.

    ``\b`` beside a literal is kept as :data:`EDGE`, and a small alternation of plain literals
    is joined to the literal runs beside it; so a literal says where a message's word must begin
    or end, and a lone name such as ``'X'|X\b`` after ``has no attribute`` becomes a whole word
    of the message. A head (:func:`head_pattern`) cut where the pattern goes on with a non-word
    character ends a word there, in a whole match and in a cut one alike. Only for choosing
    keys; a candidate's substring tests use :func:`literal_sets`.
    """
    head = head_pattern(pattern)
    try:
        branches = _parse(pattern if head is None else head)
    except _UnreadableError:
        return None
    if head is not None and _ends_word(pattern, head, branches):
        branches[0].append(("edge",))
    return tuple(_requirements(branches, joined=True))


@functools.lru_cache(maxsize=1 << 16)
def head_regex(pattern: str) -> str | None:
    r"""The regex a message cut short must match whole: :func:`head_pattern`'s, closed.

    Where the pattern goes on after its head with a non-word character, a cut message's head
    must end a word as well: ``(?!\w)`` follows it. So ``Processor`` of ``X\w*Processor
    cache`` is not found in ``XProcessorcache``, where the word goes on: no message of the
    pattern cut after its head reads so, and the index's keys say the same (see
    :func:`key_sets`). None when the pattern has no head.
    """
    head = head_pattern(pattern)
    if head is None:
        return None
    try:
        closed = _ends_word(pattern, head, _parse(head))
    except _UnreadableError:
        closed = False
    return head + r"(?!\w)" if closed else head


def _ends_word(pattern: str, head: str, branches: list[list[_Item]]) -> bool:
    """Whether a match of ``head`` (one branch) ends a word when cut from ``pattern``."""
    return len(branches) == 1 and _closed_after(pattern, len(head))


def _closed_after(pattern: str, at: int) -> bool:
    """Whether a non-word character (or the end) follows what the part before ``at`` matched.

    So it is when the next item is one literal non-word character, required once.
    """
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(pattern, at)]
    if not tokens:
        return True
    kind, text = tokens[0]
    if kind == "esc" and len(text) == 2 and not (text[1] in _CLASS_ESCAPES or text[1].isdigit()):
        char, alone = _LITERAL_ESCAPES.get(text[1], text[1]), True
    elif kind == "lit":
        char, alone = text[0], len(text) == 1
    else:
        return False
    quantified = alone and len(tokens) > 1 and tokens[1][0] == "quant"
    return not quantified and not (char.isalnum() or char == "_")


class _UnreadableError(Exception):
    """The pattern uses a construct the literal analysis does not follow."""


# One token per construct; a run of plain characters is one token, so patterns read fast.
# (The standard library's engine tokenizes this twice as fast as the regex module.)
_TOKEN = lazy_re(
    r"""
    (?P<esc>\\(?:x\{[^}]*\}|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[NpP]\{[^}]*\}
              |[pP].|g<[^>]*>|[0-9]+|.))
    |(?P<cls>\[\^?\]?(?:\\.|\[:[a-z]+:\]|[^\]\\])*\])
    |(?P<open>\((?:\?(?:P?<(?![=!])[^>]*>|[:>|]|[a-zA-Z]*-?[a-zA-Z]*:|<?[=!]|\#|\(|P=|&|R|[a-zA-Z]+(?=\)))?)?)
    |(?P<close>\))
    |(?P<quant>(?:[?*+]|\{[0-9]*(?:,[0-9]*)?\})[?+]?)
    |(?P<alt>\|)
    |(?P<any>[.^$])
    |(?P<lit>[^\\\[()|?*+{.^$]+|[{])
    """,
    re.VERBOSE | re.DOTALL,
)
_FLAG_GROUP = re.compile(r"\(\?[a-zA-Z]+")
_LITERAL_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "a": "\a", "e": "\x1b"}
_CLASS_ESCAPES = frozenset("dDwWsSbBAZzGpPNuxUvVXhHKLlRmgX")
_NON_CONSUMING = ("(?=", "(?!", "(?<=", "(?<!", "(?#", "(?(", "(?P=", "(?&", "(?R")

# A parsed pattern: branches of items. An item is ("lit", text), ("any",), ("group", opener,
# branches) or ("rep", item, minimum).
_Item = tuple[object, ...]


#: An optional backtick between two word edges (see :func:`_parse_branches`).
_TICK: tuple[_Item, ...] = (("edge",), ("rep", ("lit", "`"), 0), ("edge",))


def _parse(pattern: str) -> list[list[_Item]]:
    tokens = [(m.lastgroup, m.group()) for m in _TOKEN.finditer(pattern)]
    branches, _ = _parse_branches(tokens, 0)
    return branches


def _parse_branches(tokens: list[tuple[str | None, str]], i: int) -> tuple[list[list[_Item]], int]:
    branches: list[list[_Item]] = [[]]
    while i < len(tokens):
        kind, text = tokens[i]
        branch = branches[-1]
        i += 1
        if kind == "close":
            return branches, i
        if kind == "alt":
            branches.append([])
        elif kind == "open":
            inner, i = _parse_branches(tokens, i)
            if _FLAG_GROUP.fullmatch(text) and not inner[0]:
                if set(text[2:]) & set("ixX"):  # (?i), (?x): literals are no longer exact
                    raise _UnreadableError
                continue
            branch.append(("group", text, inner))
        elif kind == "lit":
            # A backtick may be gone from a paste (see loosen): it splits the literal run, and
            # present or not it stands between words (inline code is set off from its text).
            for n, piece in enumerate(text.split("`")):
                if n:
                    branch.extend(_TICK)
                if piece:
                    branch.append(("lit", piece))
        elif kind == "esc":
            letter = text[1]
            if letter == "`":
                branch.extend(_TICK)
            elif letter == "b" and len(text) == 2:
                branch.append(("edge",))
            elif (
                letter in _CLASS_ESCAPES
                or letter.isdigit()
                or (len(text) > 2 and letter in "xuUNpPg")
            ):
                branch.append(("any",))
            else:
                branch.append(("lit", _LITERAL_ESCAPES.get(letter, letter)))
        elif kind == "quant":
            if not branch:
                continue
            minimum = (
                1
                if text[0] == "+"
                else 0
                if text[0] in "?*"
                else int(text[1:].split(",")[0].rstrip("}") or 0)
            )
            last = branch.pop()
            if last[0] == "lit" and len(str(last[1])) > 1:
                branch.append(("lit", str(last[1])[:-1]))
                last = ("lit", str(last[1])[-1])
            branch.append(("rep", last, minimum))
        else:  # cls, any
            branch.append(("any",))
    return branches, i


def _requirements(branches: list[list[_Item]], *, joined: bool = False) -> list[tuple[str, ...]]:
    if len(branches) == 1:
        return _branch_requirements(branches[0], joined=joined)
    best = [best_set(_branch_requirements(b, joined=joined)) for b in branches]
    if any(b is None for b in best):
        return []
    return [tuple(sorted({lit for b in best if b is not None for lit in b}))]


def best_set(sets: list[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The any-of set of literals that narrows a search most, or None when there is none.

    The set whose shortest member is longest (a long literal is rarer in text), and of those
    the one with fewest members. Used for a branch's requirement here and for the needles
    of :mod:`errkb.scan`.
    """
    return max(sets, key=lambda s: (min(len(x) for x in s), -len(s))) if sets else None


def _branch_requirements(items: list[_Item], *, joined: bool = False) -> list[tuple[str, ...]]:
    """The any-of sets a branch requires; ``joined``: read for keys (see :func:`key_sets`)."""
    sets: list[tuple[str, ...]] = []
    run = [""]  # the literal run being read: more than one text once an alternation is joined

    def flush() -> None:
        if any(t.replace(EDGE, "") for t in run):
            sets.append(tuple(sorted(set(run))))
        run[:] = [""]

    for item in items:
        if item[0] == "lit":
            run[:] = [t + str(item[1]) for t in run]
            continue
        if item[0] == "edge" and joined:
            run[:] = [t + EDGE for t in run]
            continue
        if item[0] == "group" and joined:
            texts = _plain(item)
            if texts is not None and len(run) * len(texts) <= _JOINED:
                run[:] = [t + x for t in run for x in texts]
                continue
        flush()
        if item[0] == "rep":
            inner, minimum = item[1], item[2]
            if minimum and isinstance(inner, tuple):
                sets.extend(_branch_requirements([inner], joined=joined))
        elif item[0] == "group":
            opener, inner_branches = str(item[1]), item[2]
            if opener.startswith(_NON_CONSUMING):
                continue
            if opener.endswith(":") and set(opener[2:-1]) & set("ixX"):
                continue  # a scoped (?i:...) group: its literals are not exact
            if isinstance(inner_branches, list):
                sets.extend(_requirements(inner_branches, joined=joined))
    flush()
    return [s for s in sets if all(x.replace(EDGE, "") for x in s)]


def _plain(item: _Item) -> list[str] | None:
    r"""The texts of a consuming group whose every branch is plain literals (and ``\b``)."""
    opener, branches = str(item[1]), item[2]
    if opener.startswith(_NON_CONSUMING) or (
        opener.endswith(":") and set(opener[2:-1]) & set("ixX")
    ):
        return None
    if opener.startswith("(?") and not opener.startswith(("(?:", "(?P<", "(?<")):
        return None  # an atomic group, a branch reset...: read as usual
    texts = []
    for branch in branches if isinstance(branches, list) else ():
        if not all(part[0] in ("lit", "edge") for part in branch):
            return None
        texts.append("".join(EDGE if part[0] == "edge" else str(part[1]) for part in branch))
    return texts or None


@functools.lru_cache(maxsize=4096)
def specificity(pattern: str) -> int:
    """How many literal characters a match of ``pattern`` must contain (0 when unknown)."""
    runs = required_literals(pattern)
    return sum(len(r) for r in runs) if runs else 0


# A record's text may name its pattern's captures: "{in_features}" (a plain name, never an
# expression), "{{" and "}}" for literal braces.
_TEMPLATE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}|[{}]")


def template_names(text: str) -> tuple[set[str], list[str]]:
    """The capture names ``text`` refers to, and the problems of its braces (a lone ``{``)."""
    names: set[str] = set()
    problems: list[str] = []
    for m in _TEMPLATE.finditer(text):
        if m.group(1):
            names.add(m.group(1))
        elif m.group() in "{}":
            problems.append(
                f"a lone {m.group()!r} at {m.start()}: write {{{{ or }}}} for a literal brace, "
                "or {name} for a capture"
            )
    return names, problems


def fill_template(text: str, values: Mapping[str | int, object]) -> str:
    """``text`` with each ``{name}`` replaced by the capture's value, formatted by errkb.

    A capture that matched nothing (an optional part, or a message cut before it) shows as a
    placeholder, ``<name>``. Numbers read plainly (``512``, ``0.93``); nothing in the text is
    ever evaluated.
    """

    def put(m: re.Match[str]) -> str:
        name = m.group(1)
        if name is None:
            return m.group()[0] if m.group() in ("{{", "}}") else m.group()
        value = values.get(name)
        if value is None:
            return f"<{name}>"
        if isinstance(value, float):
            return f"{value:g}"
        return str(value)

    return _TEMPLATE.sub(put, text)


# errkb's own patterns are taken from the shipped file from now on (see _lazy_regex).
_lazy_regex.find_compiled = own_compiled
