"""The call-site rewriter: find the user's call in the traceback, write new settings into it.

The general part of every computed fix, for any family; it knows no library. Two steps.
:func:`find_call` reads the frames with :mod:`ast` (cheap, never run) and names the outermost
call of one of the given names. :func:`rewrite_call` then edits the user's file with LibCST, a
concrete syntax tree that keeps every byte it is not told to change (commas, comments, tabs, the
inside of strings), so the result is the user's own code with the new values in it. LibCST is
imported there, never at ``import errkb``.

A setting goes where the call gets it from, never just onto the call in the frame:

* into the call that accepts it, as the family's :class:`Accepting` says: ``Args(...)`` inside
  ``build_from(Args(...))``, or the ``args = Args(...)`` assignment the call names;
* where the value is written: the literal behind a name (``max_len = 131072``), the entry of the
  dict passed as ``**kwargs``, or, through a function's parameter or its ``**kw``, the keyword
  its caller passes (the caller's frame says which call that is);
* as a new keyword only when none of these holds it.

When the call is made inside an installed library, its file is not edited: a family writes,
before the user's statement into the library, lines that hand the library's call the settings
(:func:`binding_of` says what to replace, :func:`insert_before` puts the lines there). When a
program's own command line made the call, the fix is the command line (:func:`rewrite_command`).
A family's specifics (the vLLM engine's calls, its files, ``vllm serve``) live with the family:
:mod:`errkb.advisors.kv_cache._engine_calls`.
"""

from __future__ import annotations

import ast
import json
import linecache
import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar, cast

from errkb._attrs import attrs

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping, Sequence

    import libcst as cst
    from libcst.metadata import CodeRange

    from errkb.findings import FrameInfo

__all__ = [
    "Accepting",
    "CallSite",
    "Passing",
    "Rewrite",
    "binding_of",
    "find_call",
    "insert_before",
    "literal",
    "rewrite_call",
    "rewrite_command",
    "rewrite_named_call",
]

#: How far a value is followed through names, dicts and callers.
_MAX_HOPS = 6
#: Larger files are left alone: parsing them would take much of the diagnosis' time bound.
_MAX_SOURCE = 1_000_000
_N = TypeVar("_N", bound="cst.CSTNode")


def _nowhere(path: str) -> bool:
    del path
    return False


@attrs.frozen(kw_only=True)
class Passing:
    """A call that takes the settings through one argument, a call that accepts them.

    ``from_engine_args(EngineArgs(...))``: the argument is the keyword ``argument`` (else the
    first positional one). ``derived`` names methods whose result carries the settings of the
    object they are called on (``vllm_config = engine_args.create_engine_config()``).
    """

    argument: str
    derived: frozenset[str] = frozenset()


def _passing(value: Mapping[str, Passing]) -> Mapping[str, Passing]:
    return dict(value)


@attrs.frozen(kw_only=True)
class Accepting:
    """The extension point of the rewriter: which calls take a family's settings.

    A family passes one to :func:`rewrite_call`; the rewriter follows it and knows no library.

    Attributes:
        calls: the calls whose keywords are the settings (vLLM's ``LLM``, ``EngineArgs``).
        passing: calls that take them through an argument, by name (see :class:`Passing`).
        own_file: whether a file is the library's own code, never the user's, even where the
            traceback does not mark it installed (a checkout of the library on the path).
    """

    calls: frozenset[str]
    passing: Mapping[str, Passing] = attrs.field(factory=dict, converter=_passing)
    own_file: Callable[[str], bool] = _nowhere

    @property
    def names(self) -> frozenset[str]:
        """Every call that leads to the settings: those that accept them and those that pass."""
        return self.calls | frozenset(self.passing)


@attrs.frozen(kw_only=True)
class CallSite:
    """A call found in a traceback frame: where it is, its text and keywords.

    ``index`` is the frame's position in the frames given (outermost first); ``library`` says
    the file is installed code, ``engine`` that it is the called library's own (its
    :attr:`Accepting.own_file`).
    """

    file: str
    line: int
    end_line: int
    text: str
    keywords: tuple[str, ...]
    has_double_star: bool
    library: bool
    engine: bool = False
    index: int = 0
    user_frame: FrameInfo | None


@attrs.frozen(kw_only=True)
class Rewrite:
    """An edit of one file: the lines of ``before``, from line ``line`` on, become ``after``.

    ``before`` and ``after`` are whole lines, without the last newline; every other byte of the
    file stays as it was. ``notes`` say where a value was followed to, or what to check.
    """

    file: str
    line: int
    before: str
    after: str
    notes: tuple[str, ...] = ()


def _name(func: ast.expr) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _calls_at(tree: ast.AST, line: int, names: frozenset[str]) -> list[ast.Call]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in names:
            end = node.end_lineno or node.lineno
            if node.lineno <= line <= end:
                out.append(node)
    return sorted(out, key=lambda n: (n.lineno, -(n.end_lineno or n.lineno)))


def _source(file: str) -> str | None:
    lines = linecache.getlines(file)
    return "".join(lines) if lines else None


