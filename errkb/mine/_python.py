"""The Python reader: every message a module raises, checks, warns or logs, as :class:`Site` values.

Only the standard library's :mod:`ast` is used: the code is parsed, never imported or run.
What is understood, and what is counted as passed over, is listed in ``docs/mining.md``.
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
import string
from collections import Counter
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb.mine._site import Hole, Kind, Site, Template

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

    from errkb.mine._sources import Source

__all__ = ["module_of", "read_python", "read_source"]

#: ``torch._check`` and its kin: the exception class each raises.
CHECKS = {
    "_check": "RuntimeError",
    "_check_value": "ValueError",
    "_check_index": "IndexError",
    "_check_type": "TypeError",
    "_check_not_implemented": "NotImplementedError",
    "_check_is_size": "RuntimeError",
    "_check_tensor_all": "RuntimeError",
}
#: Each comparison operator's opposite, for the condition under which a check fails.
_OPPOSITE: dict[type[ast.cmpop], str] = {
    ast.Eq: "!=",
    ast.NotEq: "==",
    ast.Lt: ">=",
    ast.LtE: ">",
    ast.Gt: "<=",
    ast.GtE: "<",
    ast.Is: "is not",
    ast.IsNot: "is",
    ast.In: "not in",
    ast.NotIn: "in",
}
#: The kin that take the exception class as their first argument.
CHECKS_WITH = frozenset({"_check_with", "_check_tensor_all_with"})
#: Logger methods whose text users paste as errors, and the severity each means.
LOG_METHODS = {
    "error": "error",
    "exception": "error",
    "critical": "error",
    "fatal": "error",
    "warning": "warning",
    "warn": "warning",
    "warning_once": "warning",
}
_LOGGER = re.compile(r"(?:^|_)log(?:ger)?$|logger$|^logging$", re.IGNORECASE)
_PERCENT = re.compile(
    r"%(?:\((?P<key>[^)]*)\))?[#0\- +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?(?P<conv>[diouxXeEfFgGcrsa%])"
)
_NUMBER_CONV = frozenset("diufFeEgG")
_SPEC_TYPE = re.compile(r"[bcdeEfFgGnosxX%]$")
_SOURCE_MARKERS = ("src", "py_src", "lib")
_MAX_DEPTH = 4
_MAX_HOPS = 8
_BODIES = ("body", "orelse", "finalbody")
_ODD_BREAKS = ("\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029")
_LINE = re.compile(r"(?<=\r\n)|(?<=\r)(?!\n)|(?<=\n)")
# try/except* (3.11) has the same fields as try; 3.10 has no such node.
_TRY = (ast.Try, getattr(ast, "TryStar", ast.Try))


def module_of(path: str) -> str:
    """The dotted module of a file: ``src/transformers/x/__init__.py`` -> ``transformers.x``."""
    parts = list(PurePosixPath(path).with_suffix("").parts)
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in _SOURCE_MARKERS:
            parts = parts[i + 1 :]
            break
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def read_python(
    text: str,
    path: str,
    *,
    distribution: str,
    version: str,
    excerpt_lines: int = 10,
    dropped: Counter[str] | None = None,
    names: dict[str, dict[str, str]] | None = None,
) -> list[Site]:
    """Every message site of one module's source. What is passed over is counted in ``dropped``.

    ``names``, when given, gets the module's names: what each imported or defined name refers
    to, so that :func:`read_source` can follow a class re-exported by another module.

    >>> [s.template for s in read_python('raise ValueError(f"bad {x:d}")', "m.py",
    ...                                  distribution="d", version="1")]
    [('bad ', Hole(expr='x', number=True))]
    """
    dropped = Counter() if dropped is None else dropped
    try:
        tree = ast.parse(text, filename=path)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        dropped["unparsable-file"] += 1
        return []
    reader = _Reader(text, path, tree, distribution, version, excerpt_lines, dropped)
    if names is not None and reader.module:
        names[reader.module] = {
            **reader.imports,
            **{name: f"{reader.module}.{name}" for name in reader.local},
        }
    try:
        reader.body(tree.body, _Scope("", None), (), {})
    except RecursionError:
        dropped["unparsable-file"] += 1
        return []
    return reader.sites


def read_source(
    source: Source, *, excerpt_lines: int = 10, dropped: Counter[str] | None = None
) -> Iterator[Site]:
    """The Python reader over every ``.py`` file of a source.

    A class imported from a module of the same source that only re-exports it is followed to
    the module that defines it (``from transformers.utils import E`` is
    ``transformers.utils.import_utils.E``).
    """
    dropped = Counter() if dropped is None else dropped
    version = source.version or "unknown"
    names: dict[str, dict[str, str]] = {}
    found: list[Site] = []
    for path, text in source.python_files():
        found += read_python(
            text,
            path,
            distribution=source.distribution,
            version=version,
            excerpt_lines=excerpt_lines,
            dropped=dropped,
            names=names,
        )
    for site in found:
        if site.error_class and "." in site.error_class:
            defined = _defining(site.error_class, names)
            if defined != site.error_class:
                site = attrs.evolve(site, error_class=defined)  # noqa: PLW2901 - the followed site
        yield site


def _defining(dotted: str, names: dict[str, dict[str, str]]) -> str:
    """Follow a dotted name through the modules' imports to where it is defined."""
    for _ in range(_MAX_HOPS):
        module, _, attr = dotted.rpartition(".")
        target = names.get(module, {}).get(attr)
        if target is None or target == dotted:
            break
        dotted = target
    return dotted


