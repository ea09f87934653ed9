"""Finding the call that built an engine in the traceback, and rewriting it with new settings.

The source is parsed with :mod:`ast` (never run); edits are made on the original text at the
nodes' positions, so the user's own formatting, comments and other arguments stay as they are.
"""

from __future__ import annotations

import ast
import linecache
from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from errkb.findings import FrameInfo

__all__ = ["ENGINE_CALLS", "CallSite", "find_engine_call", "rewrite_call"]

_Edit = tuple[int, int, int, int, bytes]  # line, column, end line, end column, new text

#: Names of the calls that build an LLM engine (the last part of a dotted call).
ENGINE_CALLS = frozenset(
    {
        "LLM",
        "EngineArgs",
        "AsyncEngineArgs",
        "LLMEngine",
        "AsyncLLMEngine",
        "AsyncLLM",
        "from_engine_args",
        "from_vllm_config",
    }
)


@attrs.frozen(kw_only=True)
class CallSite:
    """A call in a source file: where it is, its text, and the keywords it passes."""

    file: str
    line: int
    end_line: int
    text: str
    keywords: tuple[str, ...]
    has_double_star: bool
    library: bool
    user_frame: FrameInfo | None


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _calls_at(tree: ast.AST, line: int) -> list[ast.Call]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in ENGINE_CALLS:
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end:
                out.append(node)
    return sorted(out, key=lambda n: (n.end_lineno or n.lineno) - n.lineno)


def _parse(file: str) -> tuple[list[str], ast.AST] | None:
    lines = linecache.getlines(file)
    if not lines:
        return None
    try:
        return lines, ast.parse("".join(lines), filename=file)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def find_engine_call(frames: Sequence[FrameInfo]) -> CallSite | None:
    """The outermost frame whose current line is inside an engine-building call.

    Outermost first: when ``LLM(...)`` in the user's code calls ``LLMEngine.from_engine_args``
    inside vLLM, the user's call is the one to rewrite.
    """
    for position, frame in enumerate(frames):
        parsed = _parse(frame.file)
        if parsed is None:
            continue
        lines, tree = parsed
        calls = _calls_at(tree, frame.line)
        if not calls:
            continue
        node = calls[0]
        end = node.end_lineno or node.lineno
        user = next((f for f in reversed(frames[:position]) if not f.library), None)
        return CallSite(
            file=frame.file,
            line=node.lineno,
            end_line=end,
            text="".join(lines[node.lineno - 1 : end]).rstrip("\n"),
            keywords=tuple(k.arg for k in node.keywords if k.arg),
            has_double_star=any(k.arg is None for k in node.keywords),
            library=frame.library,
            user_frame=user if frame.library else None,
        )
    return None


def rewrite_call(site: CallSite, settings: Mapping[str, object]) -> str | None:
    """The call's lines with ``settings`` set as keyword arguments; None if it can't be done."""
    try:
        tree = ast.parse(_dedented(site.text))
    except SyntaxError:
        return None
    call = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.Call) and _name(n.func) in ENGINE_CALLS),
        None,
    )
    if call is None:
        return None
    indent = len(site.text) - len(site.text.lstrip(" "))
    lines = [line.encode() for line in _dedented(site.text).split("\n")]
    edits: list[_Edit] = []
    existing = {k.arg: k for k in call.keywords if k.arg}
    additions = []
    for key, value in settings.items():
        text = repr(value).encode()
        kw = existing.get(key)
        if kw is not None:
            v = kw.value
            edits.append(
                (v.lineno, v.col_offset, v.end_lineno or v.lineno, v.end_col_offset or 0, text)
            )
        else:
            additions.append(f"{key}={text.decode()}".encode())
    if additions:
        edits.extend(_insertion(call, lines, additions))
    for line, col, end_line, end_col, new in sorted(edits, reverse=True):
        head, tail = lines[line - 1][:col], lines[end_line - 1][end_col:]
        replacement = (head + new + tail).split(b"\n")
        lines[line - 1 : end_line] = replacement
    out = b"\n".join(lines).decode()
    return "\n".join((" " * indent + ln) if ln else ln for ln in out.split("\n"))


def _insertion(call: ast.Call, lines: list[bytes], additions: list[bytes]) -> list[_Edit]:
    """The edits that add keywords: before the closing parenthesis, or on new lines."""
    end_line, end_col = call.end_lineno or call.lineno, (call.end_col_offset or 1) - 1
    args: list[ast.AST] = [*call.args, *call.keywords]
    last = args[-1] if args else None
    last_line = getattr(last, "end_lineno", None) or 0
    if last is None or last_line >= end_line:
        sep = b", " if args else b""
        return [(end_line, end_col, end_line, end_col, sep + b", ".join(additions))]
    # One argument per line: ours go on new lines, indented like the last argument, after any
    # comment on its line; the last argument gets a comma if it had none.
    last_end = getattr(last, "end_col_offset", 0) or 0
    text = lines[last_line - 1]
    first = lines[(getattr(last, "lineno", None) or last_line) - 1]
    indent = first[: len(first) - len(first.lstrip())]
    edits: list[_Edit] = []
    if not text[last_end:].lstrip().startswith(b","):
        edits.append((last_line, last_end, last_line, last_end, b","))
    new = b"".join(b"\n" + indent + a + b"," for a in additions)
    edits.append((last_line, len(text), last_line, len(text), new))
    return edits


def _dedented(text: str) -> str:
    indent = len(text) - len(text.lstrip(" "))
    return "\n".join(ln[indent:] if ln[:indent].strip() == "" else ln for ln in text.split("\n"))
