"""Messages that native code raises into Python: torch's C++ checks and Rust bindings' errors.

Python users see these messages with nothing in their traceback to say where they came from,
so the miner reads the C++ and Rust sources a distribution ships (torch's headers, the
sdists of safetensors and tokenizers) and turns each message into a :class:`Site`, as the
Python reader does for ``raise``.

No compiler is involved: a small lexer blanks comments and string literals out of a copy of the
text, so that macro names, parentheses and commas are found only in code, while the literals'
decoded values are kept aside by offset. The copies have the same length as the source, so an
offset means the same place in each.

C++: the ``TORCH_CHECK`` family (``STD_TORCH_CHECK`` and ``TORCH_CHECK_EQ`` and its kin too)
and ``TORCH_INTERNAL_ASSERT``. The message is what Python prints: c10 joins the arguments after
the condition (``c10::str``), and Python shows the error's text without the C++ backtrace
(unless ``TORCH_SHOW_CPP_STACKTRACES`` is set). A check with no message gets c10's default
text, which quotes the condition; an internal assert prefixes the condition and the file and
line of the build. A check raises when its condition is false: the site's condition is the one
that failed (``a == b`` is ``a != b``).

Rust (pyo3 bindings and their core crates): ``X::new_err(...)``, ``PyErr::new::<X, _>(...)``,
``PyError(...).into_pyerr::<X>()``, ``#[error("...")]`` (thiserror), ``Err("...".into())``
in crates whose errors reach Python through one wrapper, and ``panic!``.
"""

from __future__ import annotations

import bisect
import builtins
import re
from collections.abc import Iterable, Iterator
from typing import Final

from errkb._attrs import attrs
from errkb.mine._site import Hole, Site, Template
from errkb.mine._sources import passed_over

__all__ = ["CPP_SUFFIXES", "RUST_SUFFIXES", "native_sites"]

CPP_SUFFIXES: Final = (".h", ".hpp", ".hh", ".cpp", ".cc", ".cxx", ".cu", ".cuh")
RUST_SUFFIXES: Final = (".rs",)


def native_sites(
    files: Iterable[tuple[str, str]],
    *,
    distribution: str,
    version: str,
    excerpt_lines: int = 10,
) -> Iterator[Site]:
    """The message sites in C++ and Rust sources: ``files`` are (relative path, text) pairs.

    Files of other languages, and the files of tests and benchmarks
    (:func:`errkb.mine._sources.passed_over`), are passed over. Rust files are read twice (all
    of them are kept in memory): first for the exception classes that ``create_exception!``
    defines, whose Python names the sites need, and for the module files that
    ``#[cfg(test)] mod name;`` declares, which are left out. Each site's excerpt holds
    ``excerpt_lines`` lines on each side of the message.

    >>> src = 'void f(int n) { TORCH_CHECK(n > 0, "n must be positive, got ", n); }'
    >>> [s.template for s in native_sites([("f.cpp", src)], distribution="d", version="1")]
    [('n must be positive, got ', Hole(expr='n', number=False))]
    """
    about = {"distribution": distribution, "version": version}
    rust: list[tuple[str, _Lexed]] = []
    for path, text in files:
        if passed_over(path):
            continue
        if path.endswith(CPP_SUFFIXES):
            yield from _cpp_sites(path, text, excerpt_lines, **about)
        elif path.endswith(RUST_SUFFIXES):
            rust.append((path, _lex(text, rust=True)))
    classes: dict[str, str] = {}
    tests: set[str] = set()
    for path, lexed in rust:
        for m in _CREATE_EXCEPTION.finditer(lexed.masked):
            classes[m["name"]] = f"{m['module']}.{m['name']}"
        tests |= _test_module_files(path, lexed.masked)
    for path, lexed in rust:
        if path not in tests:
            yield from _rust_sites(path, lexed, classes, excerpt_lines, **about)


# --- lexing -------------------------------------------------------------------------------


@attrs.frozen
class _Lexed:
    """A source text three ways, all of the same length.

    Attributes:
        text: the source.
        code: the source with comments blanked (newlines kept).
        masked: ``code`` with every string and character literal blanked too (``"___"``).
        literals: the decoded value of each string literal, by the offset where it starts.
    """

    text: str
    code: str
    masked: str
    literals: dict[int, str]


_CPP_NEXT = re.compile(
    r"""//|/\*|(?<![\w])(?:u8|[uUL])?R"|(?<![\w])(?:u8|[uUL])?"|"|(?<![\w])(?:u8|[uUL])?'"""
)
_RUST_NEXT = re.compile(r"""//|/\*|(?<![\w])b?r\#*"|(?<![\w])b?"|"|(?<![\w])b?'""")
_CPP_ESCAPE = re.compile(
    r"\\(?:\n|x[0-9A-Fa-f]+|u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|[0-7]{1,3}|.)", re.DOTALL
)
_RUST_ESCAPE = re.compile(r"\\(?:\n\s*|x[0-9A-Fa-f]{2}|u\{[0-9A-Fa-f_]+\}|.)", re.DOTALL)
_SIMPLE_ESCAPES: Final = {
    "n": "\n", "t": "\t", "r": "\r", "0": "\0", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
}  # fmt: skip
_NOT_NEWLINE = re.compile(r"[^\n]")
_RUST_CHAR = re.compile(r"'(?:\\(?:u\{[^}]*\}|x..|.)|[^\\'\n])'")


def _decode(body: str, *, rust: bool) -> str:
    """A string literal's value from its source text between the quotes."""

    def one(m: re.Match[str]) -> str:
        esc = m[0][1:]
        if esc.startswith("\n"):
            return ""  # a line continuation
        if esc[0] in "xuU":
            digits = esc[1:].strip("{}").replace("_", "")
            try:
                return chr(int(digits, 16)) if digits else esc
            except (ValueError, OverflowError):
                return esc
        if not rust and esc[0] in "01234567":
            return chr(int(esc, 8))
        return _SIMPLE_ESCAPES.get(esc, esc)

    return (_RUST_ESCAPE if rust else _CPP_ESCAPE).sub(one, body)


