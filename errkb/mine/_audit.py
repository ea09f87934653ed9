"""An audit of the mined packs that anyone can re-run: samples, re-read from the pinned archives.

For a fixed-seed sample of each pack's records, the audit opens the archives the packs were
mined from (``records/mined/sources.toml`` and ``releases.toml``, already downloaded into
``.mine-cache/``) and checks, by reading their text itself, what each record says:

- **site**: at the record's newest release, ``filePath`` names one file and the longest literal
  piece of the template is in the string literals of the lines ``lineNumber-2 ..
  lineNumber+25`` (or of the function above them: a message assigned to a name first);
- **template**: every literal piece of three characters or more is there, in order;
- **first** and **last**: the release named has the message and the release just outside it
  does not (a release "has" a message when one of its source files holds every piece of four
  characters or more in its string literals);
- **skew**: a skew record's name is in ``lastBefore`` and not in ``changedIn`` (the other way
  round for an added keyword or a parameter that became required);
- **pins**: each ``pip install 'pkg<X'`` of a skew record resolves, over the release list
  (yanked and pre-releases left out), to a release that has what the pin promises;
- **condition**: for a check (``TORCH_CHECK(c, ...)``, ``torch._check(c, ...)``,
  ``assert c, ...``), the documentation's condition states the failure (``not (c)``, or ``c``
  with its one comparison inverted); for ``if (c) throw`` it is ``c``.

Nothing here calls the miner's readers (:mod:`errkb.mine._python`, :mod:`errkb.mine._native`,
griffe): string literals are collected with :mod:`tokenize` and regular expressions, names with
:mod:`ast` and text, so that a mistake of the miner shows as a failure instead of being
repeated. Run ``python -m errkb.mine._audit --help``; ``nox -s audit`` downloads what is missing
and writes the table into ``docs/mining.md``.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import random
import re
import sys
import tarfile
import tokenize
import zipfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from errkb._attrs import attrs

# The one rule of what path a record names (a Python file's after its last src/, py_src/ or lib/): the
# audit compares the archive's files with the records' paths, so it must map them the same way.
from errkb.mine._write import package_path

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

__all__ = [
    "CHECKS",
    "condition_verdict",
    "failure_forms",
    "has_feature",
    "literal_pieces",
    "native_literals",
    "pieces_in_order",
    "python_literals",
    "resolve_pin",
    "run_audit",
    "split_template",
]

#: The checks, in the order of the table's columns.
CHECKS = ("site", "template", "first", "last", "skew", "pins", "condition")
#: Packs sampled more deeply: the libraries users report most.
BIG_PACKS = frozenset({"vllm", "transformers", "torch", "accelerate", "huggingface_hub"})
NATIVE_SUFFIXES = (".h", ".hpp", ".cpp", ".cc", ".cu", ".cuh", ".rs")
#: Folders the miner passes over (docs/mining.md): their messages never count as present.
SKIPPED_FOLDERS = frozenset({"tests", "test", "docs", "examples", "benchmarks"})
WINDOW_BEFORE, WINDOW_AFTER = 2, 25
MARKERS = ("<!-- audit:start -->", "<!-- audit:end -->")
_HOLE = "\x00"


# ---------------------------------------------------------------------------- templates


def split_template(message: str) -> list[str]:
    """The literal pieces of a template: the text between its ``{...}`` holes.

    Holes are found by brace matching, so ``{device_type.upper()}``, ``{x!r}`` and
    ``{d["k"]}`` are one hole each; a ``{`` that never closes is text.

    >>> split_template("Got {type(x)} for {d['a']}, want {n:.2f}")
    ['Got ', ' for ', ', want ', '']
    """
    pieces: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(message):
        if message[i] == "{":
            end = _closing_brace(message, i)
            if end is not None:
                pieces.append("".join(current))
                current = []
                i = end + 1
                continue
        current.append(message[i])
        i += 1
    pieces.append("".join(current))
    return pieces


def _outside_quotes(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """Each character of ``text`` outside quotes, with the bracket depth after it.

    Quotes (with their backslash escapes) are skipped whole; brackets of every kind count.
    """
    depth, quote, escaped = 0, "", False
    for i in range(start, len(text)):
        c = text[i]
        if quote:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == quote:
                quote = ""
            continue
        if c in "'\"":
            quote = c
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        yield i, c, depth


def _closing_brace(text: str, start: int) -> int | None:
    """The index of the ``}`` that closes the ``{`` at ``start`` (quotes skipped), or None."""
    for i, c, depth in _outside_quotes(text, start):
        if depth <= 0:
            return i if depth == 0 and c == "}" else None
    return None


def collapse(text: str) -> str:
    """Whitespace collapsed to one space and stripped."""
    return re.sub(r"\s+", " ", text).strip()


#: Messages c10 writes itself around a check's stringized condition (``TORCH_CHECK(c)`` with no
#: message, ``TORCH_INTERNAL_ASSERT(c, ...)``): the condition is code, not a literal.
_SYNTHESIZED = (
    re.compile(
        r"Expected (?P<code>.+) to be true, but got false\. \(Could this error message be "
        r"improved\? If so, please report an enhancement request to PyTorch\.\)(?P<rest>)"
    ),
    re.compile(
        r'(?P<code>.+?) INTERNAL ASSERT FAILED at "\{[^}]*\}":\{[^}]*\}, please report a bug '
        r"to PyTorch\.(?P<rest>.*)"
    ),
)


_STD_PLACE = re.compile(r"^\{__func__\}, \{__FILE__\}:\{__LINE__\}, ")


def squeeze(text: str) -> str:
    """Text with all whitespace (and macro line continuations) removed, to compare code."""
    return re.sub(r"\s+|\\\n", "", text)


def message_parts(message: str) -> tuple[str, str]:
    """A message split into the code it stringizes and the template left to find in literals.

    c10's messages hold the check's condition (squeezed here); any other message gives
    ``("", message)``.

    >>> message_parts('n > 0 INTERNAL ASSERT FAILED at "{__FILE__}":{__LINE__}, please '
    ...               'report a bug to PyTorch. bad n')
    ('n>0', ' bad n')
    >>> message_parts("{__func__}, {__FILE__}:{__LINE__}, k_scale must be one fp32 value")
    ('', 'k_scale must be one fp32 value')
    """
    flat = collapse(message)
    for pattern in _SYNTHESIZED:
        m = pattern.fullmatch(flat)
        if m:
            return squeeze(m["code"]), m["rest"]
    # STD_TORCH_CHECK puts the function, file and line before the message the code gives.
    return "", _STD_PLACE.sub("", message, count=1)


def literal_pieces(message: str, minimum: int) -> list[str]:
    """The template's pieces, whitespace collapsed, of at least ``minimum`` characters."""
    return [p for p in (collapse(p) for p in split_template(message)) if len(p) >= minimum]


def composed(piece: str, text: str, most: int = 3) -> bool:
    r"""Whether ``piece`` is in ``text``, whole or in at most ``most`` separate literals.

    A message joined from a name assigned earlier and a literal (``arg_error_msg +
    "\nArgument..."``) is one piece of the template but two literals of the source. Each
    part but the first must start a literal and each but the last end one, so that a
    reworded message (one literal, another word in the middle) is not taken for it.

    >>> composed("one of: a Argument b", "Expected one of: a\x00 Argument b")
    True
    >>> composed("Expected one of: a", "Expected one of: a b")
    True
    >>> composed("Expected two of: a", "Expected one of: a\x00 two of: a")
    False
    """
    if piece in text:
        return True
    if len(piece) < 8 or piece[:8] not in text:
        return False
    bounded = _HOLE + re.sub(" ?\x00 ?", _HOLE, text) + _HOLE

    def fits(part: str, *, first: bool, last: bool) -> bool:
        part = part.strip()
        probe = ("" if first else _HOLE) + part + ("" if last else _HOLE)
        return bool(part) and probe in bounded

    def rest_fits(at: int, parts: int) -> bool:
        if fits(piece[at:], first=False, last=True):
            return True
        return parts > 1 and any(
            fits(piece[at:end], first=False, last=False) and rest_fits(end, parts - 1)
            for end in range(_reach(piece, at, text), at, -1)
        )

    return any(
        fits(piece[:end], first=True, last=False) and rest_fits(end, most - 1)
        for end in range(_reach(piece, 0, text), 0, -1)
    )


def _reach(piece: str, at: int, text: str) -> int:
    """The end of the longest part of ``piece`` from ``at`` that occurs in ``text``."""
    end = at
    while end < len(piece) and piece[at : end + 1] in text:
        end += 1
    return end


def pieces_in_order(pieces: Sequence[str], text: str) -> bool:
    """Whether every piece occurs in ``text`` after the one before it."""
    at = 0
    for piece in pieces:
        found = text.find(piece, at)
        if found < 0:
            return False
        at = found + len(piece)
    return True


# ---------------------------------------------------------------------------- string literals

_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "b": "\b", "f": "\f"}
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|u[0-9a-fA-F]{4}|\n\s*|.)", re.DOTALL)


