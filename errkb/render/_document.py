"""The neutral layout of a diagnosis, shared by the plain, the rich and the HTML renderer.

Extraction first, rendering last: this module decides what is shown and in which order, as
plain strings (already cleaned of unsafe characters); the renderers only decide how. It also
holds the text fitting both terminal renderers use, so that they cut and wrap alike.

The short form (the default) puts the fix first::

    title
    Fix              the best computed solution, with its numbers
    Example fix      the rewritten call (before/after) or the command line
    Why              the record's documentation, its first sentences (at most three lines)
    Facts            the numbers behind the fix, one line per source
    Other solutions  one line each
    Which led to / Reported again by   one line for each later exception of the failure

and names the record in its closing line (``errkb show ID`` prints the rest). A record
solution that names only settings that a computed solution sets says the same thing less
precisely and is left out of the short form (the long form and the JSON keep it). The long
form (``detail="long"``) adds the full documentation, the record's history, likely
situations, the upstream raise site and the other records that matched, and shows every
solution and every fact with its note.
"""

from __future__ import annotations

import re
import textwrap
from typing import TYPE_CHECKING, Literal

from errkb._attrs import attrs
from errkb._sanitize import clean
from errkb.units import format_bytes

if TYPE_CHECKING:
    from collections.abc import Callable

    from errkb._sites import Site
    from errkb.findings import Diagnosis, ExampleFix, Fact, Finding, Solution
    from errkb.records import Record

__all__ = [
    "Block",
    "Detail",
    "Section",
    "fit",
    "fold_code",
    "layout",
    "record_block",
    "unglued",
    "wrap",
    "wrap_code",
]

#: How much a diagnosis shows: the fix and what it rests on, or everything errkb knows.
Detail = Literal["short", "long"]

#: The most lines the record's documentation takes in the short form.
WHY_LINES = 3
#: The most lines the facts of one source take in the short form (the long form has all).
FACT_LINES = 2
#: Joins the words of an item that a line must not break apart (one fact); :func:`wrap` and
#: :func:`fit` turn it back into a space. Cleaned text never holds it raw.
GLUE = "\x1f"


@attrs.frozen
class Section:
    """A headed part of a block.

    ``kind`` is ``text``, ``list`` (``-`` items), ``numbered``, ``hanging`` (items without a
    mark, their wrapped lines indented under them) or ``code``.

    ``lines`` caps the wrapped lines of each item: what goes past is cut at a sentence end
    where one fits, else with an ellipsis (see :func:`fit`). ``None`` shows items whole.
    ``tails`` holds, item by item, an ending that is never cut (a solution's settings).
    ``inline`` puts the heading at the start of the first item's line (``Fix: ...``).
    """

    heading: str
    kind: str
    items: tuple[str, ...]
    lines: int | None = None
    tails: tuple[str, ...] = ()
    inline: bool = False

    def tail(self, index: int) -> str:
        """The uncut ending of item ``index`` (``""`` when it has none)."""
        return self.tails[index] if index < len(self.tails) else ""


@attrs.frozen
class Block:
    """Everything shown for one finding: a title line, sections, a closing line.

    ``footer`` holds the parts of the closing line, the most needed first.
    """

    title: str
    severity: str
    subtitle: str
    sections: tuple[Section, ...]
    footer: tuple[str, ...] = ()

    def closing(self, room: int) -> str:
        """The closing line in ``room`` columns: the footer's parts, the last left out to fit.

        The first part, the command that shows the rest, is always kept.
        """
        parts = list(self.footer)
        while len(parts) > 1 and len(" | ".join(parts)) > room:
            parts.pop()
        return " | ".join(parts)


# -- fitting text to a width ---------------------------------------------------------------