def _lex(text: str, *, rust: bool) -> _Lexed:
    """Blank comments, and separately literals, out of ``text``; decode the string literals."""
    code = list(text)
    masked = list(text)
    literals: dict[int, str] = {}
    nxt = _RUST_NEXT if rust else _CPP_NEXT
    i, n = 0, len(text)

    def blank(out: list[str], start: int, end: int) -> None:
        out[start:end] = _NOT_NEWLINE.sub(" ", text[start:end])

    def mask(start: int, end: int) -> None:
        masked[start:end] = _NOT_NEWLINE.sub("_", text[start:end])
        masked[start] = masked[end - 1] = '"'

    while i < n:
        m = nxt.search(text, i)
        if m is None:
            break
        start, opener = m.start(), m[0]
        if opener == "//":
            end = text.find("\n", start)
            end = n if end < 0 else end
            blank(code, start, end)
            blank(masked, start, end)
        elif opener == "/*":
            end = _block_comment_end(text, start, nested=rust)
            blank(code, start, end)
            blank(masked, start, end)
        elif opener.endswith("'"):
            if rust:
                c = _RUST_CHAR.match(text, m.end() - 1)
                if c is None:  # a lifetime ('a) or a label
                    i = m.end()
                    continue
                end = c.end()
            else:  # a digit separator (1'000) never gets here: it follows a digit
                end = _quoted_end(text, m.end(), "'")
            mask(start, end)
        elif "R" in opener or (rust and "r" in opener):
            end, literals[start] = _raw_literal(text, opener, m.end(), rust=rust)
            mask(start, end)
        else:
            end = _quoted_end(text, m.end(), '"')
            literals[start] = _decode(text[m.end() : end - 1], rust=rust)
            mask(start, end)
        i = max(end, start + 1)
    if not rust:  # a line splice (backslash, newline) in code, as in a macro's body: a space
        for m in re.finditer(r"\\(?=\r?\n)", "".join(masked)):
            code[m.start()] = masked[m.start()] = " "
    return _Lexed(text, "".join(code), "".join(masked), literals)


def _raw_literal(text: str, opener: str, body: int, *, rust: bool) -> tuple[int, str]:
    """The end and value of a raw string whose opener (``R"``, ``r#"``) ends at ``body``."""
    if rust:
        close = '"' + "#" * opener.count("#")
        end = text.find(close, body)
        end = len(text) if end < 0 else end
        return end + len(close), text[body:end]
    paren = text.find("(", body)
    close = ")" + text[body:paren] + '"'
    end = text.find(close, paren)
    if end < 0 or paren < 0:
        return len(text), text[body:]
    return end + len(close), text[paren + 1 : end]


def _block_comment_end(text: str, start: int, *, nested: bool) -> int:
    """The offset after the comment that opens at ``start`` (Rust's nest, C++'s do not)."""
    if not nested:
        end = text.find("*/", start + 2)
        return len(text) if end < 0 else end + 2
    depth, k = 0, start
    while k < len(text):
        if text.startswith("/*", k):
            depth, k = depth + 1, k + 2
        elif text.startswith("*/", k):
            depth, k = depth - 1, k + 2
            if depth == 0:
                return k
        else:
            k += 1
    return len(text)


def _quoted_end(text: str, k: int, quote: str) -> int:
    """The offset after the closing quote of a literal whose body starts at ``k``."""
    n = len(text)
    while k < n:
        c = text[k]
        if c == "\\":
            k += 2
            continue
        if c == quote:
            return k + 1
        if c == "\n" and quote == "'":  # not a character literal after all; give up here
            return k
        k += 1
    return n


# --- arguments ----------------------------------------------------------------------------

_OPEN: Final = {"(": ")", "[": "]", "{": "}"}
_CLOSE: Final = frozenset(")]}")


def _split_args(masked: str, open_paren: int) -> tuple[list[tuple[int, int]], int] | None:
    """The spans of a call's top-level arguments and the offset of its closing parenthesis.

    ``<...>`` counts as brackets when it follows a name without a space and closes before
    the argument ends (``std::pair<int, int>``); otherwise ``<`` is a comparison.
    """
    spans: list[tuple[int, int]] = []
    stack: list[str] = []
    start = open_paren + 1
    k, n = start, len(masked)
    while k < n:
        c = masked[k]
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c in _CLOSE:
            if not stack:
                if c != ")":
                    return None
                if masked[start:k].strip() or spans:
                    spans.append((start, k))
                return spans, k
            if stack.pop() != c:
                return None
        elif c == "," and not stack:
            spans.append((start, k))
            start = k + 1
        elif c == "<" and k > 0 and (masked[k - 1].isalnum() or masked[k - 1] == "_"):
            close = _template_end(masked, k)
            if close is not None:
                k = close
        k += 1
    return None


def _template_end(masked: str, k: int) -> int | None:
    """The offset of the ``>`` that closes a template argument list opened at ``k``, if any."""
    if masked[k + 1 : k + 2] in ("<", "="):
        return None
    depth, parens = 0, 0
    for j in range(k, min(len(masked), k + 400)):
        c = masked[j]
        if c == "<":
            depth += 1
        elif c == ">" and masked[j - 1] != "-":
            depth -= 1
            if depth == 0:
                return j
        elif c == "(":
            parens += 1
        elif c == ")":
            parens -= 1
            if parens < 0:
                return None
        elif c in ";{}" or masked.startswith(("&&", "||"), j):
            return None
    return None


def _squash(code: str) -> str:
    """Source text on one line, as the preprocessor's ``#`` and error messages quote it."""
    return " ".join(code.split())


def _literal_value(lexed: _Lexed, start: int, end: int) -> str | None:
    """The value of a span made only of string literals (adjacent ones join), else None."""
    masked = lexed.masked[start:end]
    if not masked.strip() or _LITERAL_RUN.sub("", masked).strip():
        return None
    return "".join(lexed.literals.get(start + m.start(), "") for m in _LITERAL_RUN.finditer(masked))


_LITERAL_RUN = re.compile(r'"[_\n]*"')


def _join(parts: Iterable[str | Hole]) -> Template:
    """A template from parts: adjacent literals merged, empty ones dropped."""
    out: list[str | Hole] = []
    for part in parts:
        if isinstance(part, str):
            if not part:
                continue
            if out and isinstance(out[-1], str):
                out[-1] += part
                continue
        out.append(part)
    return tuple(out)


def _site(
    where: tuple[str, str, list[str], int],
    offset: int,
    template: Template,
    error_class: str | None,
    function: str | None,
    condition: str | None = None,
    *,
    distribution: str,
    version: str,
    language: str,
) -> Site:
    """A native site at an offset of a file, ``where`` = (path, text, lines, excerpt lines)."""
    path, text, lines, context = where
    line = text.count("\n", 0, offset) + 1
    first = max(1, line - context)
    return Site(
        distribution=distribution,
        version=version,
        path=path,
        line=line,
        template=template,
        error_class=error_class,
        function=function,
        condition=condition,
        excerpt="\n".join(lines[first - 1 : line + context]),
        excerpt_start=first,
        kind="native",
        language=language,
    )