def _unescape(body: str, *, rust: bool = False) -> str:
    """A literal's escapes decoded (the common ones; others keep their character)."""

    def one(m: re.Match[str]) -> str:
        e = m.group(1)
        if e[0] == "\n":  # a line continuation: Rust drops the next line's indent
            return "" if rust else e[1:]
        if e[0] == "x":
            return chr(int(e[1:], 16))
        if e[0] == "u" and len(e) > 1:
            return chr(int(e[1:].strip("{}"), 16))
        return _ESCAPES.get(e, e)

    return _ESCAPE.sub(one, body)


_SELF_DOCUMENTING = re.compile(r"(?s)(.*?[^=!<>]=\s*)(?:![rsa])?(?::[^}]*)?")


def _fstring_text(body: str) -> str:
    """An f-string's literal text: each hole is a separator, ``{{`` and ``}}`` are braces.

    A self-documenting hole (``{x=}``, ``{x = !r}``) prints its own text, ``x=``, first.
    """
    out, i = [], 0
    while i < len(body):
        if body.startswith("{{", i) or body.startswith("}}", i):
            out.append(body[i])
            i += 2
            continue
        if body[i] == "{":
            end = _closing_brace(body, i)
            if end is not None:
                own = _SELF_DOCUMENTING.fullmatch(body, i + 1, end)
                out.append((own[1] if own else "") + _HOLE)
                i = end + 1
                continue
        out.append(body[i])
        i += 1
    return "".join(out)


def _string_value(prefix: str, body: str) -> str:
    """A Python string literal's text from its prefix and the text between its quotes."""
    lowered = prefix.lower()
    text = _fstring_text(body) if "f" in lowered else body
    return text if "r" in lowered else _unescape(text)


_PY_LITERAL = re.compile(
    r"""(?P<comment>\#[^\n]*)
    |(?<![\w])(?P<prefix>[rRbBuUfF]{0,2})
     (?P<literal>'''(?:[^'\\]|\\.|'(?!''))*'''|\"\"\"(?:[^"\\]|\\.|"(?!""))*\"\"\"
       |'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")""",
    re.VERBOSE | re.DOTALL,
)
_CPP_LITERAL = re.compile(
    r"""(?P<comment>//[^\n]*|/\*.*?\*/)
    |(?<![\w])R"(?P<delim>[^(\s]{0,16})\((?P<raw>.*?)\)(?P=delim)"
    |(?<![\w])r(?P<hashes>\#*)"(?P<rraw>.*?)"(?P=hashes)
    |(?P<char>'(?:\\.|[^'\\\n])')
    |(?:(?<![\w])(?:u8|[uULb]))?"(?P<body>(?:[^"\\]|\\.)*)"
    """,
    re.VERBOSE | re.DOTALL,
)
# What may lie between two literals that make one string: space, brackets, `+`, comments;
# in C++ a comma too (a check macro's message arguments are concatenated: c10::str).
# Each comment ends at its own end (a newline, `*/`), so that no text can be split two ways.
_JOINS = re.compile(r"[\s()+\\]*(?:#[^\n]*\n[\s()+\\]*)*")
_CPP_JOINS = re.compile(r"\s*(?:(?://[^\n]*\n|/\*(?:[^*]|\*(?!/))*\*/|,)\s*)*")


def _joined(parts: Iterable[tuple[int, int, str]], text: str, joins: re.Pattern[str]) -> str:
    """Literal values, adjacent ones (implicit concatenation, ``+``) joined, others apart."""
    out: list[str] = []
    end = None
    for start, stop, value in parts:
        if end is not None:
            out.append("" if joins.fullmatch(text, end, start) else _HOLE)
        out.append(value)
        end = stop
    return collapse("".join(out))


def _py_scan(text: str) -> Iterator[tuple[int, int, str]]:
    for m in _PY_LITERAL.finditer(text):
        if m.group("comment") is None:
            quote = 3 if m.group("literal")[:3] in ("'''", '"""') else 1
            body = m.group("literal")[quote:-quote]
            yield m.start(), m.end(), _string_value(m.group("prefix") or "", body)


def _cpp_scan(text: str, *, rust: bool) -> Iterator[tuple[int, int, str]]:
    for m in _CPP_LITERAL.finditer(text):
        if m.group("comment") is not None or m.group("char") is not None:
            continue
        if m.group("raw") is not None:
            value = m.group("raw")
        elif m.group("rraw") is not None:
            value = m.group("rraw")
        else:
            value = _unescape(m.group("body"), rust=rust)
        yield m.start(), m.end(), value


def file_literals(text: str, suffix: str) -> str:
    """Every string literal of a source file, adjacent ones joined, whitespace collapsed."""
    if suffix == ".py":
        return _joined(_py_scan(text), text, _JOINS)
    return _joined(_cpp_scan(text, rust=suffix == ".rs"), text, _CPP_JOINS)


def _window(line: int, start: int | None = None, end: int | None = None) -> tuple[int, int]:
    """The first and last line (1-based) of the window around a site's line."""
    first = max(1, line - WINDOW_BEFORE if start is None else start)
    return first, max(line + WINDOW_AFTER, end or 0)


def _blank_comments(text: str, *, python: bool) -> str:
    """The text with its comments blanked, newlines kept.

    A ``parameter's`` in a comment would otherwise open a quote.
    """
    pattern = _PY_LITERAL if python else _CPP_LITERAL

    def blank(m: re.Match[str]) -> str:
        if m.group("comment") is None:
            return m.group(0)
        return re.sub(r"[^\n]", " ", m.group(0))

    return pattern.sub(blank, text)


def _calls_a_helper(text: str, line: int, end: int) -> bool:
    """Whether the statement at ``line`` calls a function the same module defines.

    The miner takes the message a helper returns (``raise X(self._msg(...))``): its
    literals lie in the helper, anywhere in the file.
    """
    statement = "\n".join(text.splitlines()[line - 1 : end])
    defined = set(re.findall(r"^\s*(?:async\s+)?def\s+(\w+)", text, re.MULTILINE))
    return any(name in defined for name in re.findall(r"(\w+)\s*\(", statement))


