"""The orchestrator: the one place that wires matching, evidence and advisors together.

:func:`diagnose` reads a live exception and its chain, :func:`explain` pasted text; both match
every exception against the records, let the advisors work out the advice for this run, and
return a :class:`~errkb.findings.Diagnosis` (plain frozen data, see :mod:`errkb.findings`).
The data types are re-exported here, where earlier releases defined them.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any

from errkb._traceback import class_name, frame_sites, is_library_file, safe_text, walk_chain
from errkb.findings import (
    SCHEMA,
    Diagnosis,
    ExampleFix,
    ExceptionInfo,
    Fact,
    Finding,
    FrameInfo,
    Solution,
)
from errkb.options import Options

if TYPE_CHECKING:
    from errkb.evidence import Evidence
    from errkb.registry import Registry

__all__ = [
    "MAX_MESSAGE",
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

#: The longest message errkb reads from an exception; longer ones are cut, and that is said.
MAX_MESSAGE = 64 * 1024


def _frames(tb: Any) -> tuple[FrameInfo, ...]:
    return tuple(
        FrameInfo(file=file, line=line, function=function, library=is_library_file(file))
        for file, line, function in frame_sites(tb)
    )


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
        message, cut = safe_text(
            functools.partial(str, e), f"<unprintable {type(e).__name__} object>", MAX_MESSAGE
        )
        if cut:
            notes.append(f"the message of exception {index} was cut at {MAX_MESSAGE} characters")
        raw_notes = getattr(e, "__notes__", None)
        extra = (
            tuple(
                safe_text(functools.partial(str, n), "", MAX_MESSAGE)[0]
                for n in raw_notes
                if isinstance(n, str)
            )
            if isinstance(raw_notes, (list, tuple))
            else ()
        )
        infos.append(
            ExceptionInfo(
                index=index,
                class_name=class_name(type(e)),
                message=message,
                notes=extra,
                frames=_frames(e.__traceback__),
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
    from errkb.match import Skipped

    deadline = time.monotonic() + options.timeout
    matcher = _registry(options, registry).matcher
    skipped = Skipped()
    findings: list[Finding] = []
    seen: set[str] = set()
    for info, cls in zip(infos, classes, strict=True):
        files = [f.file for f in info.frames]
        matches = matcher.match(info.message, cls, files=files, skipped=skipped)
        for note in info.notes:
            matches.extend(matcher.match(note, None, files=files, skipped=skipped))
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
    if skipped.broken:
        ids = ", ".join(sorted(skipped.broken))
        notes.append(f"records whose pattern does not compile were skipped: {ids}")
    if skipped.timed_out:
        ids = ", ".join(sorted(skipped.timed_out))
        notes.append(f"patterns that ran past their timeout were skipped: {ids}")
    if not findings:
        return None
    evidence.infos = tuple(infos)
    findings = run_advisors(findings, evidence, deadline, notes)
    from errkb import _plugins

    notes.extend(n for n in (*evidence.notes, *_plugins.problems()) if n not in notes)
    return Diagnosis(exceptions=tuple(infos), findings=tuple(findings), notes=tuple(notes))