# --- C++ -----------------------------------------------------------------------------------

#: The checks whose exception class the macro fixes -> the class Python sees. Each raises
#: when its condition (the first argument) is false. The classes are c10's error types as
#: torch/csrc/Exceptions.h translates them; c10::Error and std::runtime_error are RuntimeError.
_CPP_CHECKS: Final = {
    "TORCH_CHECK": "RuntimeError",
    "TORCH_CHECK_IF_NOT_ON_CUDA": "RuntimeError",
    "TORCH_CHECK_ALWAYS_SHOW_CPP_STACKTRACE": "RuntimeError",
    "TORCH_CHECK_VALUE": "ValueError",
    "TORCH_CHECK_INDEX": "IndexError",
    "TORCH_CHECK_TYPE": "TypeError",
    "TORCH_CHECK_NOT_IMPLEMENTED": "NotImplementedError",
    "TORCH_CHECK_BUFFER": "BufferError",
    # torch.linalg.LinAlgError is this class; tracebacks print it by this name.
    "TORCH_CHECK_LINALG": "torch._C._LinAlgError",
    # torch's header-only check (torch/headeronly/util/Exception.h), which vLLM's stable-ABI
    # kernels use: a std::runtime_error whose text starts with the function, file and line.
    "STD_TORCH_CHECK": "RuntimeError",
}

#: ``TORCH_CHECK_EQ(a, b)`` and its kin: the operator each asserts, and the one that fails it.
#: c10 streams "Check failed: a == b (1 vs. 2)" into a fatal log line that throws c10::Error
#: (older releases abort the process after printing it).
_CPP_COMPARISONS: Final = {
    "TORCH_CHECK_EQ": ("==", "!="),
    "TORCH_CHECK_NE": ("!=", "=="),
    "TORCH_CHECK_LT": ("<", ">="),
    "TORCH_CHECK_LE": ("<=", ">"),
    "TORCH_CHECK_GT": (">", "<="),
    "TORCH_CHECK_GE": (">=", "<"),
}

#: c10's error types (``TORCH_CHECK_WITH(ValueError, ...)``) -> the class Python sees; the
#: others derive from c10::Error, which Python sees as RuntimeError.
_C10_ERRORS: Final = {
    "ValueError": "ValueError",
    "IndexError": "IndexError",
    "TypeError": "TypeError",
    "NotImplementedError": "NotImplementedError",
    "BufferError": "BufferError",
    "SyntaxError": "SyntaxError",
    "LinAlgError": "torch._C._LinAlgError",
    "OutOfMemoryError": "torch.OutOfMemoryError",
    "AcceleratorError": "torch.AcceleratorError",
    "DistBackendError": "torch.distributed.DistBackendError",
    "DistNetworkError": "torch.distributed.DistNetworkError",
    "DistStoreError": "torch.distributed.DistStoreError",
    "DistError": "torch.distributed.DistError",
}

_CPP_CALL = re.compile(
    r"\b(?P<macro>(?:STD_)?TORCH_CHECK(?:_[A-Z_]+)?|TORCH_INTERNAL_ASSERT|AT_ERROR)\s*\("
)
_CPP_CALL_NAME = re.compile(r"TORCH_CHECK|TORCH_INTERNAL_ASSERT|AT_ERROR")
_DEFINE = re.compile(r"#\s*define\s+$")
_C10_STR = re.compile(r"\s*(?:::)?(?:c10::)?str\s*\(")
_INTEGER = re.compile(r"\s*-?\d+\s*")
_STRINGIZED_PART = re.compile(r'"[_\n]*"|#\s*\w+')
_STRINGIZED = re.compile(r'(?:\s*(?:"[_\n]*"|#\s*\w+))+\s*')

#: c10's message for a check that gives none (``TORCH_CHECK_MSG``); ``{}`` is the condition.
_DEFAULT_CHECK = (
    "Expected {} to be true, but got false.  (Could this error message be improved?  "
    "If so, please report an enhancement request to PyTorch.)"
)
#: What STD_TORCH_CHECK puts before the message: ``__func__, __FILE__:__LINE__, ``.
_STD_PREFIX: Final[tuple[str | Hole, ...]] = (
    Hole("__func__"),
    ", ",
    Hole("__FILE__"),
    ":",
    Hole("__LINE__", number=True),
    ", ",
)


def _cpp_sites(
    path: str, text: str, context: int, *, distribution: str, version: str
) -> Iterator[Site]:
    """The sites of one C++ file."""
    if _CPP_CALL_NAME.search(text) is None:
        return  # most headers check nothing: skip their lexing
    lexed = _lex(text, rust=False)
    masked = lexed.masked
    lines = text.splitlines()
    about = {"distribution": distribution, "version": version, "language": "c++"}
    where = (path, text, lines, context)
    scopes = _Scopes(masked)
    guards = _Guards(lexed, rust=False)
    for m in _CPP_CALL.finditer(masked):
        macro = m["macro"]
        line_start = masked.rfind("\n", 0, m.start()) + 1
        if _DEFINE.search(masked, line_start, m.start()):
            continue  # the macro's own definition
        found = _split_args(masked, m.end() - 1)
        if found is None:
            continue
        args = found[0]
        if any("__VA_ARGS__" in masked[a:b] for a, b in args):
            continue  # a macro that wraps the check; its callers hold the messages
        built = _cpp_check(lexed, macro, args)
        if built is None:
            continue
        template, error_class, failed = built
        tests = guards.at(m.start())
        condition = _conjunction([*tests, failed] if failed else tests, rust=False)
        function = scopes.function_at(m.start())
        yield _site(where, m.start(), template, error_class, function, condition, **about)