def statement_end(text: str, line: int, *, python: bool = True) -> int:
    """The line where the call opened on a site's line closes.

    A check whose condition is a long lambda puts its message further down; with no call
    opened on the line, the line itself.
    """
    lines = _blank_comments(text, python=python).splitlines()
    if not 0 < line <= len(lines) or "(" not in lines[line - 1]:
        return line
    chunk = "\n".join(lines[line - 1 : line + 300])[lines[line - 1].index("(") :]
    for i, _, depth in _outside_quotes(chunk):
        if depth == 0:
            return line + chunk.count("\n", 0, i)
    return line


def function_start(text: str, line: int) -> int:
    """The line of the ``def`` (or C++/Rust function head) that encloses a site's line.

    A message assigned to a name earlier in the function (``msg = "..."``, then ``raise
    X(msg)``) lies above the window; this is where a wider look starts. Without a ``def``
    above, 60 lines up.
    """
    lines = text.splitlines()
    if not 0 < line <= len(lines):
        return max(1, line - 60)
    own = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    for back in range(line - 1, max(0, line - 300), -1):
        source = lines[back - 1]
        indent = len(source) - len(source.lstrip())
        if indent < own and re.match(r"\s*(?:async\s+)?def\s", source):
            return back
    return max(1, line - 60)


def python_literals(text: str, line: int, start: int | None = None, end: int | None = None) -> str:
    """The string literals of a Python file that start in the window around ``line``.

    The whole file is tokenized (a window can start inside a statement), f-strings give their
    literal text, implicit concatenation is joined; a file :mod:`tokenize` refuses is read
    with the plain scanner instead. ``start`` moves the window's first line.
    """
    first, last = _window(line, start, end)
    parts: list[tuple[int, int, str]] = []
    offsets = [0]
    for source_line in text.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(source_line))

    def at(pos: tuple[int, int]) -> int:
        return offsets[min(pos[0] - 1, len(offsets) - 1)] + pos[1]

    try:
        fstring: list[str] = []
        fstart = 0
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            kind = tokenize.tok_name[tok.type]
            if kind == "FSTRING_START":
                fstring, fstart = [], at(tok.start)
            elif kind == "FSTRING_MIDDLE":
                fstring.append(tok.string)
            elif kind == "OP" and fstring is not None and tok.string == "{" and fstart:
                fstring.append(_HOLE)
            elif kind == "FSTRING_END":
                if first <= tok.start[0] <= last or first <= tok.end[0] <= last:
                    parts.append((fstart, at(tok.end), "".join(fstring)))
                fstart = 0
            elif tok.type == tokenize.STRING and first <= tok.start[0] <= last:
                m = re.match(r"(?s)([A-Za-z]*)('''|\"\"\"|'|\")(.*)\2$", tok.string)
                if m:
                    parts.append((at(tok.start), at(tok.end), _string_value(m[1], m[3])))
    except (tokenize.TokenError, SyntaxError):
        lines = text.splitlines(keepends=True)
        start = sum(len(s) for s in lines[: first - 1])
        chunk = "".join(lines[first - 1 : last])
        return _joined(((a + start, b + start, v) for a, b, v in _py_scan(chunk)), text, _JOINS)
    return _joined(parts, text, _JOINS)


def native_literals(
    text: str, line: int, start: int | None = None, end: int | None = None, *, rust: bool = False
) -> str:
    """The ``"..."`` literals (escapes decoded) of a C++, CUDA or Rust file in the window."""
    first, last = _window(line, start, end)
    lines = text.splitlines(keepends=True)
    chunk = "".join(lines[first - 1 : last])
    return _joined(_cpp_scan(chunk, rust=rust), chunk, _CPP_JOINS)


# ---------------------------------------------------------------------------- archives


def read_archive(path: Path, suffixes: tuple[str, ...]) -> dict[str, list[str]]:
    """The files of a wheel or sdist with these suffixes: package path -> texts.

    An sdist's top folder is dropped; several members can have one package path (the
    ``src/error.rs`` of two Rust crates), so each path holds a list.
    """
    out: dict[str, list[str]] = {}
    sdist = not path.name.endswith(".whl")

    def add(name: str, data: bytes) -> None:
        if sdist:
            name = name.split("/", 1)[1] if "/" in name else name
        out.setdefault(package_path(name), []).append(data.decode("utf-8", "replace"))

    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as wheel:
            for info in wheel.infolist():
                if not info.is_dir() and info.filename.endswith(suffixes):
                    add(info.filename, wheel.read(info))
    else:
        with tarfile.open(path) as sdist_file:
            for member in sdist_file:
                if member.isfile() and member.name.endswith(suffixes):
                    handle = sdist_file.extractfile(member)
                    if handle is not None:
                        add(member.name, handle.read())
    return out


class Release:
    """The files of one release, read once, with each file's literal text on demand."""

    def __init__(self, files: dict[str, list[str]]) -> None:
        self.files = files
        self._literals: dict[tuple[str, int], str] = {}

    def literals(self, path: str, index: int) -> str:
        key = (path, index)
        if key not in self._literals:
            self._literals[key] = file_literals(self.files[path][index], Path(path).suffix)
        return self._literals[key]

    def has_message(
        self, pieces: Sequence[str], native: bool, code: str = "", cls: str = ""
    ) -> bool:
        """Whether one source file (tests and the like left out) holds every piece.

        ``cls``, when given, must be named in that file as a word: the class raised; and where
        the longest piece's start is found as written, within the lines just above it (the
        statement that raises it: another class, or a message returned rather than raised, is
        another record's).

        Order is not asked: a message joined from a name assigned earlier (``"Too large. " +
        msg``) has its pieces out of source order. ``code`` (squeezed) must be in the file's
        code as well: the condition that c10 stringizes into its own message.
        """
        suffixes = NATIVE_SUFFIXES if native else (".py",)
        # An implicit concatenation can split a word ("set" "bnb_4bit"): any of the three
        # longest words lets the file through to the real test.
        words = sorted({w for p in [*pieces, code] for w in re.findall(r"\w+", p)}, key=len)
        anchors = words[-3:] or [""]
        for path, texts in self.files.items():
            if not path.endswith(suffixes) or SKIPPED_FOLDERS.intersection(path.split("/")[:-1]):
                continue
            for i, text in enumerate(texts):
                if not any(a in text for a in anchors) or (code and code not in squeeze(text)):
                    continue
                if cls and not re.search(rf"\b{re.escape(cls)}\b", text):
                    continue
                literals = self.literals(path, i)
                if all(composed(p, literals) for p in pieces) and _raised_as(text, pieces, cls):
                    return True
        return False


#: How far above a message's first line the statement that raises it may start.
_RAISE_REACH = 4


def _raised_as(text: str, pieces: Sequence[str], cls: str) -> bool:
    """Whether ``cls`` is named in the lines just above a place where the message's text is.

    Only the start of the longest piece is looked for as written (a piece with an escape or
    split by a concatenation is not found so: then the file's naming of the class stands).
    """
    if not cls or not pieces:
        return True
    head = max(pieces, key=len)[:16]
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if head in line]
    if not starts:
        return True
    word = re.compile(rf"\b{re.escape(cls)}\b")
    return any(word.search("\n".join(lines[max(0, i - _RAISE_REACH) : i + 1])) for i in starts)


# ---------------------------------------------------------------------------- skew: names


@attrs.frozen(kw_only=True)
class Feature:
    """What a skew record says a release has or lacks.

    ``name`` is the dotted name; ``keyword`` the parameter for keyword records;
    ``required`` asks whether the parameter is required rather than present; ``module``
    forces the name to be read as a module (``No module named``); ``level`` as a module-level
    name (``cannot import name``).
    """

    name: str
    keyword: str | None = None
    required: bool = False
    module: bool = False
    level: bool = False


