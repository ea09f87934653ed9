"""The neutral layout of a diagnosis, shared by the plain and the rich renderer.

Extraction first, rendering last: this module decides what is shown and in which order, as
plain strings (already cleaned of unsafe characters); the renderers only decide how.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from errkb._sanitize import clean
from errkb.units import format_bytes

if TYPE_CHECKING:
    from errkb.findings import Diagnosis, Fact, Finding

__all__ = ["Block", "Section", "layout"]


@attrs.frozen
class Section:
    """A headed part of a block. ``kind`` is ``text``, ``list``, ``numbered`` or ``code``."""

    heading: str
    kind: str
    items: tuple[str, ...]


@attrs.frozen
class Block:
    """Everything shown for one finding: a title line, a subtitle, then sections."""

    title: str
    severity: str
    subtitle: str
    sections: tuple[Section, ...]


def _fact_line(fact: Fact) -> str:
    value = fact.value
    unit = f" {fact.unit}" if fact.unit else ""
    if fact.unit == "bytes" and isinstance(value, int) and abs(value) >= 1024:
        shown, unit = f"{format_bytes(value)} ({value:,} bytes)", ""
    elif isinstance(value, int) and not isinstance(value, bool):
        shown = f"{value:,}"
    else:
        shown = str(value)
    note = f"; {fact.note}" if fact.note else ""
    return f"{fact.name} = {shown}{unit}  ({fact.source}{note})"


def _solution_line(text: str, settings: dict[str, object], estimate: bool) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in settings.items())
    line = text + (f"  [{shown}]" if shown else "")
    return line + ("  (estimate)" if estimate else "")


def _block(
    diagnosis: Diagnosis, finding: Finding, others: list[Finding], after: list[Finding]
) -> Block:
    record = finding.record
    exc = diagnosis.exceptions[finding.exception]
    where = f"exception {exc.index + 1} of {len(diagnosis.exceptions)}"
    captures = ", ".join(f"{k}={v}" for k, v in finding.match.captures.items() if v is not None)
    subtitle = f"{record.id} | matched {exc.class_name or 'a message'} ({where})"
    if captures:
        subtitle += f" | {captures}"
    sections: list[Section] = []
    if record.documentation:
        sections.append(Section("What happened", "text", (clean(record.documentation),)))
    situations = [s for s in (record.common_situations, record.trigger_scenarios) if s]
    if situations:
        sections.append(Section("Likely situations", "list", tuple(clean(s) for s in situations)))
    if finding.solutions:
        lines = tuple(
            clean(_solution_line(s.text, dict(s.settings), s.estimate)) for s in finding.solutions
        )
        sections.append(Section("Solutions", "numbered", lines))
    if finding.facts:
        sections.append(
            Section("Facts", "list", tuple(clean(_fact_line(f)) for f in finding.facts))
        )
    fix = finding.example_fix
    if fix is not None:
        heading = "Example fix" + (f" ({clean(fix.location)})" if fix.location else "")
        parts = []
        if fix.note:
            parts.append(f"# {fix.note}")
        if fix.before:
            parts.extend(["# before", fix.before, "", "# after"])
        parts.append(fix.after)
        sections.append(Section(heading, "code", (clean("\n".join(parts)),)))
    upstream = []
    if record.file_path:
        line = f":{record.line_number}" if record.line_number else ""
        repo = f"{record.repo} " if record.repo else ""
        upstream.append(f"raised in {repo}{record.file_path}{line}")
    if record.github_url:
        upstream.append(record.github_url)
    if upstream:
        sections.append(Section("Upstream", "list", tuple(clean(u) for u in upstream)))
    if others:
        also = tuple(clean(f"{o.record.id} (score {o.match.score})") for o in others)
        sections.append(Section("Also matched", "list", also))
    later = [f for f in after if not f.wrapper]
    if later:
        lines = tuple(clean(f"{f.record.heading} ({f.record.id})") for f in later)
        sections.append(Section("Which led to", "list", lines))
    wrappers = [f for f in after if f.wrapper]
    if wrappers:
        lines = tuple(clean(f"{w.record.heading} ({w.record.id})") for w in wrappers)
        sections.append(Section("Reported again by", "list", lines))
    return Block(
        title=clean(record.heading),
        severity=clean(record.severity or "error"),
        subtitle=clean(subtitle),
        sections=tuple(sections),
    )


def layout(diagnosis: Diagnosis) -> tuple[list[Block], list[str]]:
    """The blocks to show and the closing notes.

    One block per failure, in the diagnosis' order (the most recent failure first): its root
    cause, the first exception of it that matched. The other exceptions of that failure that
    matched are one line each under it: what the root cause led to ("Which led to"), and
    wrappers, exceptions that only report it ("Reported again by").
    """
    blocks = []
    by_failure: dict[int, list[Finding]] = {}
    for finding in diagnosis.primary():
        by_failure.setdefault(diagnosis.exceptions[finding.exception].failure, []).append(finding)
    for root, *after in by_failure.values():
        others = [f for f in diagnosis.findings if f.exception == root.exception and f is not root]
        blocks.append(_block(diagnosis, root, others, after))
    return blocks, [clean(n) for n in diagnosis.notes]