def _cpp_check(
    lexed: _Lexed, macro: str, args: list[tuple[int, int]]
) -> tuple[Template, str, str | None] | None:
    """The template, class and condition of one check, or None for a macro that is not one.

    The condition is the one under which the check raises: the negation of what it asserts.
    """
    if macro == "AT_ERROR":
        return _join(_cpp_message(lexed, args)), "RuntimeError", None
    if macro in _CPP_COMPARISONS:
        return _cpp_comparison(lexed, macro, args)
    if macro == "TORCH_CHECK_WITH":
        if len(args) < 2:
            return None
        kind = lexed.masked[args[0][0] : args[0][1]].strip().rpartition("::")[2]
        error_class = _C10_ERRORS.get(kind, "RuntimeError")
        args = args[1:]
    elif macro == "TORCH_CHECK_ARG":
        if len(args) < 2:
            return None
        error_class = "RuntimeError"
        arg_n = _cpp_message(lexed, [args[1]])
        args = [args[0], *args[2:]]
        prefix: list[str | Hole] = ["invalid argument ", *arg_n, ": "]
    elif macro in _CPP_CHECKS:
        error_class = _CPP_CHECKS[macro]
    elif macro != "TORCH_INTERNAL_ASSERT":
        return None
    else:
        error_class = "RuntimeError"
    if not args:
        return None
    start, end = args[0]
    cond = _squash(lexed.code[start:end])
    message = _cpp_message(lexed, args[1:])
    always = cond in ("false", "0")
    condition = None if always else _failed(lexed.code[start:end], lexed.masked[start:end])
    if macro == "TORCH_INTERNAL_ASSERT":
        # c10 puts the stringized condition and the build's __FILE__:__LINE__ first.
        head: list[str | Hole] = [
            f'{cond} INTERNAL ASSERT FAILED at "',
            Hole("__FILE__"),
            '":',
            Hole("__LINE__", number=True),
            ", please report a bug to PyTorch. ",
        ]
        return _join([*head, *message]), error_class, condition
    if macro == "STD_TORCH_CHECK":
        if not message:
            return None  # it says only where it failed: nothing to match
        message = [*_STD_PREFIX, *message]
    elif macro == "TORCH_CHECK_ARG":
        message = [*prefix, *message]
    elif not message:
        message = [_DEFAULT_CHECK.format(cond)]
    return _join(message), error_class, condition


def _cpp_comparison(
    lexed: _Lexed, macro: str, args: list[tuple[int, int]]
) -> tuple[Template, str, str | None] | None:
    """``TORCH_CHECK_EQ(a, b)`` and its kin: "Check failed: a == b (1 vs. 2)", when a != b.

    The text after the closing parenthesis changed between releases (``) ``, then ``). ``), so
    the template ends there.
    """
    if len(args) != 2:
        return None
    asserted, fails = _CPP_COMPARISONS[macro]
    left, right = (_squash(lexed.code[a:b]) for a, b in args)
    template = _join(
        [f"Check failed: {left} {asserted} {right} (", Hole(left), " vs. ", Hole(right), ")"]
    )
    shown = [
        text if _operand_is_tight(lexed.masked[a:b]) else f"({text})"
        for text, (a, b) in zip((left, right), args, strict=True)
    ]
    return template, "RuntimeError", f"{shown[0]} {fails} {shown[1]}"


#: C++ operators at the top level of an expression, longest first: ``->`` and shifts are
#: matched whole so that their ``>`` and ``<`` are not taken for comparisons.
_CPP_OPERATOR = re.compile(r"->|<=>|<<=?|>>=?|&&|\|\||[=!<>]=|[-+*/%&|^]=|[<>=?,&|^!]")
_CPP_COMPARE: Final = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}
#: Operators that bind looser than a comparison (an assignment is reported as ``=``): with
#: one at the top level, a comparison is not the whole expression.
_LOOSER: Final = frozenset({"&&", "||", "?", ",", "=", "&", "|", "^", "<=>"})
#: What binds tighter than a comparison, or is no operator at all, is not reported.
_TIGHT: Final = frozenset({"->", "<<", ">>"})
#: A name, member, call or index chain once bracket contents and spaces are taken out.
_PLAIN_OPERAND = re.compile(r"(?:::)?\w+(?:\(\)|\[\])*(?:(?:\.|->|::)\w+(?:\(\)|\[\])*)*")


def _top_level_operators(masked: str) -> list[tuple[int, str]]:
    """The operators outside brackets in an expression (literals masked), with their offsets."""
    found: list[tuple[int, str]] = []
    depth, k = 0, 0
    while k < len(masked):
        c = masked[k]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            op = _CPP_OPERATOR.match(masked, k)
            if op is not None:
                name = op[0]
                if name.endswith("=") and name not in _CPP_COMPARE:
                    name = "="  # an assignment, compound or not
                if name not in _TIGHT:
                    found.append((k, name))
                k = op.end()
                continue
        k += 1
    return found


def _unwrapped(code: str, masked: str) -> tuple[str, str]:
    """An expression without the parentheses that enclose all of it, and without margins."""
    while True:
        lead = len(masked) - len(masked.lstrip())
        code, masked = code[lead:].rstrip(), masked[lead:].rstrip()
        if not (masked.startswith("(") and masked.endswith(")")):
            return code, masked
        depth = 0
        for k, c in enumerate(masked):
            depth += (c == "(") - (c == ")")
            if depth == 0 and k < len(masked) - 1:
                return code, masked  # (a) && (b): the first parenthesis closes early
        code, masked = code[1:-1], masked[1:-1]


def _is_plain(masked: str) -> bool:
    """Whether an expression is a name, member, call or index chain (``t.sizes()[0]``)."""
    flat: list[str] = []
    depth = 0
    for c in masked:
        if c in ")]}":
            depth -= 1
        if depth == 0 and not c.isspace():
            flat.append(c)
        if c in "([{":
            depth += 1
    return _PLAIN_OPERAND.fullmatch("".join(flat)) is not None


def _operand_is_tight(masked: str) -> bool:
    """Whether an expression needs no parentheses beside a comparison operator."""
    return not any(op in _LOOSER or op in _CPP_COMPARE for _, op in _top_level_operators(masked))


def _failed(code: str, masked: str) -> str:
    """The condition under which a C++ check of ``code`` fails, as readable as it is safe.

    ``a == b`` is ``a != b`` (each comparison its opposite), ``!x`` is ``x``, a plain operand
    ``x`` is ``not x``; anything else (``a && b``, ``a < b < c``) is ``not (...)``: no De Morgan.
    ``masked`` is ``code`` with its literals blanked (:class:`_Lexed`).
    """
    code, masked = _unwrapped(code, masked)
    ops = _top_level_operators(masked)
    text = _squash(code)
    if ops == [(0, "!")]:
        return _squash(_unwrapped(code[1:], masked[1:])[0])
    if not ops:
        return f"not {text}" if _is_plain(masked) else f"not ({text})"
    compares = [(k, op) for k, op in ops if op in _CPP_COMPARE]
    if len(compares) == 1 and not any(op in _LOOSER for _, op in ops):
        k, op = compares[0]
        return f"{_squash(code[:k])} {_CPP_COMPARE[op]} {_squash(code[k + len(op) :])}"
    return f"not ({text})"


