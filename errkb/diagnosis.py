"""The orchestrator: the one place that wires matching, evidence and advisors together.

:func:`diagnose` reads a live exception and its chain, :func:`explain` pasted text; both match
every exception against the records, let the advisors work out the advice for this run, and
return a :class:`~errkb.findings.Diagnosis` (plain frozen data, see :mod:`errkb.findings`).
The data types are re-exported here, where earlier releases defined them.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from errkb._attrs import attrs
from errkb._patterns import fill_template, template_names
from errkb._traceback import (
    MAX_EXCEPTIONS,
    class_name,
    frame_sites,
    is_library_file,
    safe_text,
    walk_chain,
)
from errkb.findings import (
    SCHEMA,
    WRAPPER_TAG,
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
    from collections.abc import Iterable, Sequence

    from errkb.evidence import Evidence
    from errkb.match import Match
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
    "explain_lines",
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
        return _assemble(
            infos, [type(e) for e in chain], evidence, options, registry, notes, stated=None
        )
    finally:
        evidence.close()


def explain(
    text: str, *, options: Options | None = None, registry: Registry | None = None
) -> Diagnosis | None:
    """Diagnose pasted text: a message, ``Class: message``, tracebacks, or a whole log.

    >>> explain("ValueError: No available memory for the cache blocks. Try increasing "
    ...         "`gpu_memory_utilization` when initializing the engine.").top.record.slug
    'no-cache-blocks'
    """
    return explain_lines(text.splitlines(keepends=True), options=options, registry=registry)


def explain_lines(
    lines: Iterable[str],
    *,
    options: Options | None = None,
    registry: Registry | None = None,
    notes: list[str] | None = None,
) -> Diagnosis | None:
    """Diagnose a text given as lines (an open file, ``sys.stdin``), read whole in bounded memory.

    A log is read to its end in windows (:mod:`errkb._reading`), every exception in it is
    found, and the :data:`MAX_EXCEPTIONS` most recent are kept. What had to be cut or left out
    is added to ``notes`` when given (so a caller can say it even when nothing matched), and
    to the diagnosis' notes.
    """
    options = options or Options()
    from errkb._reading import Windows
    from errkb.evidence import Evidence
    from errkb.parse import parse_text

    reading = Windows(lines)
    stated = _Stated()
    windows = map(stated.read, reading)
    first = next(windows, None)
    second = next(windows, None)
    if first is None:
        parsed = []
    elif second is None:  # one window: the whole text, as pasted
        parsed = parse_text(first)
    else:
        parsed = _every_exception((first, second, *windows), parse_text)
    cut = list(reading.notes)
    if len(parsed) > MAX_EXCEPTIONS:
        cut.append(
            f"{len(parsed) - MAX_EXCEPTIONS} earlier exceptions were left out: the "
            f"{MAX_EXCEPTIONS} most recent are read"
        )
        parsed = parsed[-MAX_EXCEPTIONS:]
    infos = []
    for i, p in enumerate(parsed):
        message = p.message
        if len(message) > MAX_MESSAGE:
            message = message[:MAX_MESSAGE]
            cut.append(f"the message of exception {i} was cut at {MAX_MESSAGE} characters")
        frames = tuple(
            FrameInfo(
                file=f.file, line=f.line, function=f.function or "", library=is_library_file(f.file)
            )
            for f in p.frames
        )
        infos.append(
            ExceptionInfo(
                index=i,
                class_name=p.class_name,
                message=message,
                frames=frames,
                failure=_failure(parsed, i),
            )
        )
    if notes is not None:
        notes.extend(cut)
    evidence = Evidence(options=options, exceptions=(), text=first if second is None else None)
    try:
        classes = [i.class_name for i in infos]
        before = list(cut)
        found = _assemble(
            infos, classes, evidence, options, registry, cut, stated=stated.releases()
        )
        if found is None and first is not None and second is None:
            found = _best_line(first, evidence, options, registry, before, stated.releases())
        return found
    finally:
        evidence.close()


def _best_line(
    text: str,
    evidence: Evidence,
    options: Options,
    registry: Registry | None,
    notes: list[str],
    stated: Mapping[str, str],
) -> Diagnosis | None:
    """The diagnosis of a paste's best line read alone, for a paste whose exceptions matched none.

    A paste is never recognised worse than its best single line: a traceback cut before its
    exception line, a log record above it (ChatTTS's ``model load failed``), a warning. Each
    line is read alone (:func:`errkb.parse.parse_lines`); the best is the one whose top match
    ranks first (hand-written before mined before a fallback before an interpreter record, then
    by score), the later line on a tie.
    """
    from errkb.parse import parse_lines

    matcher = _registry(options, registry).matcher
    best: tuple[tuple[bool, bool, bool, float, int], Any] | None = None
    for index, p in enumerate(parse_lines(text)):
        matches = matcher.match(p.message, p.class_name)
        if matches:
            top = matches[0]
            key = (top.interpreter, top.fallback, top.mined, -top.score, -index)
            if best is None or key < best[0]:
                best = (key, p)
    if best is None:
        return None
    line = best[1]
    info = ExceptionInfo(index=0, class_name=line.class_name, message=line.message)
    notes.append(
        "no exception read from the text matched a record: the best of its lines read alone did"
    )
    return _assemble([info], [line.class_name], evidence, options, registry, notes, stated=stated)


class _Stated:
    """The releases a text states it ran (:func:`errkb.parse.stated_releases`), window by window.

    A distribution stated at two different releases, in one window or across them, is left
    out, as within one text.
    """

    def __init__(self) -> None:
        self._seen: dict[str, str | None] = {}

    def read(self, window: str) -> str:
        from errkb.parse import stated_releases
        from errkb.records import release_key

        for dist, release in stated_releases(window).items():
            before = self._seen.setdefault(dist, release)
            if before is not None and release_key(before) != release_key(release):
                self._seen[dist] = None
        return window

    def releases(self) -> dict[str, str]:
        return {d: r for d, r in self._seen.items() if r is not None}


def _every_exception(windows: Iterable[str], parse: Any) -> list[Any]:
    """The exceptions of overlapping windows, each once, in the order printed.

    Windows overlap, so an exception near a window's end is found twice: the same class,
    message and frames are kept once (a failure printed twice in a log counts once too).
    """
    found: dict[tuple[object, ...], Any] = {}
    for window in windows:
        for p in parse(window):
            key = (p.class_name, p.message, p.frames)
            found.pop(key, None)  # a repeat moves to where it was last printed
            found[key] = p
            if len(found) > 4 * MAX_EXCEPTIONS:
                del found[next(iter(found))]
    return list(found.values())


def _failure(parsed: Sequence[Any], index: int) -> int:
    """The failure exception ``index`` of a text is part of (see ExceptionInfo.failure).

    An exception printed after "The above exception was the direct cause..." or "During
    handling of the above exception..." continues the failure before it; any other starts
    one. Wrappers are joined to the failure above them later, once matched.
    """
    failure = 0
    for i in range(1, index + 1):
        if not parsed[i].chained:
            failure += 1
    return failure


def _assemble(
    infos: list[ExceptionInfo],
    classes: list[Any],
    evidence: Evidence,
    options: Options,
    registry: Registry | None,
    notes: list[str],
    *,
    stated: Mapping[str, str] | None,
) -> Diagnosis | None:
    """Match every exception, run the advisors, and put the diagnosis together.

    ``stated`` holds the releases a pasted text states it ran (``None`` for a live exception,
    whose installed release is the one that ran).
    """
    from errkb.advisors import run_advisors
    from errkb.match import Skipped, ranked

    deadline = time.monotonic() + options.timeout
    matcher = _registry(options, registry).matcher
    skipped = Skipped()
    found: list[list[Match]] = []
    for info, cls in zip(infos, classes, strict=True):
        files = [f.file for f in info.frames]
        # The innermost frame is where the exception was raised: records may name that site.
        raised_at = (info.frames[-1].file, info.frames[-1].function) if info.frames else None
        matches = matcher.match(
            info.message, cls, files=files, raised_at=raised_at, skipped=skipped
        )
        for note in info.notes:
            matches.extend(matcher.match(note, None, files=files, skipped=skipped))
        found.append(ranked(matches))
    infos = _join_wrappers(infos, found)
    findings: list[Finding] = []
    seen: set[str] = set()
    for info in _most_recent_first(infos, found):
        for m in found[info.index]:
            if m.record.id in seen:
                continue
            seen.add(m.record.id)
            base = _solutions(m.record.solutions, m.captures)
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
    findings = [_first_screen(f, infos[f.exception], evidence, stated) for f in findings]
    from errkb import _plugins

    notes.extend(n for n in (*evidence.notes, *_plugins.problems()) if n not in notes)
    return Diagnosis(exceptions=tuple(infos), findings=tuple(findings), notes=tuple(notes))


def _solutions(texts: Sequence[str], captures: Mapping[str | int, object]) -> tuple[Solution, ...]:
    """A record's solutions with the captures put in; those the message fills whole first.

    A message cut before a figure a solution names (an issue title, ``CUDA out of memory``
    alone) leaves a placeholder, ``<free>``, in it: such a solution goes after the ones the
    message fills, in the record's order otherwise, so that the Fix line states no figure it
    does not have when another solution needs none.
    """
    filled = [
        (not template_names(text)[0] <= {k for k, v in captures.items() if v is not None}, n)
        for n, text in enumerate(texts)
    ]
    return tuple(Solution(text=fill_template(texts[n], captures)) for _, n in sorted(filled))


def _first_screen(
    finding: Finding, info: ExceptionInfo, evidence: Evidence, stated: Mapping[str, str] | None
) -> Finding:
    """A mined finding with what its record says for itself: title, fix, check and site.

    A fix an advisor already set (the installed release has the name: find the other copy) is
    kept; else the fix is derived from the message, the skew pin or the check's condition.

    The release in use is, under the hook, the installed one; for a pasted text, the one it
    states, else the one its traceback's paths point at, else (probes on) the installed one.
    """
    if not finding.match.mined:
        return finding
    from errkb import _derive, _sites

    record = finding.record
    seen = _derive.message_of(record, info.message, *info.notes)
    site = None
    if record.versions is not None:
        dist = record.versions.distribution
        reading = evidence.probe("installed")
        installed = reading.get(dist) if isinstance(reading, Mapping) else None
        ours = [(str(installed) if installed else None, "installed")]
        theirs = [((stated or {}).get(dist), "stated")]
        frames = [(f.file, f.line) for f in reversed(info.frames)]
        if stated is None:
            site = _sites.site_for(record, frames, known=ours)
        else:
            site = _sites.site_for(record, frames, known=theirs, fallback=ours)
    return attrs.evolve(
        finding,
        title=_derive.title(record, seen),
        fix=finding.fix or _derive.fix(record, seen),
        check=_derive.check(record, site.file if site is not None else None),
        site=site,
    )


def _is_wrapper(matches: list[Match]) -> bool:
    return bool(matches) and WRAPPER_TAG in matches[0].record.tags


def _join_wrappers(infos: list[ExceptionInfo], found: list[list[Match]]) -> list[ExceptionInfo]:
    """A wrapper (its best match is a wrapper's record) joins the failure printed above it."""
    out: list[ExceptionInfo] = []
    for info in infos:
        joins = out and _is_wrapper(found[info.index]) and info.failure != out[-1].failure
        out.append(attrs.evolve(info, failure=out[-1].failure) if joins else info)
    return out


def _most_recent_first(infos: list[ExceptionInfo], found: list[list[Match]]) -> list[ExceptionInfo]:
    """The exceptions failure by failure, the most recent first.

    Within a failure they come in print order, wrappers last, so the root cause of the most
    recent failure comes first; except that an exception only an interpreter record explains
    (``records/python/``: ``name 'x' is not defined`` inside transformers' "Failed to import
    transformers.pipelines because of the following error") comes after those a library's record
    explains, as it ranks below them among the matches of one message.
    """

    def key(i: ExceptionInfo) -> tuple[int, bool, bool, int]:
        matches = found[i.index]
        generic = bool(matches) and matches[0].interpreter
        return (-i.failure, generic, _is_wrapper(matches), i.index)

    return sorted(infos, key=key)