def _parse(file: str) -> tuple[list[str], ast.AST] | None:
    lines = linecache.getlines(file)
    if not lines:
        return None
    try:
        return lines, ast.parse("".join(lines), filename=file)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def find_call(
    frames: Sequence[FrameInfo],
    names: frozenset[str],
    own_file: Callable[[str], bool] = _nowhere,
) -> CallSite | None:
    """The outermost frame whose current line is inside a call named one of ``names``.

    Outermost first: when ``LLM(...)`` in the user's code calls ``LLMEngine.from_engine_args``
    inside the library, the user's call is the one to change. ``own_file`` tells the called
    library's own files (:attr:`CallSite.engine`), which are never the user's.
    """
    for position, frame in enumerate(frames):
        parsed = _parse(frame.file)
        if parsed is None:
            continue
        lines, tree = parsed
        calls = _calls_at(tree, frame.line, names)
        if not calls:
            continue
        node = calls[0]
        end = node.end_lineno or node.lineno
        engine = own_file(frame.file)
        user = next(
            (f for f in reversed(frames[:position]) if not f.library and not own_file(f.file)),
            None,
        )
        return CallSite(
            file=frame.file,
            line=node.lineno,
            end_line=end,
            text="".join(lines[node.lineno - 1 : end]).rstrip("\n"),
            keywords=tuple(k.arg for k in node.keywords if k.arg),
            has_double_star=any(k.arg is None for k in node.keywords),
            library=frame.library or engine,
            engine=engine,
            index=position,
            user_frame=user if frame.library or engine else None,
        )
    return None


# --- LibCST: the user's file as a tree, and the edits to make in it --------------------------


class _UnsupportedError(Exception):
    """This code's shape is one the rewriter does not handle; no rewrite is offered."""


class _Chunk:
    """One top-level statement (or the few that share its lines), parsed by LibCST on its own.

    LibCST's metadata costs time in proportion to the code it covers, so a file is read whole
    by :mod:`ast` and only the statements an edit needs go through LibCST.
    """

    def __init__(self, first: int, text: str) -> None:
        import libcst as cst
        from libcst.metadata import MetadataWrapper, ParentNodeProvider, PositionProvider

        self.first = first
        self.count = text.count("\n")
        try:
            # Parsed here and never shared: the wrapper need not copy the tree.
            wrapper = MetadataWrapper(cst.parse_module(text), unsafe_skip_copy=True)
        except (cst.ParserSyntaxError, RecursionError, MemoryError) as exc:
            raise _UnsupportedError(f"line {first}: cannot be parsed") from exc
        self.tree = wrapper.module
        self.positions: Mapping[cst.CSTNode, CodeRange] = wrapper.resolve(PositionProvider)
        self.parents: Mapping[cst.CSTNode, cst.CSTNode] = wrapper.resolve(ParentNodeProvider)


class _Module:
    """One file: its lines, its :mod:`ast` tree, and LibCST chunks parsed when needed."""

    def __init__(self, file: str, source: str) -> None:
        self.file = file
        self.source = source
        if len(source) > _MAX_SOURCE:
            raise _UnsupportedError(f"{file}: too large to rewrite within the diagnosis' time")
        try:
            self.ast = ast.parse(source, filename=file)
        except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
            raise _UnsupportedError(f"{file}: cannot be parsed") from exc
        self.text_lines = source.split("\n")
        self.spans: list[tuple[int, int]] = []
        for node in self.ast.body:
            decorators = getattr(node, "decorator_list", [])
            first = min([node.lineno, *(d.lineno for d in decorators)])
            last = node.end_lineno or node.lineno
            if self.spans and first <= self.spans[-1][1]:
                self.spans[-1] = (self.spans[-1][0], max(last, self.spans[-1][1]))
            else:
                self.spans.append((first, last))
        self.chunks: dict[int, _Chunk] = {}

    def chunk_at(self, line: int) -> _Chunk | None:
        """The chunk of the top-level statement whose lines include ``line``."""
        for i, (first, last) in enumerate(self.spans):
            if first <= line <= last:
                if i not in self.chunks:
                    text = "\n".join(self.text_lines[first - 1 : last]) + "\n"
                    self.chunks[i] = _Chunk(first, text)
                return self.chunks[i]
        return None

    def chunk_of(self, node: cst.CSTNode) -> _Chunk:
        for chunk in self.chunks.values():
            if node in chunk.positions:
                return chunk
        raise _UnsupportedError("a node of no chunk")  # not reached: every node comes from one

    def assigning_chunks(self, name: str) -> list[_Chunk]:
        """Chunks of module-level statements that assign ``name`` or an item of it."""
        lines = []
        for node in self.ast.body:
            stack: list[ast.AST] = [node]
            while stack:
                item = stack.pop()
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    continue
                if isinstance(item, (ast.Assign, ast.AnnAssign)):
                    targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                    for target in targets:
                        base = target.value if isinstance(target, ast.Subscript) else target
                        if isinstance(base, ast.Name) and base.id == name:
                            lines.append(node.lineno)
                stack.extend(ast.iter_child_nodes(item))
        chunks = [self.chunk_at(line) for line in dict.fromkeys(lines)]
        return [c for c in chunks if c is not None]

    def start(self, node: cst.CSTNode) -> tuple[int, int]:
        chunk = self.chunk_of(node)
        pos = chunk.positions[node].start
        return pos.line + chunk.first - 1, pos.column

    def lines(self, node: cst.CSTNode) -> tuple[int, int]:
        chunk = self.chunk_of(node)
        rng = chunk.positions[node]
        return rng.start.line + chunk.first - 1, rng.end.line + chunk.first - 1

    def code(self, node: cst.CSTNode) -> str:
        return self.chunk_of(node).tree.code_for_node(node)

    def ancestors(self, node: cst.CSTNode) -> Iterator[cst.CSTNode]:
        parents = self.chunk_of(node).parents
        while node in parents:
            node = parents[node]
            yield node

    def scope(self, node: cst.CSTNode) -> cst.CSTNode | None:
        """The function whose body ``node`` is in; None for the module's own level."""
        import libcst as cst

        for parent in self.ancestors(node):
            if isinstance(parent, (cst.FunctionDef, cst.Lambda)):
                return parent
        return None

    def calls_at(self, line: int, names: frozenset[str]) -> list[cst.Call]:
        """Calls named one of ``names`` whose lines include ``line``, outermost first."""
        import libcst as cst

        chunk = self.chunk_at(line)
        if chunk is None:
            return []
        found = []
        for node in _walk(chunk.tree):
            if isinstance(node, cst.Call) and _func_name(node) in names:
                first, last = self.lines(node)
                if first <= line <= last:
                    found.append(node)
        return found

    def statement(self, node: cst.CSTNode) -> cst.CSTNode:
        """The innermost simple statement line holding ``node``, else ``node`` itself."""
        import libcst as cst

        for parent in self.ancestors(node):
            if isinstance(parent, cst.SimpleStatementLine):
                return parent
            if isinstance(parent, cst.BaseCompoundStatement):
                break
        return node