def _cpp_message(lexed: _Lexed, args: list[tuple[int, int]]) -> list[str | Hole]:
    """The parts of a message that c10 joins from ``args``: literals, integers and holes."""
    parts: list[str | Hole] = []
    for start, end in args:
        value = _literal_value(lexed, start, end)
        if value is not None:
            parts.append(value)
            continue
        masked = lexed.masked[start:end]
        if _STRINGIZED.fullmatch(masked):  # "..." #param "...", in a macro's body
            for m in _STRINGIZED_PART.finditer(masked):
                literal = m[0].startswith('"')
                parts.append(lexed.literals[start + m.start()] if literal else Hole(_squash(m[0])))
            continue
        if _INTEGER.fullmatch(masked):
            parts.append(masked.strip())
            continue
        inner = _C10_STR.match(masked)
        if inner is not None:
            found = _split_args(lexed.masked, start + inner.end() - 1)
            if found is not None and not lexed.masked[found[1] + 1 : end].strip():
                parts.extend(_cpp_message(lexed, found[0]))
                continue
        parts.append(Hole(_squash(lexed.code[start:end])))
    return parts


_CONTROL: Final = frozenset(
    {"if", "for", "while", "switch", "catch", "return", "sizeof", "decltype", "do", "else"}
)
_CLASS_HEAD = re.compile(r"\b(?:class|struct|union)\s+(?:\w+\s+)*?(\w+)\s*(?:final\s*)?(?::[^:]|$)")
_OPERATOR = re.compile(r"\boperator\s*(?:\(\)|[^\s(]+)\s*\(")
_CALL_NAME = re.compile(
    r"((?:~?\w+\s*::\s*)*(?:operator\s*(?:\(\)|[^\s(]+)|~?\w+))\s*(?:<[^()]*>\s*)?\($"
)
_ANGLES = re.compile(r"<[^<>]*>")
_MACRO_NAME = re.compile(r"^[A-Z][A-Z0-9_]*$")
#: How a function's head ends: its parameters, then qualifiers or a trailing return type.
_FUNCTION_TAIL = re.compile(
    r"\)\s*(?:(?:const|noexcept|override|final|mutable|&&?)\s*)*(?:->[^;]*)?$"
)


class _Scopes:
    """What each ``{`` of a C++ file opens: a function, a class, or a block (best effort)."""

    def __init__(self, masked: str) -> None:
        self._masked = masked
        self._opens: list[tuple[int, int, str, str | None]] = []  # (open, close, kind, name)
        stack: list[tuple[int, str, str | None]] = []
        for m in re.finditer(r"[{}]", masked):
            if m[0] == "{":
                kind, name = self._label(m.start())
                stack.append((m.start(), kind, name))
            elif stack:
                start, kind, name = stack.pop()
                if kind != "block":
                    self._opens.append((start, m.start(), kind, name))
        self._opens.sort()

    def _label(self, brace: int) -> tuple[str, str | None]:
        """What the ``{`` at ``brace`` opens, from the text since the last ``;``, ``{`` or ``}``."""
        window = self._masked[max(0, brace - 600) : brace]
        cut = max(window.rfind(";"), window.rfind("{"), window.rfind("}"))
        if window.count(")", cut) > window.count("(", cut):  # braces in a parameter list
            cut = _head_start(window) - 1
        head = window[cut + 1 :].strip()
        # A preprocessor line ends before the head: keep what follows the last directive.
        head = re.sub(r"(?m)^\s*#.*$", "", head).strip()
        if head.startswith(("namespace", "enum", "extern")):
            return "block", None
        cls = _CLASS_HEAD.search(head)
        if cls is not None and "(" not in head:
            return "class", cls[1]
        paren = _first_call(head)
        if paren is None or _FUNCTION_TAIL.search(head) is None:
            return "block", None
        before = head[:paren].rstrip()
        name = _CALL_NAME.search(before + "(")
        if before.endswith("]") or name is None:
            return "block", None  # a lambda, or no name
        qualified = re.sub(r"\s+", "", name[1])
        if qualified.rpartition("::")[2] in _CONTROL:
            return "block", None
        if _MACRO_NAME.match(qualified):  # TORCH_IMPL_FUNC(addmm_out_cpu)(...)
            inner = re.match(r"\(\s*(\w+)\s*\)", head[paren:])
            return ("func", inner[1]) if inner else ("block", None)
        bare = before
        for _ in range(3):  # template parameters may hold defaults: <class T, int N = 1>
            bare = _ANGLES.sub("", bare)
        if "=" in bare and "operator" not in bare:
            return "block", None  # an initializer: auto x = f(...) {
        return "func", qualified

    def function_at(self, offset: int) -> str | None:
        """The function around ``offset``, qualified by the classes around it, or None."""
        func: str | None = None
        classes: list[str] = []
        for start, end, kind, name in self._opens:
            if start > offset:
                break
            if end < offset or name is None:
                continue
            if kind == "func":
                func = name
            elif kind == "class" and func is None:
                classes.append(name)
        if func is None:
            return None
        if "::" not in func and classes:
            return "::".join([*classes, func])
        return func


def _head_start(window: str) -> int:
    """Where the declaration head at the end of ``window`` starts.

    That is after the last ``;``, ``{`` or ``}`` outside parentheses: a default argument may
    hold braces (``options = {}``).
    """
    depth = 0
    for k in range(len(window) - 1, -1, -1):
        c = window[k]
        if c == ")":
            depth += 1
        elif c == "(":
            depth -= 1
        elif c in ";{}" and depth <= 0:
            return k + 1
    return 0


def _first_call(head: str) -> int | None:
    """The offset of the first ``(`` at the top level of a declaration head."""
    op = _OPERATOR.search(head)
    if op is not None:
        return op.end() - 1
    depth = 0
    for k, c in enumerate(head):
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif c == "(" and depth == 0:
            return k
    return None


# --- guards -------------------------------------------------------------------------------