def _module_file(files: Mapping[str, list[str]], dotted: str) -> str | None:
    base = dotted.replace(".", "/")
    for candidate in (f"{base}.py", f"{base}/__init__.py", f"{base}.pyi"):
        if candidate in files:
            return candidate
    return None


def _parse(text: str) -> ast.Module | None:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _top_statements(body: Iterable[ast.stmt]) -> Iterator[ast.stmt]:
    """Module-level statements, those in ``if``/``try``/``with``/``for``/``while`` blocks too."""
    for node in body:
        yield node
        if isinstance(node, (ast.If, ast.Try, ast.With, ast.For, ast.While)):
            yield from _top_statements(node.body)
            yield from _top_statements(getattr(node, "orelse", []))
            for handler in getattr(node, "handlers", []):
                yield from _top_statements(handler.body)
            yield from _top_statements(getattr(node, "finalbody", []))


def _binds(node: ast.stmt, name: str) -> bool:
    """Whether a statement defines, assigns or imports ``name``."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(
            isinstance(n, ast.Name) and n.id == name for t in node.targets for n in ast.walk(t)
        )
    if isinstance(node, (ast.AnnAssign, ast.AugAssign)):
        return isinstance(node.target, ast.Name) and node.target.id == name
    if isinstance(node, ast.For):
        return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node.target))
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return any((a.asname or a.name.split(".")[0]) == name for a in node.names)
    return False


_IDENTIFIER_RE = r"(?<![\w.])(?:def|class)\s+{0}\b|^{0}\s*[:=]|import\s[^\n]*\b{0}\b|[\"']{0}[\"']"


def module_mentions(text: str, name: str) -> bool:
    """Whether a module's text defines, imports or quotes ``name`` (text rule, no parse)."""
    pattern = _IDENTIFIER_RE.format(re.escape(name))
    return re.search(pattern, text, re.MULTILINE) is not None


#: A module that answers names it does not bind: a module ``__getattr__``, a lazy module.
_LAZY = re.compile(r"def __getattr__\(|_LazyModule|_import_structure|define_import_structure")


def _module_has(text: str, name: str) -> bool:
    """A module-level name: bound at module level, or quoted in a lazy module.

    Bound: defined, assigned or imported; a lazy module's import table and ``__all__`` are
    strings. An ``__all__`` entry alone does not make a name importable (transformers' ``modular_*``
    files list names they no longer define).
    """
    tree = _parse(text)
    if tree is None:
        return module_mentions(text, name)
    if any(_binds(n, name) for n in _top_statements(tree.body)):
        return True
    return _LAZY.search(text) is not None and any(
        isinstance(n, ast.Constant) and n.value == name for n in ast.walk(tree)
    )


def _star_sources(text: str, module: str, path: str) -> list[str]:
    """The modules a module re-exports whole (``from .x import *``)."""
    tree = _parse(text)
    if tree is None:
        return []
    return [
        _absolute(module, path, node)
        for node in _top_statements(tree.body)
        if isinstance(node, ast.ImportFrom) and any(a.name == "*" for a in node.names)
    ]


def _lazy_package_has(files: Mapping[str, list[str]], package: str, name: str) -> bool:
    """A lazy package (transformers 5): a module under it lists ``name`` in its ``__all__``."""
    prefix = package.replace(".", "/") + "/"
    quoted = re.compile(rf"[\"']{re.escape(name)}[\"']")
    for path, texts in files.items():
        if path.startswith(prefix) and path.endswith(".py"):
            for text in texts:
                if "__all__" in text and quoted.search(text):
                    return True
    return False


def _find_class(
    files: Mapping[str, list[str]], module: str, name: str, hops: int = 2
) -> tuple[ast.ClassDef, ast.Module, str] | None:
    """A class by name in a module, or one hop through ``from x import Name``."""
    path = _module_file(files, module)
    tree = _parse(files[path][0]) if path else None
    if tree is None:
        return None
    for node in _top_statements(tree.body):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node, tree, module
    if hops:
        for node in _top_statements(tree.body):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        source = _absolute(module, path or "", node)
                        return _find_class(files, source, alias.name, hops - 1)
    return None


def _absolute(module: str, path: str, node: ast.ImportFrom) -> str:
    """The module an ``ImportFrom`` names, relative imports resolved."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.endswith("__init__.py") else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _class_members(
    files: Mapping[str, list[str]], found: tuple[ast.ClassDef, ast.Module, str], depth: int = 0
) -> Iterator[ast.stmt]:
    """The statements of a class's body and of its bases that the same files define."""
    cls, _, module = found
    yield from cls.body
    if depth > 8:
        return
    for base in cls.bases:
        base_name = base.id if isinstance(base, ast.Name) else None
        if base_name:
            parent = _find_class(files, module, base_name)
            if parent is not None:
                yield from _class_members(files, parent, depth + 1)


def _member_binds(node: ast.stmt, name: str) -> bool:
    """Whether a class-body statement defines ``name``.

    A def, a class attribute, or an instance attribute a method assigns (``self.name = ...``).
    """
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return node.name == name or any(
            isinstance(t, ast.Attribute)
            and t.attr == name
            and isinstance(t.value, ast.Name)
            and t.value.id == "self"
            for n in ast.walk(node)
            if isinstance(n, (ast.Assign, ast.AnnAssign))
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        )
    if isinstance(node, ast.ClassDef):
        return node.name == name
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
    if isinstance(node, ast.AnnAssign):
        return isinstance(node.target, ast.Name) and node.target.id == name
    return False


def _parameters(
    files: Mapping[str, list[str]],
    found: tuple[ast.ClassDef, ast.Module, str] | None,
    tree: ast.Module | None,
    name: str,
) -> dict[str, bool] | None:
    """A function's parameters, each mapped to whether it is required.

    A dataclass's fields stand for its ``__init__``; None when the function is not found.
    """
    candidates: Iterable[ast.stmt]
    if found is not None:
        candidates = list(_class_members(files, found))
    elif tree is not None:
        candidates = list(_top_statements(tree.body))
    else:
        return None
    for node in candidates:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
            a = node.args
            positional = [*a.posonlyargs, *a.args]
            first_default = len(positional) - len(a.defaults)
            out = {p.arg: i < first_default for i, p in enumerate(positional)}
            out.update({p.arg: d is None for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True)})
            return out
    if found is not None and name == "__init__":
        fields = {
            n.target.id: n.value is None
            for n in candidates
            if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
        }
        return fields or None
    return None


def has_feature(files: Mapping[str, list[str]], feature: Feature) -> tuple[bool | None, str]:
    """Whether a release's files have what a skew record names: (answer, the rule used).

    None when the files cannot say (a module ``ast`` cannot parse, a class defined nowhere
    in these files).
    """
    parts = feature.name.split(".")
    if feature.module:
        return _module_file(files, feature.name) is not None, "module file"
    if feature.level:
        module, name = ".".join(parts[:-1]), parts[-1]
        return _name_in_module(files, module, name)
    # The longest prefix that is a module here; the rest is a name, a class and member, ...
    split = next(
        (i for i in range(len(parts), 0, -1) if _module_file(files, ".".join(parts[:i]))), 0
    )
    if split == 0:
        return False, "no module file"
    module, rest = ".".join(parts[:split]), parts[split:]
    if not rest:
        return (True, "module file") if feature.keyword is None else (None, "no function")
    if feature.keyword is None and len(rest) == 1:
        return _name_in_module(files, module, rest[0])
    path = _module_file(files, module)
    tree = _parse(files[path][0]) if path else None
    if tree is None:
        return None, f"{path} does not parse"
    found = None
    for cls in rest[:-1]:
        found = _find_class(files, module if found is None else found[2], cls)
        if found is None:
            if len(rest) == 2 and not _name_in_module(files, module, cls)[0]:
                return False, f"no class {cls}"
            return None, f"class {cls} not defined in {module}"
    if feature.keyword is None:
        if found is None:
            return None, f"no class in {feature.name}"
        present = any(_member_binds(n, rest[-1]) for n in _class_members(files, found))
        return present, "class body or bases"
    params = _parameters(files, found, tree, rest[-1])
    if params is None:
        return False, f"no def {rest[-1]}"
    if feature.required:
        return params.get(feature.keyword, False), "required parameter"
    return feature.keyword in params, "parameter"