def _walk(root: cst.CSTNode, *, into_definitions: bool = True) -> Iterator[cst.CSTNode]:
    """The nodes under ``root`` (not ``root``), parents first; optionally not into defs."""
    import libcst as cst

    stack = list(reversed(root.children))
    while stack:
        node = stack.pop()
        yield node
        if not into_definitions and isinstance(node, (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            continue
        stack.extend(reversed(node.children))


def _func_name(call: cst.Call) -> str | None:
    import libcst as cst

    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def _keyword(call: cst.Call, key: str) -> cst.Arg | None:
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == key), None)


def _literal(value: object) -> str:
    """``value`` as Python source: numbers as Python writes them, strings in double quotes."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, (bool, int, float)) or value is None:
        return repr(value)
    raise _UnsupportedError(f"no literal for {type(value).__name__}")


def _is_literal(node: cst.BaseExpression) -> bool:
    import libcst as cst

    if isinstance(node, cst.UnaryOperation):
        return _is_literal(node.expression)
    return isinstance(node, (cst.Integer, cst.Float, cst.SimpleString, cst.Name)) and (
        not isinstance(node, cst.Name) or node.value in ("True", "False", "None")
    )


def _string_key(node: cst.BaseExpression | None) -> str | None:
    import libcst as cst

    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


@attrs.define
class _Edits:
    """What to change, by file: nodes replaced by new expressions, keywords added to calls."""

    replace: dict[str, dict[cst.CSTNode, str]] = attrs.field(factory=dict)
    add: dict[str, dict[cst.Call, list[tuple[str, str]]]] = attrs.field(factory=dict)
    merge: dict[str, dict[cst.CSTNode, list[tuple[str, str]]]] = attrs.field(factory=dict)
    shown: dict[str, list[tuple[int, int]]] = attrs.field(factory=dict)
    notes: list[str] = attrs.field(factory=list)

    def set_value(self, mod: _Module, node: cst.CSTNode, text: str) -> None:
        self.replace.setdefault(mod.file, {})[node] = text
        self.shown.setdefault(mod.file, []).append(mod.lines(mod.statement(node)))

    def add_keyword(self, mod: _Module, call: cst.Call, key: str, text: str) -> None:
        self.add.setdefault(mod.file, {}).setdefault(call, []).append((key, text))
        self.shown.setdefault(mod.file, []).append(mod.lines(mod.statement(call)))

    def merge_into(self, mod: _Module, mapping: cst.BaseExpression, key: str, text: str) -> None:
        """``**mapping`` becomes ``**{**mapping, "key": text, ...}``."""
        self.merge.setdefault(mod.file, {}).setdefault(mapping, []).append((key, text))
        self.shown.setdefault(mod.file, []).append(mod.lines(mod.statement(mapping)))


class _Rewriter:
    """Places each setting where the call takes it from (see the module's docstring)."""

    def __init__(self, frames: Sequence[FrameInfo], own_file: Callable[[str], bool]) -> None:
        self.frames = frames
        self.own_file = own_file
        self.modules: dict[str, _Module] = {}
        self.edits = _Edits()

    def module(self, index: int) -> _Module:
        file = self.frames[index].file
        if file not in self.modules:
            source = _source(file)
            if source is None:
                raise _UnsupportedError(f"{file}: source not available")
            self.modules[file] = _Module(file, source)
        return self.modules[file]

    # -- where the settings are taken --

    def accepting_call(
        self, mod: _Module, call: cst.Call, index: int, accepting: Accepting, hops: int = 0
    ) -> tuple[_Module, cst.Call, int]:
        """The call whose keywords are the settings: ``call``, or the one it is passed."""
        import libcst as cst

        name = _func_name(call)
        if name in accepting.calls:
            return mod, call, index
        passing = accepting.passing.get(name or "")
        if passing is None or hops > _MAX_HOPS:
            raise _UnsupportedError(f"{name}(...) does not take the settings")
        arg = _keyword(call, passing.argument) or next(
            (a for a in call.args if a.keyword is None and not a.star), None
        )
        if arg is None:
            raise _UnsupportedError(f"{name}(...) is given no arguments to carry the settings")
        found = self.definition(mod, arg.value, index)
        if found is None:
            raise _UnsupportedError(f"cannot see where {name}(...)'s arguments are made")
        mod, expr, index = found
        if isinstance(expr, cst.Call) and _func_name(expr) in accepting.calls:
            return mod, expr, index
        if (
            isinstance(expr, cst.Call)
            and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in passing.derived
        ):
            # config = args.make_config(): the settings are those of args.
            inner = self.definition(mod, expr.func.value, index)
            if inner is not None and isinstance(inner[1], cst.Call):
                return self.accepting_call(inner[0], inner[1], inner[2], accepting, hops + 1)
        raise _UnsupportedError(f"cannot see where {name}(...)'s arguments are made")

    def definition(
        self, mod: _Module, expr: cst.BaseExpression, index: int, hops: int = 0
    ) -> tuple[_Module, cst.BaseExpression, int] | None:
        """The expression a name stands for at ``expr``, followed through names and callers.

        A name's last assignment above its use in the same function; a parameter's argument in
        the caller's call (the frame before ``index``). None when neither can be seen.
        """
        import libcst as cst

        if not isinstance(expr, cst.Name) or hops > _MAX_HOPS:
            return mod, expr, index
        assigned = self.assignment(mod, expr)
        if assigned is not None:
            return self.definition(mod, assigned, index, hops + 1)
        caller = self.parameter_argument(mod, expr, index)
        if caller is None:
            return None
        cmod, cexpr, cindex = caller
        return self.definition(cmod, cexpr, cindex, hops + 1)

    def assignment(self, mod: _Module, name: cst.Name) -> cst.BaseExpression | None:
        """The value last assigned to ``name`` above it, in the same function (or module)."""
        import libcst as cst

        use = mod.start(name)
        best: tuple[tuple[int, int], cst.BaseExpression] | None = None
        for node in self.own_nodes(mod, name):
            if not isinstance(node, (cst.Assign, cst.AnnAssign)) or node.value is None:
                continue
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            )
            if not any(isinstance(t, cst.Name) and t.value == name.value for t in targets):
                continue
            at = mod.start(node)
            if at < use and (best is None or at > best[0]):
                best = (at, node.value)
        return None if best is None else best[1]

    def own_nodes(self, mod: _Module, name: cst.Name) -> Iterator[cst.CSTNode]:
        """The nodes of the body ``name`` is used in, not those of functions defined in it.

        At the module's level, only the statements that assign ``name`` (found by :mod:`ast`).
        """
        scope = mod.scope(name)
        if scope is not None:
            yield from _walk(scope, into_definitions=False)
            return
        for chunk in mod.assigning_chunks(name.value):
            yield from _walk(chunk.tree, into_definitions=False)

    def parameter(self, mod: _Module, name: cst.Name) -> tuple[cst.FunctionDef, cst.Param] | None:
        import libcst as cst

        scope = mod.scope(name)
        if not isinstance(scope, cst.FunctionDef):
            return None
        p = scope.params
        for param in [*p.posonly_params, *p.params, *p.kwonly_params]:
            if param.name.value == name.value:
                return scope, param
        for star in (p.star_arg, p.star_kwarg):
            if isinstance(star, cst.Param) and star.name.value == name.value:
                return scope, star
        return None

    def caller_call(self, func: cst.FunctionDef, index: int) -> tuple[_Module, cst.Call, int]:
        """The call of ``func`` on the line of the frame that called it (frame ``index - 1``)."""
        caller = self.frames[index - 1] if index > 0 else None
        if caller is None or caller.library or self.own_file(caller.file):
            raise _UnsupportedError(f"no caller of {func.name.value}() in your code")
        cmod = self.module(index - 1)
        calls = cmod.calls_at(self.frames[index - 1].line, frozenset({func.name.value}))
        if not calls:
            raise _UnsupportedError(f"no call of {func.name.value}() on the caller's line")
        return cmod, calls[-1], index - 1

    def parameter_argument(
        self, mod: _Module, name: cst.Name, index: int
    ) -> tuple[_Module, cst.BaseExpression, int] | None:
        """The caller's argument for the parameter ``name``, if it passes one."""
        found = self.parameter(mod, name)
        if found is None:
            return None
        func = found[0]
        try:
            cmod, call, cindex = self.caller_call(func, index)
        except _UnsupportedError:
            return None
        arg = _keyword(call, name.value)
        if arg is None:
            positional = [a for a in call.args if a.keyword is None and not a.star]
            params = [*func.params.posonly_params, *func.params.params]
            offset = 1 if params and params[0].name.value in ("self", "cls") else 0
            names = [q.name.value for q in params[offset:]]
            if name.value in names and names.index(name.value) < len(positional):
                arg = positional[names.index(name.value)]
        return None if arg is None else (cmod, arg.value, cindex)

    # -- setting one keyword --

    def set_keyword(
        self, mod: _Module, call: cst.Call, key: str, text: str, index: int, hops: int = 0
    ) -> None:
        """Make ``call`` pass ``key=text``, changing it where it is written."""
        import libcst as cst

        if hops > _MAX_HOPS:
            raise _UnsupportedError("the value is passed along too many times")
        arg = _keyword(call, key)
        if arg is not None:
            self.set_value(mod, arg.value, text, index)
            return
        unseen = None
        for star in (a for a in call.args if a.star == "**"):
            seen = self.set_in_mapping(mod, star.value, key, text, index)
            if seen is True:
                return
            if isinstance(star.value, cst.Name):
                found = self.parameter(mod, star.value)
                if found is not None and found[1] is found[0].params.star_kwarg:
                    # def build(path, **kw): LLM(model=path, **kw): the caller's keyword.
                    cmod, ccall, cindex = self.caller_call(found[0], index)
                    self.set_keyword(cmod, ccall, key, text, cindex, hops + 1)
                    return
            if seen is None:
                unseen = star
        if unseen is not None:
            # What **x holds cannot be seen: pass {**x, "key": value}, which wins either way.
            self.edits.merge_into(mod, unseen.value, key, text)
            return
        self.edits.add_keyword(mod, call, key, text)

    def set_in_mapping(
        self, mod: _Module, expr: cst.BaseExpression, key: str, text: str, index: int
    ) -> bool | None:
        """Set ``key`` where the dict behind ``**expr`` writes it.

        True when set; False when the dict is seen and has no such key; None when what the
        dict holds cannot be seen. The last write above the call wins: ``d = {...}`` (or
        ``dict(...)``), then ``d["key"] = value`` lines, in the same function.
        """
        import libcst as cst

        if isinstance(expr, cst.Name):
            writes = self.item_writes(mod, expr, key)
            if writes is None:
                return None
            if writes:
                self.set_value(mod, writes, text, index)
                return True
            return False
        if isinstance(expr, cst.Dict):
            if any(isinstance(e, cst.StarredDictElement) for e in expr.elements):
                return None
            for element in expr.elements:
                if isinstance(element, cst.DictElement) and _string_key(element.key) == key:
                    self.set_value(mod, element.value, text, index)
                    return True
            return False
        if isinstance(expr, cst.Call) and _func_name(expr) == "dict":
            if any(a.star or a.keyword is None for a in expr.args):
                return None
            arg = _keyword(expr, key)
            if arg is not None:
                self.set_value(mod, arg.value, text, index)
                return True
            return False
        return None

    def item_writes(
        self, mod: _Module, name: cst.Name, key: str
    ) -> cst.BaseExpression | Literal[False] | None:
        """The value last written for ``name[key]`` above ``name``'s use.

        False when ``name`` is a dict made above without that key; None when what it holds
        cannot be seen (a parameter, a dict read from elsewhere).
        """
        import libcst as cst

        use = mod.start(name)
        made = False
        writes: list[tuple[tuple[int, int], cst.BaseExpression | None]] = []
        for node in self.own_nodes(mod, name):
            if not isinstance(node, cst.Assign) or mod.start(node) >= use:
                continue
            for target in (t.target for t in node.targets):
                if isinstance(target, cst.Name) and target.value == name.value:
                    # A new mapping: its entry for key, or none (a later write may add one).
                    value: cst.BaseExpression | None = None
                    if isinstance(node.value, cst.Dict) and not any(
                        isinstance(e, cst.StarredDictElement) for e in node.value.elements
                    ):
                        value = next(
                            (
                                e.value
                                for e in node.value.elements
                                if isinstance(e, cst.DictElement) and _string_key(e.key) == key
                            ),
                            None,
                        )
                    elif (
                        isinstance(node.value, cst.Call)
                        and _func_name(node.value) == "dict"
                        and all(a.keyword is not None for a in node.value.args)
                    ):
                        arg = _keyword(node.value, key)
                        value = arg.value if arg is not None else None
                    else:
                        made = False
                        writes.clear()
                        continue
                    made = True
                    writes.append((mod.start(node), value))
                elif (
                    isinstance(target, cst.Subscript)
                    and isinstance(target.value, cst.Name)
                    and target.value.value == name.value
                    and len(target.slice) == 1
                    and isinstance(target.slice[0].slice, cst.Index)
                    and _string_key(target.slice[0].slice.value) == key
                ):
                    writes.append((mod.start(node), node.value))
        if not made:
            return None
        last = max(writes, key=lambda w: w[0])[1]
        return False if last is None else last

    def set_value(self, mod: _Module, node: cst.BaseExpression, text: str, index: int) -> None:
        """Replace the value ``node``, or the literal it names (a variable, a parameter)."""
        import libcst as cst

        if isinstance(node, cst.Name) and not _is_literal(node):
            assigned = self.assignment(mod, node)
            if assigned is not None and _is_literal(assigned):
                self.edits.set_value(mod, assigned, text)
                self.edits.notes.append(
                    f"{node.value} is set above its use: changed where it is assigned"
                )
                return
            found = self.parameter(mod, node) if assigned is None else None
            if found is not None and found[1].star == "":
                passed = self.parameter_argument(mod, node, index)
                if passed is not None:
                    # The caller's argument for this parameter, positional or keyword.
                    self.set_value(passed[0], passed[1], text, passed[2])
                    return
                try:
                    cmod, call, cindex = self.caller_call(found[0], index)
                except _UnsupportedError:
                    pass
                else:
                    # The caller leaves the parameter at its default: it passes it now.
                    self.set_keyword(cmod, call, node.value, text, cindex)
                    return
        self.edits.set_value(mod, node, text)