_PREPROCESSOR_LINE = re.compile(r"(?m)^\s*#.*$")
_CPP_IF = re.compile(r"(?P<else>else\s+)?if\s*(?:constexpr\s*)?\(")
_RUST_IF = re.compile(r"(?P<else>else\s+)?if\s+(?P<let>let\b)?")
#: Blocks whose code runs where the code around them runs: their guards are the site's too.
_CPP_PASSING = re.compile(
    r"|do|try|(?:for|while|switch)\s*\(.*\)|catch\s*\(.*\)|(?:case\b.*|default\s*):"
)
_RUST_PASSING = re.compile(r"|loop|unsafe|(?:while|for|match)\b.*|.*=>")


class _Guards:
    """The ``if`` tests around each place of a C++ or Rust file (best effort, by braces).

    A site inside ``if (c) { ... }`` is raised when ``c``; in an ``else`` branch, when each
    earlier test of the chain is false. Loops, ``switch`` and ``match`` pass their guards on;
    a function, lambda, closure or class ends the search. Only braced branches are followed,
    and in C++ a statement right after ``if (c)`` or ``else`` too.
    """

    def __init__(self, lexed: _Lexed, *, rust: bool) -> None:
        self._lexed, self._rust = lexed, rust
        masked = lexed.masked
        self._opens: list[int] = []
        self._close: dict[int, int] = {}  # { -> its }
        self._open_of: dict[int, int] = {}  # } -> its {
        self._parent: dict[int, int] = {}
        self._kinds: dict[int, tuple[str, str | None, int]] = {}
        stack: list[int] = []
        for m in re.finditer(r"[{}]", masked):
            if m[0] == "{":
                self._parent[m.start()] = stack[-1] if stack else -1
                self._opens.append(m.start())
                stack.append(m.start())
            elif stack:
                start = stack.pop()
                self._close[start] = m.start()
                self._open_of[m.start()] = start

    def at(self, offset: int) -> list[str]:
        """The tests that hold when the code at ``offset`` runs, outermost first."""
        levels: list[list[str]] = []
        if not self._rust:
            levels.append(self._braceless(offset))
        k = bisect.bisect_left(self._opens, offset) - 1
        brace = self._opens[k] if k >= 0 else -1
        while brace >= 0 and self._close.get(brace, len(self._lexed.masked)) < offset:
            brace = self._parent[brace]
        while brace >= 0:
            found = self._branch(brace)
            if found is None:
                break
            levels.append(found)
            brace = self._parent[brace]
        return [test for level in reversed(levels) for test in level]

    def _head(self, brace: int) -> tuple[int, str]:
        """Where the head of the block opened at ``brace`` starts, and its masked text."""
        start = max(0, brace - 2000)
        begin = start + _head_start(self._lexed.masked[start:brace])
        head = _PREPROCESSOR_LINE.sub(lambda m: " " * len(m[0]), self._lexed.masked[begin:brace])
        return begin, head

    def _own(self, brace: int) -> tuple[str, str | None, int]:
        """What opens the block at ``brace``: (kind, its test, where its head starts).

        The kinds: ``if``, ``else if`` (with a test), ``if let``, ``else if let``, ``else``,
        ``pass`` (a loop, a bare block: its guards hold inside) and ``stop`` (a function, a
        lambda, a closure, a class: the search ends).
        """
        if brace in self._kinds:
            return self._kinds[brace]
        begin, head = self._head(brace)
        lead = len(head) - len(head.lstrip())
        text = head.strip()
        found: tuple[str, str | None, int] = ("stop", None, begin)
        if text == "else":
            found = ("else", None, begin)
        elif self._rust:
            m = _RUST_IF.match(text)
            if m is not None and m.end() < len(text):
                kind = ("else " if m["else"] else "") + ("if let" if m["let"] else "if")
                end = begin + len(head.rstrip())
                found = (kind, _squash(self._lexed.code[begin + lead + m.end() : end]), begin)
            elif _RUST_PASSING.fullmatch(text):
                found = ("pass", None, begin)
        elif (m := _CPP_IF.match(text)) is not None:
            # if (...) {: the parenthesis after the keyword closes where the head ends.
            paren = begin + lead + m.end() - 1
            args = _split_args(self._lexed.masked, paren)
            if args is not None and args[1] == begin + len(head.rstrip()) - 1:
                found = ("else if" if m["else"] else "if", self._test(paren + 1, args[1]), begin)
        elif _CPP_PASSING.fullmatch(text):
            found = ("pass", None, begin)
        self._kinds[brace] = found
        return found

    def _branch(self, brace: int) -> list[str] | None:
        """The tests that hold inside the block at ``brace``; None when it ends the search."""
        kind, test, begin = self._own(brace)
        if kind == "stop":
            return None
        if kind.startswith("else"):
            earlier = self._earlier(begin)
            return [*earlier, test] if kind == "else if" and test else earlier
        return [test] if kind == "if" and test else []

    def _test(self, start: int, end: int) -> str:
        """The test of an ``if`` between its parentheses, after any init-statement (``x; c``)."""
        depth = 0
        for k in range(start, end):
            c = self._lexed.masked[k]
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
            elif c == ";" and depth == 0:
                start = k + 1
        return _squash(self._lexed.code[start:end])

    def _earlier(self, begin: int) -> list[str]:
        """For an ``else`` whose head starts at ``begin``: the earlier tests of its chain, false.

        The chain is followed back through braced branches; an ``if`` without braces, or an
        ``if let``, ends it (what was found so far still holds).
        """
        negated: list[str] = []
        while True:
            close = len(self._lexed.masked[:begin].rstrip()) - 1
            brace = self._open_of.get(close)
            if brace is None:
                break
            kind, test, begin = self._own(brace)
            if kind in ("if", "else if") and test:
                lexed = _lex(test, rust=self._rust)
                negated.append(_failed(lexed.code, lexed.masked))
            if kind not in ("else if", "else if let"):
                break
        return negated[::-1]

    def _braceless(self, offset: int) -> list[str]:
        """The test of an ``if (c)`` (or ``else``) whose statement, without braces, is at offset."""
        masked = self._lexed.masked
        end = len(masked[:offset].rstrip())
        if masked[end - 4 : end] == "else" and not _is_word(masked, end - 5):
            return self._earlier(end - 4)
        if end == 0 or masked[end - 1] != ")":
            return []
        depth, k = 0, end - 1
        while k >= 0:
            depth += (masked[k] == ")") - (masked[k] == "(")
            if depth == 0:
                break
            k -= 1
        before = masked[max(0, k - 40) : k].rstrip()
        keyword = re.search(r"(?:(?<![\w])else\s+)?(?<![\w])if(?:\s+constexpr)?$", before)
        if keyword is None:
            return []
        test = self._test(k + 1, end - 1)
        if keyword[0].startswith("else"):
            return [*self._earlier(max(0, k - 40) + keyword.start()), test]
        return [test]