def wrap(text: str, width: int, lead: str = "", indent: str | None = None) -> list[str]:
    """``text`` wrapped at ``width`` columns, each paragraph on its own; never a wider line.

    ``lead`` starts the first line, ``indent`` (``lead``'s width in spaces by default) the
    others. Words longer than a line (URLs, paths) are broken.
    """
    rest = _rest(lead, indent)
    width = _room(width, lead, rest)
    out: list[str] = []
    for paragraph in text.split("\n"):
        out.extend(
            line.replace(GLUE, " ")
            for line in textwrap.wrap(
                paragraph,
                width=width,
                initial_indent=lead,
                subsequent_indent=rest,
                break_on_hyphens=False,
                break_long_words=True,
            )
        )
        if not paragraph.strip():
            out.append(lead.rstrip())
        lead = rest
    return out


def _rest(lead: str, indent: str | None) -> str:
    """What starts the lines after the first: ``indent``, else as many spaces as ``lead``."""
    return " " * len(lead) if indent is None else indent


def _room(width: int, lead: str, rest: str) -> int:
    """The width :func:`wrap` wraps at: room for eight columns after the lead or the indent."""
    return max(width, len(lead) + 8, len(rest) + 8)


# What textwrap counts as whitespace: dropped where a line breaks, the rest of a text is kept.
_DROPPED = str.maketrans("", "", "\t\n\x0b\x0c\r ")