class _Scope:
    __slots__ = ("cls", "qual")

    def __init__(self, qual: str, cls: str | None) -> None:
        self.qual, self.cls = qual, cls

    def inner(self, name: str, *, cls: bool = False) -> _Scope:
        qual = f"{self.qual}.{name}" if self.qual else name
        return _Scope(qual, qual if cls else self.cls)


#: What a name was last assigned in the block: a message, or an exception built with one.
_Env = dict[str, "tuple[Template, str | None, bool]"]


class _Reader:
    def __init__(
        self,
        text: str,
        path: str,
        tree: ast.Module,
        distribution: str,
        version: str,
        excerpt_lines: int,
        dropped: Counter[str],
    ) -> None:
        self.text, self.path, self.dropped = text, path, dropped
        # Lines as the parser counts them (str.splitlines also splits on \f, \x1c, ...).
        if any(c in text for c in _ODD_BREAKS):
            self.raw = _LINE.split(text)
        else:
            self.raw = text.splitlines(keepends=True)
        self.lines = [line.rstrip("\r\n") for line in self.raw]
        self.distribution, self.version, self.excerpt_lines = distribution, version, excerpt_lines
        self.module = module_of(path)
        self.is_package = PurePosixPath(path).stem == "__init__"
        self.sites: list[Site] = []
        self.imports: dict[str, str] = {}
        self.local: set[str] = set()
        self.classes: dict[str, ast.ClassDef] = {}
        self.helpers: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        self._index(tree)

    # --- what the module defines and imports --------------------------------------------

    def _index(self, tree: ast.Module) -> None:
        # Statements only (imports and definitions are statements): walking every expression
        # node with ast.walk took most of the reader's time.
        todo: list[ast.stmt] = list(tree.body)
        while todo:
            node = todo.pop()
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name
                    else:
                        head = alias.name.partition(".")[0]
                        self.imports.setdefault(head, head)
            elif isinstance(node, ast.ImportFrom):
                base = self._from_module(node)
                for alias in node.names:
                    if alias.name != "*":
                        target = f"{base}.{alias.name}" if base else alias.name
                        self.imports[alias.asname or alias.name] = target
            else:
                if isinstance(node, ast.ClassDef):
                    self.classes.setdefault(node.name, node)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    self.helpers.setdefault(node.name, node)
                for field in _BODIES:
                    todo.extend(getattr(node, field, ()))
                for handler in getattr(node, "handlers", ()):
                    todo.extend(handler.body)
                for case in getattr(node, "cases", ()):
                    todo.extend(case.body)
        self.local = {
            n.name
            for n in tree.body
            if isinstance(n, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        }

    def _from_module(self, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = self.module.split(".") if self.module else []
        if not self.is_package:
            parts = parts[:-1]
        parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
        if node.module:
            parts = [*parts, node.module]
        return ".".join(parts)

    def resolve(self, node: ast.expr) -> str | None:
        """A class or function named by ``node``, dotted through the module's imports."""
        dotted = _dotted(node)
        if dotted is None:
            return None
        head, dot, rest = dotted.partition(".")
        if head in self.imports:
            return self.imports[head] + dot + rest
        if head in self.local and self.module:
            return f"{self.module}.{dotted}"
        return dotted

    def _is_exception_class(self, node: ast.ClassDef, depth: int = 0) -> bool:
        for base in node.bases:
            name = _dotted(base)
            if name is None:
                continue
            last = name.rpartition(".")[2]
            if last.endswith(("Error", "Exception", "Warning", "Exit", "Interrupt")):
                return True
            if isinstance(getattr(builtins, last, None), type) and issubclass(
                getattr(builtins, last), BaseException
            ):
                return True
            local = self.classes.get(name)
            if (
                local is not None
                and depth < _MAX_DEPTH
                and self._is_exception_class(local, depth + 1)
            ):
                return True
        return False

    # --- the walk -----------------------------------------------------------------------

    def body(
        self, stmts: Sequence[ast.stmt], scope: _Scope, conds: tuple[str, ...], env: _Env
    ) -> None:
        for stmt in stmts:
            self.stmt(stmt, scope, conds, env)

    def stmt(self, stmt: ast.stmt, scope: _Scope, conds: tuple[str, ...], env: _Env) -> None:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.body(stmt.body, scope.inner(stmt.name), (), {})
        elif isinstance(stmt, ast.ClassDef):
            inner = scope.inner(stmt.name, cls=True)
            if not self._is_exception_class(stmt):
                inner.cls = None
            self.body(stmt.body, inner, (), {})
        elif isinstance(stmt, ast.If):
            # An elif chain is walked in a loop: hundreds of elifs nest that deep in the tree.
            branch: ast.stmt = stmt
            while isinstance(branch, ast.If):
                test = self.segment(branch.test)
                self.body(branch.body, scope, (*conds, test), dict(env))
                conds = (*conds, self.failed(branch.test))
                if len(branch.orelse) == 1 and isinstance(branch.orelse[0], ast.If):
                    branch = branch.orelse[0]
                else:
                    self.body(branch.orelse, scope, conds, dict(env))
                    break
        elif isinstance(stmt, ast.Raise):
            self.raise_(stmt, scope, conds, env)
        elif isinstance(stmt, ast.Assert):
            if stmt.msg is not None:
                cond = (*conds, self.failed(stmt.test))
                self.emit(stmt, stmt.msg, "AssertionError", "raise", scope, cond, env)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            self.assign(stmt, env)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            self.call(stmt.value, scope, conds, env)
        elif isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.body(stmt.body, scope, conds, dict(env))
            self.body(stmt.orelse, scope, conds, dict(env))
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            self.body(stmt.body, scope, conds, env)
        elif isinstance(stmt, _TRY):
            self.body(stmt.body, scope, conds, dict(env))
            for handler in stmt.handlers:
                self.body(handler.body, scope, conds, dict(env))
            self.body(stmt.orelse, scope, conds, dict(env))
            self.body(stmt.finalbody, scope, conds, dict(env))
        elif isinstance(stmt, ast.Match):
            for case in stmt.cases:
                self.body(case.body, scope, conds, dict(env))

    def assign(
        self, stmt: ast.Assign | ast.AnnAssign | ast.AugAssign, env: _Env, depth: int = 0
    ) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name) or stmt.value is None:
            return
        name = targets[0].id
        if isinstance(stmt, ast.AugAssign):
            before = env.get(name)
            added = self.template(stmt.value, env, depth)
            if before is not None and before[1] is None and added and isinstance(stmt.op, ast.Add):
                env[name] = ((*before[0], *added), None, False)
            else:
                env.pop(name, None)
            return
        value = stmt.value
        found = self.template(value, env, depth)
        if found is not None:
            env[name] = (found, None, False)
            return
        if isinstance(value, ast.Call) and value.args and _class_like(value.func):
            message = self.template(value.args[0], env, depth)
            if message is not None:
                env[name] = (message, self.resolve(value.func), True)
                return
        env.pop(name, None)

    def raise_(self, stmt: ast.Raise, scope: _Scope, conds: tuple[str, ...], env: _Env) -> None:
        exc = stmt.exc
        if exc is None:
            return
        if isinstance(exc, ast.Name) and exc.id in env and env[exc.id][2]:
            template, error_class, _ = env[exc.id]
            self.add(stmt, template, error_class, "raise", scope, conds)
            return
        if not isinstance(exc, ast.Call) or not _class_like(exc.func):
            self.dropped["no-message"] += 1
            return
        if not exc.args:
            self.dropped["no-message"] += 1
            return
        self.emit(stmt, exc.args[0], self.resolve(exc.func), "raise", scope, conds, env)

    def call(self, call: ast.Call, scope: _Scope, conds: tuple[str, ...], env: _Env) -> None:
        func = call.func
        name = self.resolve(func) or ""
        last = name.rpartition(".")[2]
        if name.startswith("torch.") and (last in CHECKS or last in CHECKS_WITH):
            with_class = last in CHECKS_WITH
            shift = 1 if with_class else 0
            if with_class:
                error_class = self.resolve(call.args[0]) if call.args else None
            else:
                error_class = CHECKS[last]
            given = _arg(call, 1 + shift, ("message", "msg"))
            cond_node = _arg(call, shift, ("cond",))
            if given is None:
                self.dropped["no-message"] += 1
                return
            if isinstance(given, ast.Lambda):
                given = given.body
            cond = conds if cond_node is None else (*conds, self.failed(cond_node))
            self.emit(call, given, error_class, "check", scope, cond, env)
        elif name in ("warnings.warn", "warnings.warn_explicit"):
            if not call.args:
                return
            category = _arg(call, 1, ("category",))
            error_class = "UserWarning" if category is None else self.resolve(category)
            self.emit(call, call.args[0], error_class, "warn", scope, conds, env)
        elif (
            isinstance(func, ast.Attribute)
            and func.attr in LOG_METHODS
            and (receiver := _dotted(func.value)) is not None
            and _LOGGER.search(receiver.rpartition(".")[2])
        ):
            if not call.args:
                return
            first = call.args[0]
            message: Template | None
            if (
                len(call.args) > 1
                and isinstance(first, ast.Constant)
                and isinstance(first.value, str)
            ):
                message = self._percent(first.value, list(call.args[1:]), None)
            else:
                message = self.template(first, env)
            if message is None:
                self.dropped["dynamic-message"] += 1
                return
            self.add(call, message, None, "log", scope, conds, level=LOG_METHODS[func.attr])
        elif scope.cls is not None and _is_super_init(func) and call.args:
            error_class = f"{self.module}.{scope.cls}" if self.module else scope.cls
            self.emit(call, call.args[0], error_class, "raise", scope, conds, env)

    def emit(
        self,
        node: ast.stmt | ast.expr,
        message: ast.expr,
        error_class: str | None,
        kind: Kind,
        scope: _Scope,
        conds: tuple[str, ...],
        env: _Env,
    ) -> None:
        template = self.template(message, env)
        if template is None:
            self.dropped["dynamic-message"] += 1
            return
        self.add(node, template, error_class, kind, scope, conds)

    def add(
        self,
        node: ast.stmt | ast.expr,
        template: Template,
        error_class: str | None,
        kind: Kind,
        scope: _Scope,
        conds: tuple[str, ...],
        *,
        level: str | None = None,
    ) -> None:
        end = getattr(node, "end_lineno", None) or node.lineno
        start = max(1, node.lineno - self.excerpt_lines)
        stop = min(len(self.lines), end + self.excerpt_lines)
        self.sites.append(
            Site(
                distribution=self.distribution,
                version=self.version,
                path=self.path,
                line=node.lineno,
                template=template,
                error_class=error_class,
                function=scope.qual or None,
                condition=_joined(conds),
                excerpt="\n".join(self.lines[start - 1 : stop]),
                excerpt_start=start,
                kind=kind,
                language="python",
                level=level,
            )
        )

    # --- messages -----------------------------------------------------------------------

    def segment(self, node: ast.AST) -> str:
        """A node's source text, on one line.

        :func:`ast.get_source_segment` splits the whole text on every call, which made large
        modules take seconds.
        """
        first, last = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
        col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
        if first is None or last is None or col is None or end_col is None:
            return ""
        lines = self.raw[first - 1 : last]
        if not lines:
            return ""
        if len(lines) == 1:
            text = lines[0].encode()[col:end_col].decode(errors="replace")
        else:
            head = lines[0].encode()[col:].decode(errors="replace")
            tail = lines[-1].encode()[:end_col].decode(errors="replace")
            text = "".join((head, *lines[1:-1], tail))
        return " ".join(text.split())

    def failed(self, test: ast.expr) -> str:
        """What holds when ``test`` is false (an ``assert``, a ``torch._check``, an ``else``).

        A comparison turns into its opposite (``a == b``: ``a != b``; ``x in y``:
        ``x not in y``), ``not x`` into ``x``, a name, attribute, call or subscript ``x`` into
        ``not x``; anything else is ``not (test)``: ``a and b`` stays whole (no De Morgan).
        """
        if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
            return self.segment(test.operand)
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            opposite = _OPPOSITE.get(type(test.ops[0]))
            if opposite is not None:
                left, right = (self._operand(n) for n in (test.left, test.comparators[0]))
                return f"{left} {opposite} {right}"
        text = self.segment(test)
        if isinstance(test, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)):
            return f"not {text}"
        return f"not ({text})"

    def _operand(self, node: ast.expr) -> str:
        """A comparison's operand, in parentheses when it binds no tighter than a comparison."""
        text = self.segment(node)
        loose = isinstance(node, (ast.BoolOp, ast.Compare, ast.IfExp, ast.Lambda, ast.NamedExpr))
        if loose or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)):
            return f"({text})"
        return text

    def template(self, node: ast.expr, env: _Env, depth: int = 0) -> Template | None:
        """The message an expression builds, or ``None`` when it builds none the reader knows."""
        if isinstance(node, ast.Constant):
            return (node.value,) if isinstance(node.value, str) else None
        if isinstance(node, ast.JoinedStr):
            parts: list[str | Hole] = []
            for value in node.values:
                if isinstance(value, ast.Constant) and isinstance(value.value, str):
                    parts.append(value.value)
                elif isinstance(value, ast.FormattedValue):
                    spec = _literal_spec(value.format_spec)
                    number = value.conversion == -1 and spec is not None and _number_spec(spec)
                    parts.append(Hole(self.segment(value.value), number))
            return tuple(parts)
        if isinstance(node, ast.Name):
            found = env.get(node.id)
            return found[0] if found is not None and not found[2] else None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left = self.template(node.left, env, depth)
            right = self.template(node.right, env, depth)
            if left is None and right is None:
                return None
            return (*(left or (Hole(self.segment(node.left)),)),
                    *(right or (Hole(self.segment(node.right)),)))  # fmt: skip
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Mod)
            and isinstance(node.left, ast.Constant)
            and isinstance(node.left.value, str)
        ):
            values = node.right
            if isinstance(values, ast.Dict):
                keyed = {
                    k.value: v
                    for k, v in zip(values.keys, values.values, strict=True)
                    if isinstance(k, ast.Constant) and isinstance(k.value, str)
                }
                return self._percent(node.left.value, [], keyed)
            args = list(values.elts) if isinstance(values, ast.Tuple) else [values]
            return self._percent(node.left.value, args, None)
        if isinstance(node, ast.Call):
            func = node.func
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "format"
                and isinstance(func.value, ast.Constant)
                and isinstance(func.value.value, str)
            ):
                return self._format(func.value.value, node)
            if depth < _MAX_DEPTH:
                helper = self._helper(func)
                if helper is not None:
                    return self._helper_template(helper, depth + 1)
        return None

    def _helper(self, func: ast.expr) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
        if isinstance(func, ast.Name):
            return self.helpers.get(func.id)
        if (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id in ("self", "cls")
        ):
            return self.helpers.get(func.attr)
        return None

    def _helper_template(
        self, helper: ast.FunctionDef | ast.AsyncFunctionDef, depth: int
    ) -> Template | None:
        """The template a helper returns: its first ``return`` of a message, in its own body."""
        env: _Env = {}
        for stmt in helper.body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self.assign(stmt, env, depth)
            elif isinstance(stmt, ast.Return) and stmt.value is not None:
                return self.template(stmt.value, env, depth)
        return None

    def _percent(
        self, text: str, args: list[ast.expr], keyed: dict[str, ast.expr] | None
    ) -> Template | None:
        parts: list[str | Hole] = []
        at, i = 0, 0
        for m in _PERCENT.finditer(text):
            parts.append(text[at : m.start()])
            at = m.end()
            conv = m.group("conv")
            if conv == "%":
                parts.append("%")
                continue
            key = m.group("key")
            if key is not None:
                arg = (keyed or {}).get(key)
            else:
                arg = args[i] if i < len(args) else None
                i += 1
            parts.append(Hole("" if arg is None else self.segment(arg), conv in _NUMBER_CONV))
        parts.append(text[at:])
        return tuple(p for p in parts if p != "")

    def _format(self, text: str, call: ast.Call) -> Template | None:
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        parts: list[str | Hole] = []
        auto = 0
        try:
            parsed = list(string.Formatter().parse(text))
        except ValueError:
            return None
        for literal, field, spec, conversion in parsed:
            if literal:
                parts.append(literal)
            if field is None:
                continue
            head = re.match(r"[^.\[]*", field).group()  # type: ignore[union-attr]
            tail = field[len(head) :]
            arg: ast.expr | None
            if head == "":
                arg = call.args[auto] if auto < len(call.args) else None
                auto += 1
            elif head.isdigit():
                index = int(head)
                arg = call.args[index] if index < len(call.args) else None
            else:
                arg = keywords.get(head)
            if arg is not None:
                expr = self.segment(arg) + tail
            else:
                expr = "" if head.isdigit() else head + tail
            number = conversion is None and bool(spec) and _number_spec(spec or "")
            parts.append(Hole(expr, number))
        return tuple(parts)