def _is_word(text: str, k: int) -> bool:
    return 0 <= k < len(text) and (text[k].isalnum() or text[k] == "_")


def _conjunction(tests: list[str], *, rust: bool) -> str | None:
    """Tests joined by ``and``; one that binds looser (``a || b``) goes in parentheses."""
    if len(tests) < 2:
        return tests[0] if tests else None
    loose = {"||", "?", ",", "="}
    parts = []
    for test in tests:
        masked = _lex(test, rust=rust).masked
        wrap = any(op in loose for _, op in _top_level_operators(masked))
        parts.append(f"({test})" if wrap else test)
    return " and ".join(parts)


# --- Rust ----------------------------------------------------------------------------------

_CREATE_EXCEPTION = re.compile(
    r"\bcreate_exception!\s*\(\s*(?P<module>\w+)\s*,\s*(?P<name>\w+)\s*,"
)
_RUST_CALL = re.compile(
    r"""
      (?P<new_err>\b(?P<path>(?:\w+::)*\w+)::new_err\s*\()
    | (?P<pyerr_new>\bPyErr::new::<\s*(?P<path2>(?:\w+::)*\w+)\s*,\s*_\s*>\s*\()
    | (?P<into_pyerr>\bPyError(?:::from)?\s*\()
    | (?P<thiserror>\#\[error\s*\()
    | (?P<err_into>\bErr\s*\()
    | (?P<panic>\bpanic!\s*\()
    """,
    re.VERBOSE,
)
_INTO_PYERR = re.compile(r"\s*\.\s*into_pyerr\s*::\s*<\s*((?:\w+::)*\w+)\s*>")
_FORMAT = re.compile(r"\s*(?:(?:std|alloc)::)?format!\s*\(")
_STRINGIFY = re.compile(r"\s*(?:\.\s*(?:to_string|to_owned|into)\s*\(\s*\)\s*)?")
_STRING_FROM = re.compile(r"\s*(?:String|Box)::from\s*\(")
_RUST_INTO = re.compile(r"\s*\.\s*into\s*\(\s*\)\s*$")
_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_NUMBER_SPEC = re.compile(r"\.\d+|\.\*|[xXobeE]$")
_NAMED_ARG = re.compile(r"\s*(\w+)\s*=(?!=)")

#: Where a crate's own errors reach Python through one wrapper: the class Python sees for
#: its ``#[error]`` texts and ``Err("...".into())`` (tokenizers' ToPyResult raises Exception).
_WRAPPED: Final = {"tokenizers": "Exception"}
#: pyo3 turns a Rust panic into this exception.
_PANIC = "pyo3_runtime.PanicException"


def _python_class(path: str, classes: dict[str, str]) -> str:
    """The Python class for a pyo3 type path: ``exceptions::PyValueError`` -> ``ValueError``."""
    name = path.rpartition("::")[2]
    if name in classes:
        return classes[name]
    if name.startswith("Py"):
        found = getattr(builtins, name[2:], None)
        if isinstance(found, type) and issubclass(found, BaseException):
            return found.__name__  # IOError and EnvironmentError are OSError
    return name


def _rust_sites(
    path: str,
    lexed: _Lexed,
    classes: dict[str, str],
    context: int,
    *,
    distribution: str,
    version: str,
) -> Iterator[Site]:
    """The sites of one Rust file."""
    masked, text = lexed.masked, lexed.text
    lines = text.splitlines()
    about = {"distribution": distribution, "version": version, "language": "rust"}
    where = (path, text, lines, context)
    skip = _test_modules(masked)
    guards = _Guards(lexed, rust=True)
    wrapped = _WRAPPED.get(distribution)
    for m in _RUST_CALL.finditer(masked):
        if any(a <= m.start() < b for a, b in skip):
            continue
        found = _split_args(masked, m.end() - 1)
        if found is None or not found[0]:
            continue
        args, close = found
        error_class: str | None
        if m["new_err"] or m["pyerr_new"]:
            error_class = _python_class(m["path"] or m["path2"], classes)
            template = _rust_message(lexed, args[0])
        elif m["into_pyerr"]:
            into = _INTO_PYERR.match(masked, close + 1)
            if into is None:
                continue
            error_class = _python_class(into[1], classes)
            template = _rust_message(lexed, args[0])
        elif m["thiserror"]:
            if masked[args[0][0] : args[0][1]].strip() == "transparent":
                continue
            error_class = wrapped
            template = _rust_format(lexed, args, fields=True)
        elif m["err_into"]:
            # Err("...".into()) / Err(format!(...).into()): the crate's boxed error.
            if wrapped is None or len(args) != 1:
                continue
            a, b = args[0]
            into = _RUST_INTO.search(masked, a, b)
            if into is None:
                continue
            template = _rust_message(lexed, (a, into.start()))
            if template is None or not any(isinstance(p, str) for p in template):
                continue
            error_class = wrapped
        else:
            error_class = _PANIC
            template = _rust_format(lexed, args, fields=False)
        if not template or (error_class is not None and len(error_class) == 1):
            continue  # no message, or a generic parameter's class (PyErr::new::<T, _>)
        function = _rust_function(masked, m.start())
        condition = _conjunction(guards.at(m.start()), rust=True)
        yield _site(where, m.start(), template, error_class, function, condition, **about)


def _rust_message(lexed: _Lexed, span: tuple[int, int]) -> Template | None:
    """The message an argument of ``new_err`` builds, or None when it is a function's name."""
    start, end = span
    masked = lexed.masked
    # "...".to_string(), "...".into(): the literal is the message.
    lit = re.match(r'\s*&?\s*("[_\n]*")', masked[start:end])
    if lit is not None and _STRINGIFY.fullmatch(masked, start + lit.end(), end):
        return _join([lexed.literals.get(start + lit.start(1), "")])
    for opener in (_FORMAT, _STRING_FROM):
        call = opener.match(masked, start)
        if call is None:
            continue
        found = _split_args(masked, call.end() - 1)
        if found is None or not _STRINGIFY.fullmatch(masked, found[1] + 1, end):
            continue
        if opener is _FORMAT:
            return _rust_format(lexed, found[0], fields=False)
        if len(found[0]) == 1:
            return _rust_message(lexed, found[0][0])
    expr = _squash(lexed.code[start:end])
    if re.fullmatch(r"(?:\w+::)*\w+", expr) and not expr[:1].islower():
        return None  # map_err(PyValueError::new_err): no message of its own here
    return (Hole(expr),)


