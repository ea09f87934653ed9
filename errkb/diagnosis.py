"""The diagnosis: what errkb found for an exception, as plain frozen data, and the orchestrator.

:func:`diagnose` (a live exception) and :func:`explain` (pasted text) are the one place that
wires matching, evidence and advisors together. What they return holds no frames, tracebacks
or exceptions, only text and numbers, so keeping a diagnosis keeps no GPU tensor alive.
"""

from __future__ import annotations

import os
import sysconfig
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from errkb.options import Options

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from types import TracebackType

    from errkb.evidence import Evidence
    from errkb.match import Match
    from errkb.records import Record
    from errkb.registry import Registry

__all__ = [
    "SCHEMA",
    "Diagnosis",
    "ExampleFix",
    "ExceptionInfo",
    "Fact",
    "Finding",
    "FrameInfo",
    "Solution",
    "diagnose",
    "explain",
]

#: The version tag of the JSON form; bumped when a field changes meaning or goes away.
SCHEMA = "errkb.diagnosis/1"
#: The longest message errkb reads from an exception; longer ones are cut, and that is said.
MAX_MESSAGE = 64 * 1024
#: How many exceptions of a chain or group are looked at, at most.
MAX_EXCEPTIONS = 64


@attrs.frozen(kw_only=True)
class Fact:
    """A number errkb used, with its unit and where it came from.

    ``source`` is one of ``message``, ``frame``, ``gpu``, ``model-config``, ``flag``,
    ``computed`` or ``default`` (a value assumed, with the reason in ``note``).
    """

    name: str
    value: object
    unit: str | None = None
    source: str
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        out: dict[str, object] = {
            "name": self.name,
            "value": self.value,
            "unit": self.unit,
            "source": self.source,
        }
        if self.note:
            out["note"] = self.note
        return out


@attrs.frozen(kw_only=True)
class Solution:
    """Something to do; ``settings`` holds the parameter values computed for this run."""

    text: str
    settings: Mapping[str, object] = attrs.field(factory=dict)
    estimate: bool = False

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {"text": self.text, "settings": dict(self.settings), "estimate": self.estimate}


@attrs.frozen(kw_only=True)
class ExampleFix:
    """A before/after example; ``location`` is ``file:line`` when it rewrites the user's call."""

    before: str | None
    after: str
    location: str | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "before": self.before,
            "after": self.after,
            "location": self.location,
            "note": self.note,
        }

    @classmethod
    def from_record_text(cls, text: str) -> ExampleFix:
        """Split a record's ``exampleFix`` at its ``# before`` / ``# after`` markers, if any."""
        lines = text.strip("\n").split("\n")
        marks = [
            i for i, line in enumerate(lines) if line.strip().lower() in ("# after", "# after:")
        ]
        if not marks:
            return cls(before=None, after=text.strip("\n"))
        cut = marks[0]
        before = [ln for ln in lines[:cut] if ln.strip().lower() not in ("# before", "# before:")]
        return cls(
            before="\n".join(before).strip("\n"), after="\n".join(lines[cut + 1 :]).strip("\n")
        )


@attrs.frozen(kw_only=True)
class FrameInfo:
    """A traceback frame, as text: where it is, and whether it is library code or the user's."""

    file: str
    line: int
    function: str
    library: bool

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "file": self.file,
            "line": self.line,
            "function": self.function,
            "library": self.library,
        }


@attrs.frozen(kw_only=True)
class ExceptionInfo:
    """One exception of the chain, in the order Python prints them (causes first)."""

    index: int
    class_name: str | None
    message: str
    notes: tuple[str, ...] = ()
    frames: tuple[FrameInfo, ...] = ()

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "index": self.index,
            "class": self.class_name,
            "message": self.message,
            "notes": list(self.notes),
            "frames": [f.to_dict() for f in self.frames],
        }


@attrs.frozen(kw_only=True)
class Finding:
    """A record that matched one exception, with what the advisors made of it."""

    match: Match
    exception: int
    solutions: tuple[Solution, ...]
    facts: tuple[Fact, ...] = ()
    example_fix: ExampleFix | None = None

    @property
    def record(self) -> Record:
        """The record that matched."""
        return self.match.record

    def to_dict(self) -> dict[str, object]:
        """The JSON form (one item of ``matches``)."""
        r = self.record
        return {
            **r.brief(),
            "library": r.library,
            "error_class": r.error_class,
            "score": self.match.score,
            "captures": {str(k): v for k, v in self.match.captures.items()},
            "exception": self.exception,
            "documentation": r.documentation,
            "common_situations": r.common_situations,
            "upstream": {"file": r.file_path, "line": r.line_number, "url": r.github_url},
            "solutions": [s.to_dict() for s in self.solutions],
            "facts": [f.to_dict() for f in self.facts],
            "example_fix": self.example_fix.to_dict() if self.example_fix else None,
        }