def _name_in_module(
    files: Mapping[str, list[str]], module: str, name: str, hops: int = 2
) -> tuple[bool | None, str]:
    """Whether a module has a module-level name, and the rule that said so."""
    path = _module_file(files, module)
    if path is None:
        return False, "no module file"
    text = files[path][0]
    if _module_has(text, name):
        return True, "module-level name, or quoted in a lazy module"
    if path.endswith("__init__.py") and "define_import_structure" in text:
        return _lazy_package_has(files, module, name), "lazy package: __all__ of its modules"
    if hops and not name.startswith("_"):
        for source in _star_sources(text, module, path):
            if _name_in_module(files, source, name, hops - 1)[0]:
                return True, f"re-exported by `from {source} import *`"
    return False, "module-level name, or quoted in a lazy module"


def skew_feature(record: Mapping[str, Any]) -> Feature:
    """The feature a skew record's presence test asks about."""
    skew = record["skew"]
    name: str = skew["name"]
    message: str = record.get("errorMessage", "")
    keyword = None
    m = re.fullmatch(r"(.+)\((\w+)\)", name)
    if m:
        name, keyword = m[1], m[2]
    return Feature(
        name=name,
        keyword=keyword,
        required=skew["change"] == "required",
        module=keyword is None and message.startswith("No module named"),
        level=keyword is None and message.startswith("cannot import name"),
    )


# ---------------------------------------------------------------------------- pins

_PIN = re.compile(r"pip install '([^']+)'")


def parse_pins(texts: Iterable[str]) -> list[Requirement]:
    """Every ``pip install 'pkg<X'`` (``<=``, ``>=``, ``==``) named in these texts."""
    return [pin for text in texts for m in _PIN.finditer(text) if (pin := _requirement(m[1]))]


def _requirement(text: str) -> Requirement | None:
    try:
        return Requirement(text)
    except InvalidRequirement:
        return None


def resolve_pin(
    requirement: Requirement, releases: Sequence[str], yanked: Iterable[str] = ()
) -> str | None:
    """The newest release of the list that pip would pick for the pin, or None.

    Yanked and pre-releases are left out, as pip leaves them.

    >>> resolve_pin(Requirement("x<2.0"), ["1.0", "1.5", "2.0", "2.1rc1"])
    '1.5'
    """
    skip = set(yanked)
    best: tuple[Version, str] | None = None
    for text in releases:
        if text in skip:
            continue
        try:
            version = Version(text)
        except InvalidVersion:
            continue
        if version.is_prerelease or version not in requirement.specifier:
            continue
        if best is None or version > best[0]:
            best = (version, text)
    return best[1] if best else None


def _pin_intent(requirement: Requirement, changed_in: str) -> str:
    """``before`` for a pin that restores the old release, ``after`` for an upgrade."""
    for spec in requirement.specifier:
        if spec.operator in ("<", "<="):
            return "before"
        if spec.operator in (">", ">=", "~="):
            return "after"
        if spec.operator == "==":
            return "before" if Version(spec.version) < Version(changed_in) else "after"
    return "after"


# ---------------------------------------------------------------------------- conditions

_CHECK_CALL = re.compile(
    r"(?P<name>\b[A-Z][A-Z0-9_]*(?:CHECK|ASSERT)[A-Z0-9_]*|\btorch\._check\w*|\b_check\w*)\s*\("
)
_ASSERT = re.compile(r"^\s*assert\b")
_IF_THROW = re.compile(r"\bif\s*\(")
_PY_OPS = ("==", "!=", "<=", ">=", "<", ">", " is not ", " is ", " not in ", " in ")
_INVERSE = {
    "==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">",
    " is ": " is not ", " is not ": " is ", " in ": " not in ", " not in ": " in ",
}  # fmt: skip


def _split_args(text: str) -> list[str] | None:
    """The top-level, comma-separated arguments of a call whose ``(`` starts ``text``."""
    args, start = [], 1
    for i, c, depth in _outside_quotes(text):
        if depth == 0:
            args.append(text[start:i])
            return [a.strip() for a in args]
        if c == "," and depth == 1:
            args.append(text[start:i])
            start = i + 1
    return None


def _top_level_ops(cond: str, python: bool) -> list[tuple[int, str]]:
    """The comparison operators outside brackets and quotes: (position, operator)."""
    level = {i for i, c, depth in _outside_quotes(cond) if depth == 0 and c not in ")]}"}
    candidates = _PY_OPS if python else _PY_OPS[:6]
    ops: list[tuple[int, str]] = []
    i = 0
    while i < len(cond):
        if i in level:
            if cond.startswith(("<<", ">>", "->", "=>"), i):
                i += 2
                continue
            op = next((op for op in candidates if cond.startswith(op, i)), None)
            if op:
                ops.append((i, op))
                i += len(op)
                continue
        i += 1
    return ops


def failure_forms(cond: str, *, python: bool) -> list[str]:
    """The ways a documentation may state that the check ``cond`` fails, whitespace removed.

    >>> failure_forms("x < n", python=True)
    ['not(x<n)', 'notx<n', '!(x<n)', 'x>=n']
    """
    squeeze = re.sub(r"\s+", "", cond)
    forms = [f"not({squeeze})", f"not{squeeze}", f"!({squeeze})"]
    joined = re.search(r"\b(and|or)\b|&&|\|\|", cond)
    ops = _top_level_ops(cond, python)
    if len(ops) == 1 and not joined:
        at, op = ops[0]
        inverted = cond[:at] + _INVERSE[op] + cond[at + len(op) :]
        forms.append(re.sub(r"\s+", "", inverted))
    return forms


def site_condition(text: str, line: int) -> tuple[str, str] | None:
    """The condition at a site: (``check`` or ``if``, its source text), or None.

    A check macro or call starting on the line (``TORCH_CHECK(c, ...)``, ``torch._check(c,
    ...)``; ``_check_with(Cls, c, ...)``), an ``assert c, ...``, or the ``if (c)`` that opens
    the lines up to a ``throw``.
    """
    lines = text.replace("\\\n", " \n").splitlines()  # a macro's line continuations
    if not 0 < line <= len(lines):
        return None
    rest = "\n".join(lines[line - 1 : line + 30])
    head = lines[line - 1]
    if _ASSERT.match(head):
        body = "(" + rest.split("assert", 1)[1]
        args = _split_args(body + ")")
        return ("check", args[0]) if args else None
    m = _CHECK_CALL.search(head)
    if m:
        args = _split_args(rest[m.end() - 1 :])
        if not args:
            return None
        index = 1 if m["name"].endswith("_check_with") else 0
        if m["name"].endswith(("_EQ", "_NE", "_LT", "_LE", "_GT", "_GE")):
            return None
        if len(args) > index and args[index].strip() in ("false", "False", "0"):
            return None  # always fails: the ``if`` around it is the condition, not judged here
        return ("check", args[index]) if len(args) > index else None
    if re.search(r"\bthrow\b|\bpanic!|return Err\b|\braise\b", head):
        for back in range(line - 1, max(0, line - 6), -1):
            m = _IF_THROW.search(lines[back - 1])
            if m:
                block = "\n".join(lines[back - 1 : line])
                args = _split_args(block[block.index("(", m.start()) :])
                return ("if", args[0]) if args else None
    return None