def _rust_format(lexed: _Lexed, args: list[tuple[int, int]], *, fields: bool) -> Template | None:
    """The template of a ``format!``-style call: a format string and its arguments.

    With ``fields`` (thiserror's ``#[error]``), ``{0}`` and ``{name}`` are the variant's
    fields and stay as they are written.
    """
    fmt = _literal_value(lexed, *args[0])
    if fmt is None:
        return None
    positional: list[str] = []
    named: dict[str, str] = {}
    for start, end in args[1:]:
        arg = _NAMED_ARG.match(lexed.masked, start, end)
        if arg is not None:
            named[arg[1]] = _squash(lexed.code[arg.end() : end])
        else:
            positional.append(_squash(lexed.code[start:end]))
    parts: list[str | Hole] = []
    last, implicit = 0, 0
    for m in _PLACEHOLDER.finditer(fmt):
        parts.append(fmt[last : m.start()])
        last = m.end()
        if m[1] is None:
            parts.append(m[0][0])
            continue
        ref, _, spec = m[1].partition(":")
        ref = ref.strip()
        number = bool(_NUMBER_SPEC.search(spec))
        if not ref:
            expr = positional[implicit] if implicit < len(positional) else ""
            implicit += 1
        elif ref.isdigit() and not fields:
            index = int(ref)
            expr = positional[index] if index < len(positional) else ref
        else:
            expr = named.get(ref, ref)
        parts.append(Hole(expr, number=number))
    parts.append(fmt[last:])
    return _join(parts)


_RUST_FN = re.compile(r"\bfn\s+(\w+)")
_RUST_IMPL = re.compile(r"\bimpl\b(?:\s*<[^{]*?>)?\s+(?:[\w:<>,'&\s]+?\s+for\s+)?([\w:]+)")


def _rust_function(masked: str, offset: int) -> str | None:
    """The ``fn`` around ``offset`` (``Type::method`` inside an ``impl``), or None."""
    func: str | None = None
    owner: str | None = None
    depth = 0
    k = offset
    # Walk back over balanced braces; each unmatched { is a scope around the offset.
    while k > 0:
        k -= 1
        c = masked[k]
        if c == "}":
            depth += 1
        elif c == "{":
            if depth:
                depth -= 1
                continue
            cut = max(masked.rfind(";", 0, k), masked.rfind("}", 0, k), masked.rfind("{", 0, k))
            head = masked[cut + 1 : k]
            if func is None:
                fn = list(_RUST_FN.finditer(head))
                if fn:
                    func = fn[-1][1]
            elif owner is None:
                impl = _RUST_IMPL.search(head)
                if impl is not None:
                    owner = impl[1].rpartition("::")[2]
                    break
    if func is None:
        return None
    return f"{owner}::{func}" if owner else func


#: An attribute that keeps the item after it out of a user's build: ``#[cfg(test)]`` (or
#: ``cfg(all(test, ...))``), ``#[test]`` and the test attributes of crates (``#[tokio::test]``).
#: ``#![cfg(test)]`` at the top of a file makes the whole file such an item.
_TEST_ATTRIBUTE = re.compile(
    r"#(?P<inner>!?)\s*\[\s*(?:(?:\w+\s*::\s*)*test|cfg\s*\((?P<pred>[^\]]*)\))\s*\]"
)
_ATTRIBUTE = re.compile(r"\s*#\s*\[")
_TEST_MODULE_FILE = re.compile(r"\bmod\s+(\w+)\s*;")


def _test_only(pred: str | None) -> bool:
    """Whether a ``cfg(...)`` predicate holds only in test builds (``None``: ``#[test]``)."""
    if pred is None:
        return True
    pred = "".join(pred.split())
    if pred == "test":
        return True
    if not (pred.startswith("all(") and pred.endswith(")")):
        return False  # any(test, x) and not(test) hold in users' builds too
    items, depth, start = [], 0, 4
    for k, c in enumerate(pred[4:-1], 4):
        depth += (c == "(") - (c == ")")
        if c == "," and depth == 0:
            items.append(pred[start:k])
            start = k + 1
    items.append(pred[start:-1])
    return "test" in items


def _test_modules(masked: str) -> list[tuple[int, int]]:
    """The spans of test-only items: what ``#[cfg(test)]`` or ``#[test]`` stands before.

    An item runs from its attribute to the ``}`` that closes its body (a module, a function, an
    impl) or to its ``;`` (``mod tests;``, a ``use``); other attributes between are skipped.
    """
    spans: list[tuple[int, int]] = []
    for m in _TEST_ATTRIBUTE.finditer(masked):
        if not _test_only(m["pred"]):
            continue
        if m["inner"]:
            return [(0, len(masked))]  # #![cfg(test)]: the whole file
        k = m.end()
        while (attr := _ATTRIBUTE.match(masked, k)) is not None:
            close = masked.find("]", attr.end())
            k = len(masked) if close < 0 else close + 1
        spans.append((m.start(), _item_end(masked, k)))
    return spans


def _item_end(masked: str, k: int) -> int:
    """The offset of the ``;`` or closing ``}`` that ends the Rust item starting at ``k``."""
    depth = 0
    while k < len(masked):
        c = masked[k]
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        elif depth == 0 and c == ";":
            return k
        elif depth == 0 and c == "{":
            braces = 0
            for j in range(k, len(masked)):
                braces += (masked[j] == "{") - (masked[j] == "}")
                if braces == 0:
                    return j
            return len(masked)
        k += 1
    return len(masked)


def _test_module_files(path: str, masked: str) -> set[str]:
    """The paths of the module files that ``#[cfg(test)] mod name;`` declares in a file."""
    folder, _, name = path.rpartition("/")
    stem = name.removesuffix(".rs")
    base = folder if stem in ("lib", "main", "mod") else f"{folder}/{stem}"
    paths: set[str] = set()
    for start, end in _test_modules(masked):
        for declared in _TEST_MODULE_FILE.finditer(masked, start, end + 1):
            module = f"{base}/{declared[1]}".lstrip("/")
            paths.update({f"{module}.rs", f"{module}/mod.rs"})
    return paths