def _with_keywords(call: cst.Call, new: Sequence[tuple[str, str]]) -> cst.Call:
    """``call`` with ``key=value`` arguments added after its last, laid out as it lays its own.

    One argument a line stays one a line (a comment after the old last argument stays on its
    line); a trailing comma stays trailing; a one-line call stays on one line.
    """
    import libcst as cst

    def plain(ws: cst.ParenthesizedWhitespace) -> cst.ParenthesizedWhitespace:
        return cst.ParenthesizedWhitespace(indent=ws.indent, last_line=ws.last_line)

    nothing = cst.SimpleWhitespace("")
    added = [
        cst.Arg(
            keyword=cst.Name(key),
            value=cst.parse_expression(value),
            equal=cst.AssignEqual(whitespace_before=nothing, whitespace_after=nothing),
        )
        for key, value in new
    ]
    args = list(call.args)
    if not args:
        spaced = [
            a.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            for a in added[:-1]
        ]
        return call.with_changes(args=[*spaced, added[-1]])
    before_arg = call.whitespace_before_args
    if len(args) >= 2 and isinstance(args[-2].comma, cst.Comma):
        before_arg = args[-2].comma.whitespace_after
    last = args[-1]
    trailing = isinstance(last.comma, cst.Comma)
    closing = (
        last.comma.whitespace_after
        if isinstance(last.comma, cst.Comma)
        else last.whitespace_after_arg
    )
    between: cst.BaseParenthesizableWhitespace
    step: cst.BaseParenthesizableWhitespace
    end: cst.BaseParenthesizableWhitespace = closing
    if isinstance(before_arg, cst.ParenthesizedWhitespace):
        step = plain(before_arg)
        if isinstance(closing, cst.ParenthesizedWhitespace):
            # The old last line keeps its comment; the closing parenthesis keeps its indent.
            between = cst.ParenthesizedWhitespace(
                first_line=closing.first_line,
                empty_lines=closing.empty_lines,
                indent=step.indent,
                last_line=step.last_line,
            )
            end = plain(closing)
        else:
            between = step
    elif (
        isinstance(closing, cst.ParenthesizedWhitespace) and closing.first_line.comment is not None
    ):
        raise _UnsupportedError("a comment after the last argument of a call laid out on one line")
    else:
        between = step = cst.SimpleWhitespace(" ")
    if isinstance(last.comma, cst.Comma):
        last = last.with_changes(comma=last.comma.with_changes(whitespace_after=between))
    else:
        last = last.with_changes(
            comma=cst.Comma(whitespace_before=nothing, whitespace_after=between),
            whitespace_after_arg=nothing,
        )
    middle = [a.with_changes(comma=cst.Comma(whitespace_after=step)) for a in added[:-1]]
    final = added[-1]
    if trailing:
        final = final.with_changes(comma=cst.Comma(whitespace_after=end))
    else:
        final = final.with_changes(whitespace_after_arg=end)
    return call.with_changes(args=[*args[:-1], last, *middle, final])