def doc_condition(documentation: str) -> tuple[str, bool] | None:
    """The condition after `` when `` in a documentation, and whether it was cut short.

    Whitespace is removed; a condition the writer cut short ends in ``....``.
    """
    if " when " not in documentation:
        return None
    cond = documentation.split(" when ", 1)[1].strip()
    cut = cond.endswith("...")
    cond = cond.rstrip(".") if cut else cond.removesuffix(".")
    return re.sub(r"\s+", "", cond), cut


def condition_verdict(
    documentation: str, site: tuple[str, str], *, python: bool
) -> tuple[bool | None, str]:
    """Whether the documentation states the failure of the site's condition."""
    stated = doc_condition(documentation)
    if stated is None:
        return None, "no condition"
    doc, cut = stated
    kind, cond = site
    if kind == "if":
        squeeze = re.sub(r"\s+", "", cond)
        if squeeze in doc or (cut and squeeze.startswith(doc)):
            return True, "if condition"
        return (None, "cut short") if cut else (False, f"the throw's condition is {cond!r}")
    forms = failure_forms(cond, python=python)
    if any(f in doc for f in forms) or (cut and any(f.startswith(doc) for f in forms)):
        return True, "states the failure"
    if cut:
        return None, "cut short"
    return False, f"the check passes when {cond!r}; the documentation says when {doc!r}"


# ---------------------------------------------------------------------------- the audit


@attrs.define(kw_only=True)
class Pack:
    """One pack's releases: the list, the readable ones and where each archive lies."""

    name: str
    distribution: str
    releases: list[str]
    unread: dict[str, str]
    yanked: set[str]
    archives: dict[str, Path]
    mined: set[str]

    def read(self) -> list[str]:
        return [v for v in self.releases if v not in self.unread]

    def neighbour(self, version: str, step: int) -> str | None:
        """The release just before (-1) or after (+1) this one in the full list."""
        if version not in self.releases:
            return None
        i = self.releases.index(version) + step
        return self.releases[i] if 0 <= i < len(self.releases) else None


@attrs.define
class Outcome:
    """The verdicts of one record: check -> True (right), False (wrong), None (not checkable)."""

    record: str
    verdicts: dict[str, bool | None] = attrs.field(factory=dict)
    failures: list[dict[str, str]] = attrs.field(factory=list)

    def right(self, check: str) -> None:
        """The check holds (unless another part of it failed or could not be told)."""
        self.put(check, verdict=True)

    def unknown(self, check: str) -> None:
        """The check cannot be told from the archives."""
        self.put(check, verdict=None)

    def wrong(self, check: str, release: str, reason: str) -> None:
        """The check fails: at ``release``, for ``reason``."""
        self.put(check, verdict=False, release=release, reason=reason)

    def put(self, check: str, *, verdict: bool | None, release: str = "", reason: str = "") -> None:
        """Add a verdict: one wrong makes the check wrong, else one unknown makes it unknown."""
        previous = self.verdicts.get(check, True)
        if verdict is False or previous is False:
            self.verdicts[check] = False
        elif verdict is None or previous is None:
            self.verdicts[check] = None
        else:
            self.verdicts[check] = True
        if verdict is False:
            self.failures.append(
                {"record": self.record, "check": check, "release": release, "reason": reason}
            )