@attrs.frozen(kw_only=True)
class Diagnosis:
    """Everything errkb found: the exceptions read, the findings best first per exception.

    Findings are in chain order (causes first, as printed); within one exception, best first.
    No record appears twice. ``notes`` says what was left out and why.
    """

    exceptions: tuple[ExceptionInfo, ...]
    findings: tuple[Finding, ...]
    notes: tuple[str, ...] = ()

    @property
    def top(self) -> Finding:
        """The first finding: the best match of the first exception that matched."""
        return self.findings[0]

    def primary(self) -> Iterator[Finding]:
        """The best finding of each exception that matched (the ones shown in full)."""
        seen: set[int] = set()
        for finding in self.findings:
            if finding.exception not in seen:
                seen.add(finding.exception)
                yield finding

    def to_dict(self) -> dict[str, object]:
        """The versioned JSON object that ``errkb explain --json`` prints (``docs/json.md``).

        Secrets in any string (tokens, keys, passwords in URLs) are masked.
        """
        from errkb._redact import redact_all

        top = self.top
        return redact_all(
            {
                "schema": SCHEMA,
                "exceptions": [e.to_dict() for e in self.exceptions],
                "matches": [f.to_dict() for f in self.findings],
                "solutions": [s.to_dict() for s in top.solutions],
                "facts": [f.to_dict() for f in top.facts],
                "example_fix": top.example_fix.to_dict() if top.example_fix else None,
                "notes": list(self.notes),
            }
        )

    def render(self, options: Options | None = None) -> None:
        """Write the diagnosis where ``options.file`` says (stderr by default)."""
        from errkb.render import render

        render(self, options or Options())


def _safe_text(get: Any, fallback: str) -> tuple[str, bool]:
    """Call ``get`` for a text, never raising; the text is cut at :data:`MAX_MESSAGE`."""
    try:
        text = get()
        if not isinstance(text, str):
            return fallback, False
    except BaseException:
        return fallback, False
    if len(text) > MAX_MESSAGE:
        return text[:MAX_MESSAGE], True
    return text, False


def _class_name(cls: type) -> str:
    module = getattr(cls, "__module__", "builtins")
    name = getattr(cls, "__qualname__", cls.__name__)
    return name if module == "builtins" else f"{module}.{name}"


def walk_chain(exc: BaseException) -> list[BaseException]:
    """The exceptions of ``exc``'s chain and groups, in the order Python prints them.

    Causes and contexts come before the exception they led to; group members after their group.
    Cycles are cut, and at most :data:`MAX_EXCEPTIONS` are returned.
    """
    out: list[BaseException] = []
    seen: set[int] = set()

    def visit(e: BaseException, depth: int) -> None:
        if id(e) in seen or len(out) >= MAX_EXCEPTIONS or depth > 100:
            return
        seen.add(id(e))
        try:
            cause = e.__cause__
            context = None if e.__suppress_context__ else e.__context__
        except BaseException:
            cause = context = None
        before = cause if isinstance(cause, BaseException) else None
        if before is None and isinstance(context, BaseException):
            before = context
        if before is not None:
            visit(before, depth + 1)
        out.append(e)
        members = getattr(e, "exceptions", None) if _is_group(e) else None
        for member in members or ():
            if isinstance(member, BaseException):
                visit(member, depth + 1)

    visit(exc, 0)
    return out


def _is_group(e: BaseException) -> bool:
    group = getattr(__import__("builtins"), "BaseExceptionGroup", None)
    return group is not None and isinstance(e, group)


_LIBRARY_ROOTS: tuple[str, ...] | None = None


def is_library_file(path: str) -> bool:
    """Whether ``path`` belongs to an installed library or Python itself, not the user's code."""
    global _LIBRARY_ROOTS  # noqa: PLW0603 - computed once
    if path.startswith("<"):
        return True
    if _LIBRARY_ROOTS is None:
        paths = sysconfig.get_paths()
        roots = {paths.get(k) for k in ("stdlib", "platstdlib", "purelib", "platlib")}
        _LIBRARY_ROOTS = tuple(
            os.path.normcase(str(Path(r).absolute())) + os.sep for r in roots if r
        )
    norm = os.path.normcase(str(Path(path).absolute()))
    parts = norm.replace("\\", "/").split("/")
    return "site-packages" in parts or "dist-packages" in parts or norm.startswith(_LIBRARY_ROOTS)


def frames_of(tb: TracebackType | None, limit: int = 200) -> tuple[FrameInfo, ...]:
    """The frames of a traceback as text, outermost first."""
    out: list[FrameInfo] = []
    while tb is not None and len(out) < limit:
        code = tb.tb_frame.f_code
        out.append(
            FrameInfo(
                file=code.co_filename,
                line=tb.tb_lineno,
                function=code.co_name,
                library=is_library_file(code.co_filename),
            )
        )
        tb = tb.tb_next
    return tuple(out)


def _registry(options: Options, registry: Registry | None) -> Registry:
    from errkb.registry import Registry, default_registry

    if registry is not None:
        return registry
    if options.records:
        return Registry.from_paths(options.records)
    return default_registry()


