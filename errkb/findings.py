"""The findings of a diagnosis, as plain frozen data: what every surface shows and the JSON holds.

:class:`Diagnosis` holds the exceptions read (:class:`ExceptionInfo`, :class:`FrameInfo`) and
the :class:`Finding` of each record that matched, with the advice worked out for this run
(:class:`Solution`, :class:`Fact`, :class:`ExampleFix`). Nothing here holds frames, tracebacks
or exceptions, only text and numbers, so keeping a diagnosis keeps no GPU tensor alive; and
nothing here renders: :mod:`errkb.render` turns these into text, rich renderables or JSON.
This is the public place of these types (``errkb.diagnosis`` re-exports them).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal, get_args

from errkb._attrs import attrs
from errkb._lazy_regex import lazy_re
from errkb._redact import redact_all

if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping

    from errkb._derive import DerivedFix
    from errkb._sites import Site
    from errkb.match import Match
    from errkb.records import Record

__all__ = [
    "SCHEMA",
    "SOURCES",
    "WRAPPER_TAG",
    "Diagnosis",
    "ExampleFix",
    "ExceptionInfo",
    "Fact",
    "Finding",
    "FrameInfo",
    "Solution",
    "Source",
    "empty_dict",
]

#: The version tag of the JSON form; bumped when a field changes meaning or goes away.
SCHEMA = "errkb.diagnosis/1"
#: Where a number came from: the exception's message, a traceback frame's objects, the live
#: GPU, the model's configuration, a value the user gave, another probe's reading (a plugin's,
#: or a built-in one beyond the GPU), errkb's arithmetic, an assumption, or the installed
#: distributions' metadata (a release, and how it compares with a record's version facts), or a
#: report tool's output pasted beside the error (collect_env, nvidia-smi: another machine's), or
#: the traceback's file paths (whose code a frame is in: the user's, a package's, Python's).
Source = Literal[
    "message",
    "frame",
    "gpu",
    "model-config",
    "flag",
    "probe",
    "computed",
    "default",
    "installed",
    "paste",
    "traceback",
]
SOURCES: tuple[Source, ...] = get_args(Source)


@attrs.frozen(kw_only=True)
class Fact:
    """A number errkb used, with its unit and where it came from.

    ``source`` is one of :data:`SOURCES`: ``message``, ``frame``, ``gpu``, ``model-config``,
    ``flag``, ``probe``, ``computed``, ``default`` (a value assumed, with the reason in
    ``note``), ``installed`` (a distribution's installed release, from its metadata) or
    ``paste`` (a report tool's output pasted beside the error; ``note`` names the tool) or
    ``traceback`` (read from the paths of the traceback's frames: whose code raised it).
    """

    name: str
    value: object
    unit: str | None = None
    source: Source = attrs.field(validator=attrs.validators.in_(SOURCES))
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
    def from_record_text(cls, text: str, *, remarks: bool = True) -> ExampleFix:
        """Split a record's ``exampleFix`` at its ``# before`` / ``# after`` markers, if any.

        The markers go (errkb shows its own); a marker's remark, ``# before (vLLM 0.6)`` or
        ``# after: config.json = {...}``, stays as a comment where the marker was, so that
        "before" is said once. Only the first ``# after`` cuts: a later one
        (``# after (option 2)``) stays in the code as it is. ``remarks=False`` drops the remarks
        too: where this run's values replace the record's, a remark about the record's own
        figures would no longer be true.
        """
        lines = text.strip("\n").split("\n")
        marks = {i: m for i, line in enumerate(lines) if (m := _MARKER.fullmatch(line.strip()))}
        cut = next((i for i, m in marks.items() if m["kind"].lower() == "after"), None)
        if cut is None:
            return cls(before=None, after=text.strip("\n"))

        def kept(first: int, last: int) -> str:
            out = []
            for i in range(first, last):
                m = marks.get(i)
                if m is None or (i != cut and (i > cut or m["kind"].lower() != "before")):
                    out.append(lines[i])  # code, or a marker that only names a second "after"
                elif remarks and (remark := _remark(m)):
                    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
                    out.append(f"{indent}# {remark}")
            return "\n".join(out).strip("\n")

        return cls(before=kept(0, cut), after=kept(cut, len(lines)))


# A record's example's marker line: "# before", "# after:", "# before (remark)", "# after (remark),
# more", "# before: remark".
_MARKER = lazy_re(
    r"#\s*(?P<kind>before|after)\b\s*"
    r"(?:\((?P<paren>[^)]*)\)\s*[:,]?\s*(?P<more>.*)|:\s*(?P<colon>.*)|)",
    re.IGNORECASE,
)


def _remark(marker: re.Match[str]) -> str:
    paren, more, colon = marker["paren"], marker["more"], marker["colon"]
    if paren is not None:
        return f"{paren.strip()}, {more.strip()}" if more and more.strip() else paren.strip()
    return (colon or "").strip()


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
    """One exception read, in the order Python prints them (causes first).

    ``failure`` says which failure it is part of, numbered in the order printed: the
    exceptions of one chain share a failure, and so does a wrapper (an exception that only
    reports another, such as vLLM's "Engine core initialization failed. See root cause
    above.") with the failure printed above it. A live exception's chain is one failure.
    """

    index: int
    class_name: str | None
    message: str
    notes: tuple[str, ...] = ()
    frames: tuple[FrameInfo, ...] = ()
    failure: int = 0

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "index": self.index,
            "failure": self.failure,
            "class": self.class_name,
            "message": self.message,
            "notes": list(self.notes),
            "frames": [f.to_dict() for f in self.frames],
        }


#: The tag of records whose error only reports another one printed before it (a wrapper).
WRAPPER_TAG = "wrapper-error"


@attrs.frozen(kw_only=True)
class Finding:
    """A record that matched one exception, with what the advisors made of it.

    For a mined record, what its message and generated sentence say for themselves
    (:mod:`errkb._derive`, :mod:`errkb._sites`): ``title``, a title in words in place of the
    slug; ``fix``, the fix derived from the message, the skew pin or the check's condition
    (a :class:`~errkb._derive.DerivedFix`); ``check``, what the check was, in one sentence;
    ``site``, where the release in use raises it (a :class:`~errkb._sites.Site`).
    """

    match: Match
    exception: int
    solutions: tuple[Solution, ...]
    facts: tuple[Fact, ...] = ()
    example_fix: ExampleFix | None = None
    title: str | None = None
    fix: DerivedFix | None = None
    check: str | None = None
    site: Site | None = None

    @property
    def record(self) -> Record:
        """The record that matched."""
        return self.match.record

    @property
    def heading(self) -> str:
        """What the finding is called: the record's title, the derived title, or the slug."""
        return self.record.title or self.title or self.record.slug

    @property
    def wrapper(self) -> bool:
        """Whether the record is a wrapper's: its error only reports a root cause elsewhere."""
        return WRAPPER_TAG in self.match.record.tags

    def to_dict(self) -> dict[str, object]:
        """The JSON form (one item of ``matches``)."""
        r = self.record
        return {
            **r.brief(),
            "library": r.library,
            "error_class": r.error_class,
            "score": self.match.score,
            "mined": self.match.mined,
            "also_raised_at": list(self.match.also),
            "captures": {str(k): v for k, v in self.match.captures.items()},
            "exception": self.exception,
            "documentation": r.documentation,
            "common_situations": r.common_situations,
            "upstream": {"file": r.file_path, "line": r.line_number, "url": r.github_url},
            "heading": self.heading,
            "fix": self.fix.to_dict() if self.fix else None,
            "check": self.check,
            "site": self.site.to_dict() if self.site else None,
            "solutions": [s.to_dict() for s in self.solutions],
            "facts": [f.to_dict() for f in self.facts],
            "example_fix": self.example_fix.to_dict() if self.example_fix else None,
        }


@attrs.frozen(kw_only=True)
class Diagnosis:
    """Everything errkb found: the exceptions read, the findings best first per exception.

    Findings come failure by failure, the most recent failure first; within a failure in
    chain order (causes first, as printed), wrappers last; within one exception, best first.
    So :attr:`top` is the root cause of the most recent failure. No record appears twice.
    ``notes`` says what was left out and why.
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
        return _json(self)


def empty_dict() -> dict[str, object]:
    """The JSON object of a text in which nothing matched: the same keys, all empty."""
    return _json(None)


def _json(diagnosis: Diagnosis | None) -> dict[str, object]:
    top = diagnosis.top if diagnosis is not None else None
    return redact_all(
        {
            "schema": SCHEMA,
            "exceptions": [e.to_dict() for e in diagnosis.exceptions] if diagnosis else [],
            "matches": [f.to_dict() for f in diagnosis.findings] if diagnosis else [],
            "fix": top.fix.to_dict() if top and top.fix else None,
            "solutions": [s.to_dict() for s in top.solutions] if top else [],
            "facts": [f.to_dict() for f in top.facts] if top else [],
            "example_fix": top.example_fix.to_dict() if top and top.example_fix else None,
            "notes": list(diagnosis.notes) if diagnosis else [],
        }
    )