def _version_key(text: str) -> Version:
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def _toml(path: Path) -> dict[str, Any]:
    """A TOML file's table (tomllib: Python 3.11 and newer, as ``nox -s audit`` runs)."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib.loads(path.read_text(encoding="utf-8"))
    msg = f"{path}: reading it needs tomllib, Python 3.11 or newer"  # pragma: no cover
    raise RuntimeError(msg)  # pragma: no cover


def load_packs(pins: Path, packs: Path, cache: Path) -> dict[str, Pack]:
    """Every pack's release list, with the archive of each release.

    ``PACK.releases`` when the pack has one, else the pinned releases of sources.toml and
    releases.toml (those without an archive are unread).
    """
    sources = _toml(pins / "sources.toml")
    others = _toml(pins / "releases.toml")
    between = {d["pack"]: d.get("release", []) for d in others.get("distribution", [])}
    out = {}
    for dist in sources["distribution"]:
        pack, name = dist["pack"], str(canonicalize_name(dist["name"]))
        archives, unread, yanked = {}, {}, set()
        for pin in [*dist["file"], *between.get(pack, [])]:
            if "missing" in pin:
                unread[pin["version"]] = pin["missing"]
                continue
            archives[pin["version"]] = cache / pin["url"].rsplit("/", 1)[1]
            if pin.get("yanked"):
                yanked.add(pin["version"])
        releases = sorted({*archives, *unread}, key=_version_key)
        listed = packs / f"{pack}.releases"
        if listed.is_file():
            data = json.loads(listed.read_text(encoding="utf-8"))
            for key, entry in data.get("distributions", {}).items():
                if canonicalize_name(key) == name:
                    releases = list(entry["releases"])
                    unread = dict(entry.get("unread", {}))
        for version in releases:
            if version not in unread and not archives.get(version, cache / "-").is_file():
                unread[version] = "no archive in the cache"
        mined = {pin["version"] for pin in dist["file"]}
        out[pack] = Pack(
            name=pack,
            distribution=name,
            releases=releases,
            unread=unread,
            yanked=yanked,
            archives=archives,
            mined=mined,
        )
    return out


def sample(records: Sequence[dict[str, Any]], size: int, seed: int) -> list[dict[str, Any]]:
    """``size`` records (all when fewer), chosen by ``random.Random(seed)`` from id order."""
    ordered = sorted(records, key=lambda r: str(r["id"]))
    if len(ordered) <= size:
        return ordered
    return random.Random(seed).sample(ordered, size)  # noqa: S311 (a sample, not a secret)


def _is_native(record: Mapping[str, Any]) -> bool:
    return "native" in record.get("tags", ()) or str(record.get("filePath", "")).endswith(
        NATIVE_SUFFIXES
    )


def _newest_site(record: Mapping[str, Any]) -> tuple[str, str, int] | None:
    """(release, path, line) of the newest release in ``versions.sites``."""
    sites = record.get("versions", {}).get("sites") or {}
    path, out = "", None
    for version in sorted(sites, key=_version_key):
        where, _, line = str(sites[version]).rpartition(":")
        path = where or path
        out = (version, path, int(line))
    return out


@attrs.frozen
class Question:
    """One thing to look up in one release."""

    kind: str  # one of: site, message, feature
    args: tuple[Any, ...]


def _message_question(record: Mapping[str, Any], *, strict: bool = False) -> Question:
    """Does a release raise this record's message: its pieces of 4 characters or more.

    ``strict`` (asked of the releases just outside a record's range, to say they raise it):
    a Python record's class is part of what it says (the same text raised by another class
    is another record: torch 2.6.0 renamed ``CppWrapperCodeGenError``; vLLM 0.28.0 raises
    another class than ``ValueError`` with a message 0.27.1 raised), so the statement that
    raises the text must name the class's short name (:func:`_raised_as`).
    """
    code, literal = message_parts(record["errorMessage"])
    native = _is_native(record)
    cls = "" if native or not strict else (record.get("errorClass") or "").rpartition(".")[2]
    return Question("message", (tuple(literal_pieces(literal, 4)), native, code, cls))


def _questions(record: Mapping[str, Any], pack: Pack) -> dict[str, set[Question]]:
    """The lookups a record needs: release -> questions."""
    out: dict[str, set[Question]] = {}

    def ask(version: str | None, question: Question) -> None:
        if version and version not in pack.unread and version in pack.archives:
            out.setdefault(version, set()).add(question)

    if "skew" in record:
        skew, feature = record["skew"], skew_feature(record)
        ask(skew.get("lastBefore"), Question("feature", (feature,)))
        ask(skew.get("changedIn"), Question("feature", (feature,)))
        for pin in parse_pins([*record.get("solutions", ()), record.get("documentation", "")]):
            ask(resolve_pin(pin, pack.releases, pack.yanked), Question("feature", (feature,)))
        return out
    site = _newest_site(record)
    if site:
        ask(site[0], Question("site", (site[1], int(record.get("lineNumber", site[2])))))
    message, strict = _message_question(record), _message_question(record, strict=True)
    versions = record.get("versions", {})
    read = pack.read()
    first, last = versions.get("first"), versions.get("last") or (read[-1] if read else None)
    for version in (first, last):
        ask(version, message)
    for version in (pack.neighbour(first or "", -1), pack.neighbour(last or "", 1)):
        ask(version, strict)
    return out


def _answer(release: Release, question: Question) -> Any:
    if question.kind == "feature":
        return has_feature(release.files, question.args[0])
    if question.kind == "message":
        pieces, native, code, cls = question.args
        return release.has_message(pieces, native, code, cls) if pieces or code else None
    path, line = question.args
    texts = release.files.get(path)
    if not texts:
        return None
    text = texts[0] if len(texts) == 1 else "\n".join(texts)
    suffix = Path(path).suffix
    if suffix == ".py":
        literals = python_literals(text, line)
        end = statement_end(text, line)
        wider = python_literals(text, line, function_start(text, line), end)
        if _calls_a_helper(text, line, end):
            wider += _HOLE + file_literals(text, ".py")
    else:
        rust = suffix == ".rs"
        literals = _HOLE.join(native_literals(t, line, rust=rust) for t in texts)
        wider = _HOLE.join(
            native_literals(
                t, line, function_start(t, line), statement_end(t, line, python=False), rust=rust
            )
            for t in texts
        )
    lines = text.splitlines()
    start = min(function_start(text, line), max(1, line - WINDOW_BEFORE))
    return {
        "literals": literals,
        "function": wider,
        "code": squeeze("\n".join(lines[start - 1 : line + WINDOW_AFTER])),
        "condition": site_condition(texts[0], line),
        "copies": len(set(texts)),  # an sdist may ship one file twice, the same
    }


def _judge(
    record: dict[str, Any], pack: Pack, answers: Mapping[tuple[str, Question], Any]
) -> Outcome:
    """The verdicts of one record from the answers of its releases."""
    outcome = Outcome(str(record["id"]))

    def answer(version: str | None, question: Question) -> Any:
        return answers.get((version or "", question))

    if "skew" in record:
        _judge_skew(record, pack, outcome, answer)
    else:
        _judge_site(record, outcome, answer)
        _judge_bounds(record, pack, outcome, answer)
    return outcome


def _judge_site(
    record: dict[str, Any], outcome: Outcome, answer: Callable[[str | None, Question], Any]
) -> None:
    """Site, template and condition, at the newest release of ``versions.sites``."""
    site = _newest_site(record)
    if site is None:
        outcome.unknown("site")
        return
    code, literal = message_parts(record["errorMessage"])
    pieces = literal_pieces(literal, 3)
    version, path, line = site
    body = (record.get("filePath"), record.get("lineNumber"))
    if body != (path, line):
        outcome.wrong("site", version, f"sites[{version}] is {path}:{line}, the body {body}")
    found = answer(version, Question("site", (str(body[0]), int(body[1] or 0))))
    if found is None:
        outcome.wrong("site", version, f"no file {body[0]} in {version}")
        outcome.unknown("template")
        return
    if found["copies"] > 1:  # src/ dropped from two crates: `lib.rs` of each, two texts
        outcome.wrong("site", version, f"{body[0]} names {found['copies']} files of {version}")
    literals = found["literals"]
    longest = max(pieces or [""], key=len)
    if longest not in literals and composed(longest, found["function"]):
        literals = found["function"]  # assigned to a name above the raise
    if code and code not in found["code"]:
        outcome.wrong("site", version, f"the condition {code!r} is not at line {body[1]}")
    elif composed(longest, literals) and (longest or code):
        outcome.right("site")
    else:
        outcome.wrong("site", version, f"{longest!r} not in the literals at line {body[1]}")
    if pieces_in_order(pieces, literals) or (
        # joined from a name assigned above: source order is not message order
        literals is found["function"] and all(composed(p, literals) for p in pieces)
    ):
        outcome.right("template")
    else:
        missing = next((p for p in pieces if p not in literals), "order")
        outcome.wrong("template", version, f"piece {missing!r} not at the site")
    _judge_condition(record, found["condition"], _is_native(record), outcome, version)


def _judge_bounds(
    record: dict[str, Any],
    pack: Pack,
    outcome: Outcome,
    answer: Callable[[str | None, Question], Any],
) -> None:
    """``first`` raises the message and the release before does not; ``last`` likewise."""
    message, strict = _message_question(record), _message_question(record, strict=True)
    versions = record.get("versions", {})
    read = pack.read()
    first = versions.get("first")
    last = versions.get("last") or (read[-1] if read else None)
    for check, edge, step in (("first", first, -1), ("last", last, 1)):
        has = answer(edge, message) if edge else None
        if edge and has is False:
            outcome.wrong(check, edge, f"{edge} does not raise it")
            continue
        outside = pack.neighbour(edge, step) if edge else None
        if not edge or has is None or (outside is None and step < 0):
            outcome.unknown(check)
            continue
        beyond = answer(outside, strict) if outside else False
        if beyond is None:
            outcome.unknown(check)
        elif beyond:
            where = "before" if step < 0 else "after"
            mined = "" if outside in pack.mined else " (not mined)"
            outcome.wrong(check, str(outside), f"{outside}{mined}, just {where} {edge}, raises it")
        else:
            outcome.right(check)


def _judge_condition(
    record: Mapping[str, Any],
    site: tuple[str, str] | None,
    native: bool,
    outcome: Outcome,
    version: str,
) -> None:
    tags = record.get("tags", ())
    documentation = str(record.get("documentation", ""))
    if " when " not in documentation:
        return
    in_scope = native or "check" in tags or (site is not None and site[0] == "check")
    if not in_scope:
        return
    if site is None:
        outcome.unknown("condition")
        return
    verdict, reason = condition_verdict(documentation, site, python=not native)
    outcome.put("condition", verdict=verdict, release=version, reason=reason)


def _judge_skew(
    record: dict[str, Any],
    pack: Pack,
    outcome: Outcome,
    answer: Callable[[str | None, Question], Any],
) -> None:
    """The name's presence at ``lastBefore`` and ``changedIn``, and at each pin's release."""
    skew = record["skew"]
    feature = skew_feature(record)
    question = Question("feature", (feature,))
    before_state = skew["change"] not in ("added", "required")
    for check_release, expected in (
        (skew.get("lastBefore"), before_state),
        (skew.get("changedIn"), not before_state),
    ):
        got = answer(check_release, question)
        if got is None:
            outcome.unknown("skew")
            continue
        present, rule = got
        if present is None:
            outcome.unknown("skew")
        elif present != expected:
            has = "has" if present else "lacks"
            outcome.wrong("skew", check_release, f"{check_release} {has} {skew['name']} ({rule})")
        else:
            outcome.right("skew")
    for pin in parse_pins([*record.get("solutions", ()), record.get("documentation", "")]):
        if canonicalize_name(pin.name) != canonicalize_name(pack.distribution):
            outcome.wrong("pins", "", f"pin {pin} names another distribution")
            continue
        resolved = resolve_pin(pin, pack.releases, pack.yanked)
        if resolved is None:
            outcome.wrong("pins", "", f"pin {pin} matches no release")
            continue
        intent = _pin_intent(pin, skew["changedIn"])
        expected = before_state if intent == "before" else not before_state
        got = answer(resolved, question)
        if got is None or got[0] is None:
            outcome.unknown("pins")
        elif got[0] != expected:
            has = "has" if got[0] else "lacks"
            outcome.wrong("pins", resolved, f"pin {pin} gives {resolved}, which {has} it")
        else:
            outcome.right("pins")


@attrs.define(kw_only=True)
class Report:
    """The audit's results per pack."""

    seed: int
    per_pack: dict[str, int]
    sampled: dict[str, Counter[str]] = attrs.field(factory=dict)
    tallies: dict[str, dict[str, Counter[str]]] = attrs.field(factory=dict)
    failures: list[dict[str, str]] = attrs.field(factory=list)

    def as_json(self) -> dict[str, Any]:
        return {
            "schema": "errkb.audit/1",
            "seed": self.seed,
            "perPack": self.per_pack,
            "sampled": {k: dict(v) for k, v in self.sampled.items()},
            "checks": {p: {c: dict(t) for c, t in v.items()} for p, v in self.tallies.items()},
            "failures": self.failures,
        }