def _apply(mod: _Module, chunk: _Chunk, edits: _Edits) -> list[str]:
    """The chunk's lines with ``edits`` made."""
    import libcst as cst

    replace = edits.replace.get(mod.file, {})
    add = edits.add.get(mod.file, {})
    merge = edits.merge.get(mod.file, {})

    def changed(original: cst.CSTNode, updated: cst.CSTNode) -> cst.CSTNode:
        if original in replace:
            return cst.parse_expression(replace[original])
        if original in merge:
            items = ", ".join(f"{json.dumps(k)}: {v}" for k, v in merge[original])
            return cst.parse_expression(f"{{**{mod.code(original)}, {items}}}")
        if isinstance(original, cst.Call) and original in add and isinstance(updated, cst.Call):
            return _with_keywords(updated, add[original])
        return updated

    class _Apply(cst.CSTTransformer):
        def on_leave(self, original_node: _N, updated_node: _N) -> _N:
            # An expression is replaced by an expression: the parent's field takes either.
            return cast("_N", changed(original_node, updated_node))

    code = chunk.tree.visit(_Apply()).code
    return code.split("\n")[: code.count("\n")]


def _region(mod: _Module, edits: _Edits) -> Rewrite:
    """The lines that changed, widened to the statements they belong to."""
    old_lines = mod.text_lines
    new_lines = list(old_lines)
    for chunk in sorted(mod.chunks.values(), key=lambda c: -c.first):
        start = chunk.first - 1
        new_lines[start : start + chunk.count] = _apply(mod, chunk, edits)
    spans = edits.shown[mod.file]
    first = min(s for s, _ in spans)
    last = max(e for _, e in spans)
    tail = len(old_lines) - last
    if (
        old_lines[: first - 1] != new_lines[: first - 1]
        or old_lines[last:] != new_lines[len(new_lines) - tail :]
    ):
        raise _UnsupportedError("the edit reached outside the statements it was meant for")
    return Rewrite(
        file=mod.file,
        line=first,
        before="\n".join(old_lines[first - 1 : last]),
        after="\n".join(new_lines[first - 1 : len(new_lines) - tail]),
        notes=tuple(dict.fromkeys(edits.notes)),
    )