def diagnose(
    exc: BaseException, *, options: Options | None = None, registry: Registry | None = None
) -> Diagnosis | None:
    """Match ``exc`` and its whole chain against the records; ``None`` when nothing matched.

    Advisors may read the local objects of the traceback's frames while this runs; the result
    keeps none of them.

    >>> try:
    ...     raise ValueError("No available memory for the cache blocks. Try increasing "
    ...                      "`gpu_memory_utilization` when initializing the engine.")
    ... except ValueError as e:
    ...     d = diagnose(e)
    >>> d.top.record.id  # doctest: +SKIP
    'vllm-no-cache-blocks'
    """
    options = options or Options()
    from errkb.evidence import Evidence

    chain = walk_chain(exc)
    infos: list[ExceptionInfo] = []
    notes: list[str] = []
    for index, e in enumerate(chain):
        message, cut = _safe_text(lambda e=e: str(e), f"<unprintable {type(e).__name__} object>")
        if cut:
            notes.append(f"the message of exception {index} was cut at {MAX_MESSAGE} characters")
        raw_notes = getattr(e, "__notes__", None)
        extra = (
            tuple(_safe_text(lambda n=n: n, "")[0] for n in raw_notes if isinstance(n, str))
            if isinstance(raw_notes, (list, tuple))
            else ()
        )
        infos.append(
            ExceptionInfo(
                index=index,
                class_name=_class_name(type(e)),
                message=message,
                notes=extra,
                frames=frames_of(e.__traceback__),
            )
        )
    evidence = Evidence(options=options, exceptions=chain)
    try:
        return _assemble(infos, [type(e) for e in chain], evidence, options, registry, notes)
    finally:
        evidence.close()


def explain(
    text: str, *, options: Options | None = None, registry: Registry | None = None
) -> Diagnosis | None:
    """Diagnose pasted text: a message, ``Class: message``, or whole tracebacks.

    >>> explain("ValueError: No available memory for the cache blocks. Try increasing "
    ...         "`gpu_memory_utilization` when initializing the engine.").top.record.slug
    'no-cache-blocks'
    """
    options = options or Options()
    from errkb.evidence import Evidence
    from errkb.parse import parse_text

    notes: list[str] = []
    if len(text) > MAX_MESSAGE * 16:
        text = text[: MAX_MESSAGE * 16]
        notes.append(f"the text was cut at {MAX_MESSAGE * 16} characters")
    infos = [
        ExceptionInfo(
            index=i,
            class_name=p.class_name,
            message=p.message,
            frames=tuple(
                FrameInfo(
                    file=f.file,
                    line=f.line,
                    function=f.function or "",
                    library=is_library_file(f.file),
                )
                for f in p.frames
            ),
        )
        for i, p in enumerate(parse_text(text))
    ]
    evidence = Evidence(options=options, exceptions=())
    try:
        classes = [i.class_name for i in infos]
        return _assemble(infos, classes, evidence, options, registry, notes)
    finally:
        evidence.close()


def _assemble(
    infos: list[ExceptionInfo],
    classes: list[Any],
    evidence: Evidence,
    options: Options,
    registry: Registry | None,
    notes: list[str],
) -> Diagnosis | None:
    """Match every exception, run the advisors, and put the diagnosis together."""
    from errkb.advisors import run_advisors

    deadline = time.monotonic() + options.timeout
    matcher = _registry(options, registry).matcher
    findings: list[Finding] = []
    seen: set[str] = set()
    for info, cls in zip(infos, classes, strict=True):
        files = [f.file for f in info.frames]
        matches = matcher.match(info.message, cls, files=files)
        for note in info.notes:
            matches.extend(matcher.match(note, None, files=files))
        matches.sort(key=lambda m: (-m.score, m.record.id))
        for m in matches:
            if m.record.id in seen:
                continue
            seen.add(m.record.id)
            base = tuple(Solution(text=s) for s in m.record.solutions)
            fix = (
                ExampleFix.from_record_text(m.record.example_fix) if m.record.example_fix else None
            )
            findings.append(Finding(match=m, exception=info.index, solutions=base, example_fix=fix))
    if matcher.broken:
        ids = ", ".join(sorted(matcher.broken))
        notes.append(f"records whose pattern does not compile were skipped: {ids}")
    if matcher.timed_out:
        ids = ", ".join(sorted(matcher.timed_out))
        notes.append(f"patterns that ran past their timeout were skipped: {ids}")
    if not findings:
        return None
    evidence.infos = tuple(infos)
    findings = run_advisors(findings, evidence, deadline, notes)
    from errkb import _plugins

    notes.extend(n for n in (*evidence.notes, *_plugins.problems()) if n not in notes)
    return Diagnosis(exceptions=tuple(infos), findings=tuple(findings), notes=tuple(notes))


def debug_enabled() -> bool:
    """Whether ``ERRKB_DEBUG`` asks for errkb's own tracebacks."""
    return os.environ.get("ERRKB_DEBUG", "") not in ("", "0")