def _joined(conds: tuple[str, ...]) -> str | None:
    """The conditions as one, joined by ``and``: one that binds looser (``a or b``) in parens."""
    if len(conds) < 2:
        return conds[0] if conds else None
    return " and ".join(f"({c})" if _binds_looser_than_and(c) else c for c in conds)


@functools.lru_cache(maxsize=4096)
def _binds_looser_than_and(condition: str) -> bool:
    """Whether ``condition and x`` would read another way: ``a or b``, ``x if c else y``."""
    try:
        node = ast.parse(condition, mode="eval").body
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    if isinstance(node, ast.BoolOp):
        return isinstance(node.op, ast.Or)
    return isinstance(node, (ast.IfExp, ast.Lambda, ast.NamedExpr))


def _dotted(node: ast.expr) -> str | None:
    names: list[str] = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    names.append(node.id)
    return ".".join(reversed(names))


def _class_like(func: ast.expr) -> bool:
    """Whether a call looks like building an exception: a dotted name ending in a capital."""
    name = _dotted(func)
    return name is not None and name.rpartition(".")[2][:1].isupper()


def _is_super_init(func: ast.expr) -> bool:
    if not isinstance(func, ast.Attribute) or func.attr != "__init__":
        return False
    value = func.value
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


def _arg(call: ast.Call, index: int, names: tuple[str, ...]) -> ast.expr | None:
    if index < len(call.args) and not isinstance(call.args[index], ast.Starred):
        return call.args[index]
    for keyword in call.keywords:
        if keyword.arg in names:
            return keyword.value
    return None


def _literal_spec(spec: ast.expr | None) -> str | None:
    if spec is None:
        return ""
    if isinstance(spec, ast.JoinedStr) and all(isinstance(v, ast.Constant) for v in spec.values):
        return "".join(str(v.value) for v in spec.values if isinstance(v, ast.Constant))
    return None


def _number_spec(spec: str) -> bool:
    """Whether a format spec always gives a number (``.2f``, ``d``, ``,``; not ``%`` or ``x``)."""
    if not spec:
        return False
    kind = _SPEC_TYPE.search(spec)
    if kind is None:
        return "," in spec or "_" in spec
    return kind.group() in "dfFeEgGn"