def rewrite_call(
    frames: Sequence[FrameInfo],
    index: int,
    line: int,
    names: frozenset[str],
    settings: Mapping[str, object],
    accepting: Accepting | None = None,
) -> Rewrite | None:
    """Set ``settings`` on the call named one of ``names`` at ``line`` of frame ``index``'s file.

    With ``accepting``, the settings go into the call that accepts them (a call that passes
    them is followed to it: :class:`Accepting`); without, onto the call itself. None when the
    code's shape is one this does not handle (the source is gone, the settings would land in
    two files, a name's value cannot be seen): no fix beats a wrong one.
    """
    rewriter = _Rewriter(frames, accepting.own_file if accepting is not None else _nowhere)
    try:
        mod = rewriter.module(index)
        calls = mod.calls_at(line, names)
        if not calls:
            return None
        target_mod, target, target_index = (
            rewriter.accepting_call(mod, calls[0], index, accepting)
            if accepting is not None
            else (mod, calls[0], index)
        )
        for key, value in settings.items():
            rewriter.set_keyword(target_mod, target, key, _literal(value), target_index)
        files = set(rewriter.edits.shown)
        if len(files) != 1:
            return None
        return _region(rewriter.modules[files.pop()], rewriter.edits)
    except _UnsupportedError:
        return None