def _shown(text: str) -> int:
    """How many of ``text``'s characters every wrapping of it shows: all but its whitespace."""
    return len(text.translate(_DROPPED))


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(`'\"])")


def fit(
    text: str,
    width: int,
    lines: int,
    lead: str = "",
    indent: str | None = None,
    *,
    tail: str = "",
    ascii_only: bool = False,
) -> list[str]:
    """``text`` and then ``tail`` wrapped as :func:`wrap` does, in at most ``lines`` lines.

    Too long, ``text`` is cut after its last whole sentence that fits; when not even the first
    one does, after the last word that fits, marked with an ellipsis. ``tail`` is never cut.

    >>> fit("One. Two three four five.", 14, 1)
    ['One.']
    >>> fit("Lower the length from 32768 to 12288.", 30, 1, tail="[n=1]", ascii_only=True)
    ['Lower the length from... [n=1]']
    """
    joined = f"{text}  {tail}" if tail else text
    wrapped = wrap(joined, width, lead, indent)
    if len(wrapped) <= lines:
        return wrapped
    ends = [m.start() for m in _SENTENCE_END.finditer(text)]
    shorter = _longest(
        len(ends),
        lambda i: wrap(
            f"{text[: ends[i]]}  {tail}" if tail else text[: ends[i]], width, lead, indent
        ),
        lines,
    )
    if shorter is not None:
        return shorter
    mark = "..." if ascii_only else "\u2026"
    ending = f"{mark} {tail}" if tail else mark
    words = text.split(" ")
    # Tried one by one: the mark sticks to the last word, so a longer text can take fewer lines.
    # A cut whose shown characters alone overflow the lines' columns cannot fit: passed over
    # unwrapped (a solution cut to one line took twenty wraps, now three or four).
    shown = [_shown(word) for word in words]
    columns = lines * _room(width, lead, _rest(lead, indent)) - len(lead) - _shown(ending)
    total = sum(shown)
    while len(words) > 1 and (
        total > columns or len(wrap(" ".join(words) + ending, width, lead, indent)) > lines
    ):
        words.pop()
        total -= shown.pop()
    kept = wrap(" ".join(words) + ending, width, lead, indent)
    if len(kept) > lines:  # one word, or the tail alone, is longer than the room
        kept = kept[:lines]
        kept[-1] = kept[-1][: width - len(mark)] + mark
    return kept


def _longest(count: int, attempt: Callable[[int], list[str]], lines: int) -> list[str] | None:
    """``attempt(i)`` for the largest ``i < count`` whose lines are at most ``lines``, or None.

    ``attempt(i)`` wraps a text that grows with ``i`` by whole words, followed by the same
    words (a tail after two spaces, or none): such a text never wraps into fewer lines, so a
    bisection finds the cut in a few wraps, where trying each cut from the longest took a wrap
    each (a record's text of twenty sentences, twenty).
    """
    found = None
    low, high = 0, count - 1
    while low <= high:
        middle = (low + high) // 2
        wrapped = attempt(middle)
        if len(wrapped) <= lines:
            found, low = wrapped, middle + 1
        else:
            high = middle - 1
    return found


def unglued(text: str) -> str:
    """``text`` with :data:`GLUE` back to spaces, for renderers that do not wrap."""
    return text.replace(GLUE, " ")


def fold_code(code: str, width: int) -> list[str]:
    """``code`` in lines of at most ``width`` columns, folded as a formatter would fold it.

    A Python statement with a line too long, whose value is a call, is shown with one argument
    a line inside the call's parentheses (a trailing comma after the last), indented four more
    columns: still the same code, never broken mid-call. Any other long line (a shell command,
    a statement that holds a comment, or an argument longer than the width by itself) is
    broken by :func:`wrap_code`.
    """
    lines = code.split("\n")
    if all(len(line) <= width for line in lines):
        return lines
    folded = _folded_calls(code, width)
    covered = {n for first, (last, _) in folded.items() for n in range(first, last + 1)}
    out: list[str] = []
    for n, line in enumerate(lines, 1):
        if n in folded:
            out.extend(folded[n][1])
        elif n not in covered:
            out.extend(wrap_code(line, width))
    return out


def _folded_calls(code: str, width: int) -> dict[int, tuple[int, list[str]]]:
    """The statements of ``code`` to show folded: first line -> (last line, the new lines)."""
    import ast
    import io
    import tokenize

    try:
        tree = ast.parse(code)
        comments = {
            tok.start[0]
            for tok in tokenize.generate_tokens(io.StringIO(code).readline)
            if tok.type == tokenize.COMMENT
        }
    except (SyntaxError, ValueError, RecursionError, MemoryError, tokenize.TokenError):
        return {}
    lines = code.split("\n")
    found: dict[int, tuple[int, list[str]]] = {}
    for stmt in ast.walk(tree):
        if not isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return)):
            continue
        call, first, last = stmt.value, stmt.lineno, stmt.end_lineno or stmt.lineno
        # make(...).run(): the call with the arguments is the one to fold.
        while (
            isinstance(call, ast.Call)
            and not (call.args or call.keywords)
            and isinstance(call.func, ast.Attribute)
        ):
            call = call.func.value
        if not isinstance(call, ast.Call) or call.lineno != first:
            continue
        long = any(len(lines[i - 1]) > width for i in range(first, last + 1))
        if not long or any(first <= c <= last for c in comments):
            continue
        args = [ast.get_source_segment(code, a) for a in call.args]
        for k in call.keywords:
            value = ast.get_source_segment(code, k.value)
            args.append(None if value is None else f"{k.arg}={value}" if k.arg else f"**{value}")
        if any(a is None or "\n" in a for a in args):
            continue
        indent, inner = " " * stmt.col_offset, " " * (stmt.col_offset + 4)
        # ast's columns count UTF-8 bytes.
        start, end = lines[first - 1].encode(), lines[last - 1].encode()
        head = start[stmt.col_offset : call.func.end_col_offset].decode()
        tail = end[call.end_col_offset :].decode() if call.end_lineno == last else None
        if tail is None:
            continue
        body = [part for a in args for part in wrap_code(f"{inner}{a},", width)]
        found[first] = (last, [f"{indent}{head}(", *body, f"{indent}){tail}"])
    return found


def wrap_code(line: str, width: int) -> list[str]:
    r"""A line of code in lines of at most ``width`` columns.

    A long line is broken at a space outside string literals and continued with Python's own
    line continuation (`` \``), indented four more columns, so that what is copied still
    runs; with no such space it is broken anywhere, with the same marker.
    """
    if len(line) <= width:
        return [line]
    indent = len(line) - len(line.lstrip(" ")) + 4
    out: list[str] = []
    rest = line
    while len(rest) > width:
        room = width - 2  # the " \" marker
        cut = _code_break(rest, room)
        head, rest = rest[:cut].rstrip(), " " * indent + rest[cut:].lstrip(" ")
        out.append(head + " \\")
        if len(rest.strip()) + indent > width:
            indent = 0  # the continuation indent alone would not leave room: give it up
    out.append(rest)
    return out


def _code_break(text: str, room: int) -> int:
    """Where to break ``text`` to keep ``room`` columns: the last space outside quotes."""
    best = 0
    quote = ""
    for i, ch in enumerate(text[: room + 1]):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == " " and i > 0 and text[:i].strip():
            best = i
    return best or max(room, 1)


# -- what is shown -------------------------------------------------------------------------

_SOURCE_LABELS = {
    "message": "message",
    "frame": "your code",
    "gpu": "GPU",
    "model-config": "model config",
    "flag": "given",
    "probe": "probe",
    "computed": "computed",
    "default": "assumed",
    "installed": "installed",
    "paste": "the paste",
    "traceback": "traceback",
}


def _fact_value(fact: Fact, *, exact: bool) -> str:
    value = fact.value
    unit = f" {fact.unit}" if fact.unit else ""
    if fact.unit == "bytes" and isinstance(value, int) and abs(value) >= 1024:
        shown = format_bytes(value) + (f" ({value:,} bytes)" if exact else "")
        return f"{fact.name} = {shown}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{fact.name} = {value:,}{unit}"
    return f"{fact.name} = {value}{unit}"


def _fact_line(fact: Fact) -> str:
    note = f"; {fact.note}" if fact.note else ""
    return f"{_fact_value(fact, exact=True)}  ({fact.source}{note})"


def _facts_by_source(facts: tuple[Fact, ...]) -> tuple[str, ...]:
    """One line per source, in the order the sources first appear: the compact facts."""
    groups: dict[str, list[str]] = {}
    for fact in facts:
        groups.setdefault(fact.source, []).append(_fact_value(fact, exact=False))
    return tuple(
        clean(f"{_SOURCE_LABELS.get(source, source)}: ")
        + "; ".join(clean(v).replace(" ", GLUE) for v in values)
        for source, values in groups.items()
    )


def _settings(solution: Solution, *, short: bool = False) -> str:
    """A solution's computed values, ``[max_model_len=12288]``, and whether they are estimates.

    The short form leaves the values out when the text already states every one of them.
    """
    shown = ", ".join(f"{k}={v!r}" for k, v in solution.settings.items())
    if short and all(str(v) in solution.text for v in solution.settings.values()):
        shown = ""
    said = f"[{shown}]" if shown else ""
    return f"{said}  (estimate)".strip() if solution.estimate else said


def _solution_line(solution: Solution, *, short: bool = False) -> str:
    tail = _settings(solution, short=short)
    return f"{solution.text}  {tail}" if tail else solution.text


_SETTING = re.compile(r"(?<![\w-])(?:--)?([a-z][a-z0-9]*(?:[_-][a-z0-9]+)+)")


def named_settings(text: str) -> set[str]:
    """The settings ``text`` names: snake_case words and ``--command-line-flags``, as snake_case.

    >>> sorted(named_settings("pass max_model_len (CLI --max-model-len), see nvidia-smi"))
    ['max_model_len']
    """
    names = set()
    for m in _SETTING.finditer(text):
        word = m.group(1)
        if "_" in word or m.group().startswith("--"):
            names.add(word.replace("-", "_"))
    return names


def short_solutions(solutions: tuple[Solution, ...]) -> tuple[Solution, ...]:
    """The solutions of the short form, in the diagnosis' order; duplicates merged.

    The order is the advisors' (a computed solution goes first unless its advisor placed it
    after the record's own). A computed solution (one with ``settings``) absorbs the record's
    solutions that name only settings computed solutions set: "lower max_model_len" says less
    than "lower max_model_len from 32768 to 12288".
    """
    computed = [s for s in solutions if s.settings]
    keys = {k for s in computed for k in s.settings}
    kept = [
        s
        for s in solutions
        if s.settings or not (names := named_settings(s.text)) or not names <= keys
    ]
    return tuple(kept)


def _code(fix: ExampleFix, *, short: bool) -> str:
    before = fix.before.split("\n") if fix.before else []
    after = fix.after.split("\n")
    if short:
        # The lines before and after share at their start (imports) are shown once, after.
        while len(before) > 1 and before[0] == after[0]:
            before = before[1:]
    parts = []
    if not short and fix.note:
        parts.append(f"# {fix.note}")
    if before:
        parts.extend(["# before", *before, *([""] if not short else []), "# after"])
    parts.extend(after)
    return "\n".join(parts)


def _fix_section(fix: ExampleFix | None, *, short: bool) -> list[Section]:
    if fix is None:
        return []
    said = [s for s in (fix.location, fix.note if short else None) if s]
    heading = "Example fix" + (f" ({'; '.join(said)})" if said else "")
    return [Section(clean(heading), "code", (clean(_code(fix, short=short)),))]


def _led_to(after: list[Finding]) -> list[Section]:
    sections = []
    for heading, findings in (
        ("Which led to", [f for f in after if not f.wrapper]),
        ("Reported again by", [f for f in after if f.wrapper]),
    ):
        if findings:
            titles = tuple(clean(f.heading) for f in findings)
            ids = tuple(clean(f"({f.record.id})") for f in findings)
            sections.append(Section(heading, "list", titles, lines=1, tails=ids))
    return sections


#: What the Fix line adds after a derived fix, by where it came from.
_FIX_TAILS = {
    "condition": "(the setting the check reads)",
    "installed": "(the installed release has it)",
}
#: How the release in use was known, as the Where line says it.
_BASES = {
    "installed": "installed",
    "stated": "as the text states",
    "traceback": "by your traceback's file",
}


def _where(site: Site) -> list[Section]:
    """Where the release in use raises it, with the link, and which releases raise it.

    With no release known (or one that does not raise it), the range: the releases and the
    lines they raise it at, not the newest release's site alone.
    """
    releases = site.releases()
    if site.file is None:
        if not site.spread:
            return []
        said = f"raised in {releases} at {'; '.join(site.spread)}"
        sections = [Section("Where", "text", (clean(said),), lines=2, inline=True)]
        if site.release is not None and site.raises is False:
            basis = f" ({_BASES[site.basis]})" if site.basis in _BASES else ""
            said = f"{site.distribution} {site.release}{basis} is not one of them"
            sections.append(Section("Releases", "text", (clean(said),), inline=True))
        return sections
    line = f":{site.line}" if site.line else ""
    if site.basis == "traceback":
        span = f"{site.release} and later" + (f", before {site.until}" if site.until else "")
        said = f"{site.file}{line} in {site.distribution} {span} ({_BASES['traceback']})"
    else:
        said = f"{site.file}{line} in {site.distribution} {site.release}"
        said += f" ({_BASES.get(site.basis or '', site.basis)})" if site.basis else ""
    items = (said, site.url) if site.url else (said,)
    return [
        Section("Where", "text", tuple(clean(i) for i in items), lines=2, inline=True),
        Section("Releases", "text", (clean(releases),), lines=1, inline=True),
    ]


def _stated_release(site: Site) -> Section:
    """A skew record's releases, and whether the release a text states is among them.

    The installed release's standing is a fact of its own (:mod:`errkb.advisors._versions`).
    """
    side = "" if site.raises is None else "is one of them" if site.raises else "is not one of them"
    said = f"{site.releases()}; {site.release} ({_BASES['stated']}) {side}".rstrip()
    return Section("Releases", "text", (clean(said),), lines=2, inline=True)


def _short_sections(finding: Finding) -> list[Section]:
    record = finding.record
    sections: list[Section] = []
    solutions = short_solutions(finding.solutions)
    derived = finding.fix
    if derived is not None:
        # The solution the derived fix was read from (a skew record's pin) is said once.
        solutions = tuple(s for s in solutions if derived.text not in s.text)
        tail = _FIX_TAILS.get(derived.source, "")
        sections.append(Section("Fix", "text", (clean(derived.text),), tails=(tail,), inline=True))
    elif solutions:
        best = clean(_solution_line(solutions[0], short=True))
        sections.append(Section("Fix", "text", (best,), inline=True))
        solutions = solutions[1:]
    sections.extend(_fix_section(finding.example_fix, short=True))
    why = finding.check or record.documentation
    if why:
        sections.append(Section("Why", "text", (clean(why),), lines=WHY_LINES, inline=True))
    if finding.site is not None and record.skew is None:
        sections.extend(_where(finding.site))
    elif finding.site is not None and finding.site.basis == "stated":
        sections.append(_stated_release(finding.site))
    facts = finding.facts
    if finding.site is not None:
        # The Releases line says how the installed release stands against the record's.
        facts = tuple(f for f in facts if not (f.source == "installed" and f.name == "raised by"))
    if facts:
        sections.append(Section("Facts", "hanging", _facts_by_source(facts), lines=FACT_LINES))
    elif captures := [f"{k} = {v}" for k, v in finding.match.captures.items() if v is not None]:
        # No advisor worked on it: what the message said is what the solutions rest on.
        said = clean(f"{_SOURCE_LABELS['message']}: ") + "; ".join(
            clean(c).replace(" ", GLUE) for c in captures
        )
        sections.append(Section("Facts", "hanging", (said,)))
    if solutions:
        texts = tuple(clean(s.text) for s in solutions)
        tails = tuple(clean(_settings(s, short=True)) for s in solutions)
        sections.append(Section("Other solutions", "list", texts, lines=1, tails=tails))
    return sections


def _long_sections(finding: Finding, others: list[Finding]) -> list[Section]:
    record = finding.record
    sections: list[Section] = []
    if finding.fix is not None:
        tail = _FIX_TAILS.get(finding.fix.source, "")
        sections.append(
            Section("Fix", "text", (clean(finding.fix.text),), tails=(tail,), inline=True)
        )
    if finding.solutions:
        lines = tuple(clean(_solution_line(s)) for s in finding.solutions)
        sections.append(Section("Solutions", "numbered", lines))
    sections.extend(_fix_section(finding.example_fix, short=False))
    what = finding.check or record.documentation
    if what:
        sections.append(Section("What happened", "text", (clean(what),)))
    if finding.facts:
        sections.append(
            Section("Facts", "list", tuple(clean(_fact_line(f)) for f in finding.facts))
        )
    situations = [s for s in (record.common_situations, record.trigger_scenarios) if s]
    if situations:
        sections.append(Section("Likely situations", "list", tuple(clean(s) for s in situations)))
    history = getattr(record, "history", None)
    if history:
        sections.append(Section("History", "text", (clean(history),)))
    upstream = []
    if finding.site is not None and record.skew is None:
        upstream.extend(_site_lines(finding.site))
    elif record.file_path:
        line = f":{record.line_number}" if record.line_number else ""
        repo = f"{record.repo} " if record.repo else ""
        upstream.append(f"raised in {repo}{record.file_path}{line}")
    if record.github_url and (finding.site is None or record.skew is not None):
        upstream.append(record.github_url)
    elif record.github_url and finding.site is not None and finding.site.file is None:
        # No release in use to link: the record's own link, said at which release it is (a
        # mined record's is where its line was read, not always the newest that raises it).
        from errkb._sites import link_release  # made the site: imported already

        at = link_release(record)
        upstream.append(f"in {at}: {record.github_url}" if at else record.github_url)
    upstream.extend(f"also raised at {place}" for place in finding.match.also)
    if upstream:
        sections.append(Section("Upstream", "list", tuple(clean(u) for u in upstream)))
    if others:
        also = tuple(clean(f"{o.record.id} (score {o.match.score})") for o in others)
        sections.append(Section("Also matched", "list", also))
    return sections


def _site_lines(site: Site) -> list[str]:
    """The long form's upstream lines for a site: the release in use's, and the range."""
    lines = [f"{s.heading}: {' '.join(s.items)}" for s in _where(site) if s.heading != "Releases"]
    if site.file is not None:
        lines.append(f"raised in {site.releases()}")
    elif site.release is not None and site.raises is False:
        lines.append(f"not raised by {site.distribution} {site.release} ({site.basis})")
    return [line.removeprefix("Where: ") for line in lines]


def _block(
    diagnosis: Diagnosis,
    finding: Finding,
    others: list[Finding],
    after: list[Finding],
    detail: Detail,
) -> Block:
    record = finding.record
    exc = diagnosis.exceptions[finding.exception]
    what = exc.class_name or "a message"
    evidence: list[Section] = []
    if finding.match.by_site and exc.frames:
        # Weaker evidence than a message: say that only where it was raised matched.
        raised = exc.frames[-1]
        said = f"where {what} was raised ({raised.function} in {raised.file}), not its message"
        evidence.append(Section("Matched", "text", (clean(said),), inline=True))
        what = f"where {what} was raised"
    matched = f"matched {what} (exception {exc.index + 1} of {len(diagnosis.exceptions)})"
    if detail == "long":
        captures = ", ".join(f"{k}={v}" for k, v in finding.match.captures.items() if v is not None)
        subtitle = f"{record.id} | {matched}" + (f" | {captures}" if captures else "")
        sections = _long_sections(finding, others)
        footer: tuple[str, ...] = ()
    else:
        subtitle = ""
        sections = _short_sections(finding)
        footer = (f"more: errkb show {record.id}", matched)
    return Block(
        title=clean(finding.heading),
        severity=clean(record.severity or "error"),
        subtitle=clean(subtitle),
        sections=(*evidence, *sections, *_led_to(after)),
        footer=tuple(clean(f) for f in footer),
    )


def layout(diagnosis: Diagnosis, detail: Detail = "short") -> tuple[list[Block], list[str]]:
    """The blocks to show and the closing notes.

    One block per failure, in the diagnosis' order (the most recent failure first): its root
    cause, the first exception of it that matched. The other exceptions of that failure that
    matched are one line each under it: what the root cause led to ("Which led to"), and
    wrappers, exceptions that only report it ("Reported again by"). ``detail`` chooses the
    short form or the long one (see the module's documentation).
    """
    blocks = []
    by_failure: dict[int, list[Finding]] = {}
    for finding in diagnosis.primary():
        by_failure.setdefault(diagnosis.exceptions[finding.exception].failure, []).append(finding)
    for root, *after in by_failure.values():
        others = [f for f in diagnosis.findings if f.exception == root.exception and f is not root]
        blocks.append(_block(diagnosis, root, others, after, detail))
    return blocks, [clean(n) for n in diagnosis.notes]


def record_block(record: Record) -> Block:
    """The long form of a record on its own (``errkb show``): no message, so no numbers.

    What it matches comes first; solutions show the captures they use as placeholders,
    ``<name>``, as a diagnosis does when a message lacks them.
    """
    from errkb import _derive, _sites
    from errkb._patterns import fill_template
    from errkb.findings import ExampleFix, Finding, Solution
    from errkb.match import MINED_TAG, Match

    finding = Finding(
        match=Match(record=record, captures={}, score=1.0),
        exception=0,
        solutions=tuple(Solution(text=fill_template(s, {})) for s in record.solutions),
        example_fix=ExampleFix.from_record_text(record.example_fix) if record.example_fix else None,
    )
    if MINED_TAG in record.tags:
        seen = _derive.message_of(record)
        finding = attrs.evolve(
            finding,
            title=_derive.title(record, seen),
            fix=_derive.fix(record, seen),
            check=_derive.check(record),
            site=_sites.site_for(record),
        )
    said = [
        f"{label}: {value}"
        for label, value in (
            ("class", record.error_class),
            ("message", record.error_message),
            ("pattern", record.message_pattern),
            ("tags", ", ".join(record.tags)),
        )
        if value
    ]
    matches = [Section("Matches", "list", tuple(clean(s) for s in said))] if said else []
    return Block(
        title=clean(finding.heading),
        severity=clean(record.severity or "error"),
        subtitle=clean(record.id),
        sections=(*matches, *_long_sections(finding, [])),
    )