def _suffixes(questions: Iterable[Question]) -> tuple[str, ...]:
    out: set[str] = set()
    for q in questions:
        if q.kind == "feature":
            out.update((".py", ".pyi"))
        elif q.kind == "message":
            out.update(NATIVE_SUFFIXES if q.args[1] else (".py",))
        else:
            out.add(Path(q.args[0]).suffix)
    return tuple(sorted(out))


def run_audit(
    packs_dir: Path,
    cache: Path,
    *,
    pins: Path | None = None,
    per_pack: int | None = None,
    seed: int = 0,
    only: Sequence[str] = (),
    log: Any = None,
) -> Report:
    """Sample each pack's records and check them against the archives: see the module doc."""
    lists = load_packs(pins or packs_dir, packs_dir, cache)
    report = Report(seed=seed, per_pack={})
    for name, pack in lists.items():
        path = packs_dir / f"{name}.jsonl"
        if (only and name not in only) or not path.is_file():
            continue
        size = per_pack or (60 if name in BIG_PACKS else 30)
        report.per_pack[name] = size
        with path.open(encoding="utf-8") as handle:
            records = [json.loads(line) for line in handle if line.strip()]
        chosen = sample(records, size, seed)
        report.sampled[name] = Counter("skew" if "skew" in r else "messages" for r in chosen)
        wanted: dict[str, set[Question]] = {}
        for record in chosen:
            for version, questions in _questions(record, pack).items():
                wanted.setdefault(version, set()).update(questions)
        answers: dict[tuple[str, Question], Any] = {}
        for version in sorted(wanted, key=_version_key):
            if log:
                log(f"{name} {version}: {len(wanted[version])} lookups")
            release = Release(read_archive(pack.archives[version], _suffixes(wanted[version])))
            for question in wanted[version]:
                answers[(version, question)] = _answer(release, question)
            del release
        tally: dict[str, Counter[str]] = {c: Counter() for c in CHECKS}
        for record in chosen:
            outcome = _judge(record, pack, answers)
            for check, verdict in outcome.verdicts.items():
                tally[check][
                    "right" if verdict else "wrong" if verdict is False else "unchecked"
                ] += 1
            for failure in outcome.failures:
                report.failures.append({"pack": name, **failure})
        report.tallies[name] = tally
    return report


def _cell(tally: Counter[str]) -> str:
    checked = tally["right"] + tally["wrong"]
    if not checked:
        return "-"
    return f"{tally['right']}/{checked} ({100 * tally['right'] / checked:.0f}%)"


def markdown(report: Report) -> str:
    """The result table: per pack and overall, right / checked for each check."""
    head = ["pack", "sampled (skew)", "site", "template", "first", "last", "skew boundary",
            "pins", "condition"]  # fmt: skip
    rows = ["| " + " | ".join(head) + " |", "| --- | ---: |" + " ---: |" * (len(head) - 2)]
    total: dict[str, Counter[str]] = {c: Counter() for c in CHECKS}
    sampled: Counter[str] = Counter()
    for name, tally in report.tallies.items():
        counts = report.sampled[name]
        sampled.update(counts)
        for check in CHECKS:
            total[check].update(tally[check])
        n = counts["skew"] + counts["messages"]
        rows.append(
            f"| {name} | {n} ({counts['skew']}) | "
            + " | ".join(_cell(tally[c]) for c in CHECKS)
            + " |"
        )
    n = sampled["skew"] + sampled["messages"]
    rows.append(
        f"| **all** | {n} ({sampled['skew']}) | "
        + " | ".join(_cell(total[c]) for c in CHECKS)
        + " |"
    )
    unchecked = ", ".join(f"{c} {total[c]['unchecked']}" for c in CHECKS if total[c]["unchecked"])
    return "\n".join(rows) + (f"\n\nNot checkable: {unchecked}." if unchecked else "") + "\n"


def write_docs(path: Path, table: str, command: str) -> None:
    """Put the table between the audit markers of a Markdown file."""
    text = path.read_text(encoding="utf-8")
    start, end = MARKERS
    if start not in text or end not in text:
        msg = f"{path}: no {start} ... {end} markers to write the audit table between"
        raise ValueError(msg)
    before, rest = text.split(start, 1)
    _, after = rest.split(end, 1)
    body = f"{start}\n\n`{command}`\n\n{table}\n{end}"
    path.write_text(before + body + after, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m errkb.mine._audit``: print the table and the failures."""
    parser = argparse.ArgumentParser(
        prog="python -m errkb.mine._audit", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--packs", type=Path, default=Path("records/mined"))
    parser.add_argument("--cache", type=Path, default=Path(".mine-cache"))
    parser.add_argument("--pins", type=Path, help="where sources.toml and releases.toml lie "
                        "(default: --packs when it has them, else records/mined)")  # fmt: skip
    parser.add_argument(
        "--per-pack", type=int, help="records per pack (60 for the big five, else 30)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", nargs="*", default=(), help="the packs to audit (all by default)")
    parser.add_argument("--write-docs", type=Path, help="write the table into this Markdown file")
    parser.add_argument("--json", type=Path, help="write the results and failures as JSON")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args(argv)
    pins = args.pins or (
        args.packs if (args.packs / "sources.toml").is_file() else Path("records/mined")
    )

    def log(text: str) -> None:
        if not args.quiet:
            print(text, file=sys.stderr, flush=True)

    report = run_audit(args.packs, args.cache, pins=pins, per_pack=args.per_pack, seed=args.seed,
                       only=args.only, log=log)  # fmt: skip
    table = markdown(report)
    for f in report.failures:
        print(f"{f['pack']}\t{f['record']}\t{f['check']}\t{f['release']}\t{f['reason']}")
    print()
    print(table)
    if args.json:
        args.json.write_text(json.dumps(report.as_json(), indent=1) + "\n", encoding="utf-8")
    if args.write_docs:
        size = f" --per-pack {args.per_pack}" if args.per_pack else ""
        write_docs(args.write_docs, table, f"python -m errkb.mine._audit --seed {args.seed}{size}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