# --- Any named call in the user's code ------------------------------------------------------


def rewrite_named_call(
    frames: Sequence[FrameInfo], names: frozenset[str], settings: Mapping[str, object]
) -> Rewrite | None:
    """Write ``settings`` as keywords of the user's call named one of ``names``.

    For a call the traceback does not hold: the call is the one at a user frame's line
    (outermost first), else the one such call in the outermost user frame's file (a
    ``TrainingArguments(...)`` made above the ``trainer.train()`` that failed). Each keyword
    goes where its value is written (:func:`rewrite_call`). None when there is no such call,
    more than one in that file, or a shape the rewriter does not handle.
    """
    users = [i for i, frame in enumerate(frames) if not frame.library]
    chosen: tuple[int, int] | None = None
    for index in users:
        parsed = _parse(frames[index].file)
        if parsed is not None and _calls_at(parsed[1], frames[index].line, names):
            chosen = (index, frames[index].line)
            break
    if chosen is None and users:
        parsed = _parse(frames[users[0]].file)
        found = [
            node
            for node in (ast.walk(parsed[1]) if parsed else ())
            if isinstance(node, ast.Call) and _name(node.func) in names
        ]
        if len(found) == 1:
            chosen = (users[0], found[0].lineno)
    if chosen is None:
        return None
    return rewrite_call(frames, *chosen, names, settings)


# --- A call made inside an installed library ------------------------------------------------


def literal(value: object) -> str | None:
    """``value`` as Python source (:func:`repr` of a number, a double-quoted string); else None.

    >>> literal(0.93), literal("fp8"), literal([1])
    ('0.93', '"fp8"', None)
    """
    try:
        return _literal(value)
    except _UnsupportedError:
        return None


def _module_name(path: str) -> str | None:
    """The import name of an installed file (``.../site-packages/a/b.py`` -> ``a.b``)."""
    parts = os.path.normcase(path).replace("\\", "/").split("/")
    root = max(
        (i for i, p in enumerate(parts) if p in ("site-packages", "dist-packages")), default=None
    )
    if root is None or not parts[-1].endswith(".py"):
        return None
    names = [*parts[root + 1 : -1], parts[-1][:-3]]
    if names[-1] == "__init__":
        names.pop()
    return ".".join(names) if names and all(n.isidentifier() for n in names) else None


def binding_of(file: str, line: int, names: frozenset[str]) -> tuple[str, str] | None:
    """Where the call named one of ``names`` at ``file:line`` looks its callable up.

    ``(module, attribute)``, to be replaced for one run: ``from pkg import Thing`` inside the
    function that calls ``Thing(...)`` looks ``pkg.Thing`` up at each call; otherwise the name is
    the installed module's own global. None when the file is not installed code (no import
    name), the call is not a plain name, or the source cannot be read.
    """
    parsed = _parse(file)
    if parsed is None:
        return None
    module = _module_name(file)
    tree = parsed[1]
    call = next(iter(_calls_at(tree, line, names)), None)
    if module is None or call is None or not isinstance(call.func, ast.Name):
        return None
    name = call.func.id
    package = module if file.endswith("__init__.py") else module.rpartition(".")[0]
    for func in ast.walk(tree):
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if not func.lineno <= call.lineno <= (func.end_lineno or func.lineno):
            continue
        for node in ast.walk(func):
            if isinstance(node, ast.ImportFrom) and node.lineno < call.lineno:
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        base = package.split(".")
                        if node.level:
                            base = base[: len(base) - node.level + 1]
                            source = ".".join([*base, *([node.module] if node.module else [])])
                        else:
                            source = node.module or ""
                        return (source, alias.name) if source else None
    return module, name


def _statement_at(mod: _Module, line: int) -> cst.CSTNode | None:
    """The innermost statement whose lines include ``line``."""
    import libcst as cst

    chunk = mod.chunk_at(line)
    if chunk is None:
        return None
    best = None
    for node in _walk(chunk.tree):
        if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            first, last = mod.lines(node)
            if first <= line <= last:
                best = node
    return best


def insert_before(frame: FrameInfo, lines: Sequence[str]) -> Rewrite | None:
    """``lines`` put before the statement at ``frame``'s line, indented as it is.

    The statement stays whole and unchanged below them (a compound statement's first line
    only); every other byte of the file too. None when the file cannot be read or parsed.
    """
    source = _source(frame.file)
    if source is None:
        return None
    try:
        mod = _Module(frame.file, source)
        statement = _statement_at(mod, frame.line)
    except _UnsupportedError:
        return None
    if statement is None:
        return None
    first, last = mod.lines(statement)
    import libcst as cst

    if isinstance(statement, cst.BaseCompoundStatement):
        last = first
    text = source.split("\n")
    indent = text[first - 1][: len(text[first - 1]) - len(text[first - 1].lstrip())]
    before = "\n".join(text[first - 1 : last])
    return Rewrite(
        file=frame.file,
        line=first,
        before=before,
        after="\n".join([*(indent + new for new in lines), before]),
    )


# --- A program's own command line -----------------------------------------------------------


def rewrite_command(argv: Sequence[str], settings: Mapping[str, object]) -> tuple[str, str]:
    """The command line ``argv`` with ``settings`` as flags: ``(before, after)``.

    ``--max-model-len 131072`` or ``--max-model-len=131072`` get the new value; a flag not
    given is added at the end. ``True`` is the bare flag (``--enforce-eager``): a switch takes
    no value, and a flag with an optional one takes none for true. The program is shown as it
    is typed (``vllm``), not its path; a script as ``python SCRIPT``.
    """
    program = Path(argv[0]).name if argv else ""
    if program.endswith(".py"):
        program = "python " + argv[0]
    args = list(argv[1:])
    for key, value in settings.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args = _switched_on(args, flag)
            continue
        text = str(value)
        for i, arg in enumerate(args):
            if arg == flag and i + 1 < len(args):
                args[i + 1] = text
                break
            if arg.startswith(flag + "="):
                args[i] = f"{flag}={text}"
                break
        else:
            args.extend([flag, text])
    import shlex  # only a command line is quoted

    before = " ".join([program, shlex.join(argv[1:])]).strip()
    after = " ".join([program, shlex.join(args)]).strip()
    return before, after


def _switched_on(args: list[str], flag: str) -> list[str]:
    """``args`` with ``flag`` given bare: its ``=value`` or a following true/false dropped."""
    out: list[str] = []
    found = False
    skip = False
    for i, arg in enumerate(args):
        if skip:
            skip = False
            continue
        if arg == flag or arg.startswith(flag + "="):
            found = True
            out.append(flag)
            following = args[i + 1] if arg == flag and i + 1 < len(args) else ""
            skip = following.lower() in ("true", "false")
            continue
        out.append(arg)
    return out if found else [*out, flag]
