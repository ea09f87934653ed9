"""What a mined record says for itself: a title in words, a fix, and the check that raised it.

A mined record has no title, no solution and no prose beyond one generated sentence (``Raised
by F when <condition>.``, see ``docs/mining.md``); what a person needs first is in its message
and in that sentence. Each function here reads them, with the values the message held:

- :func:`title`: the first clause of the message, each hole shown as the value it held (or
  ``…``); for an error of version skew, the change in words.
- :func:`fix`: what to do, in this order: the message's own instruction rewritten as a command
  or a setting (``install bitsandbytes >= 0.43.2`` -> ``pip install 'bitsandbytes>=0.43.2'``),
  then a skew record's pin or upgrade, then the guard condition restated as the setting it
  reads (``self.model_config.max_model_len > max_seq_len`` -> lower ``max_model_len``);
  ``None`` when none of them applies.
- :func:`check`: the generated sentence (its condition is the one under which the message is
  raised, native checks too), with the file of the release in use for a module-level site.

An instruction is taken from the message's literal text only: a hole's value (text the program
put there, such as another error) is never read as advice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import regex

from errkb._attrs import attrs
from errkb._patterns import PatternTimeoutError, compile_pattern, search

if TYPE_CHECKING:
    from collections.abc import Callable

    from errkb.records import Record

__all__ = ["DerivedFix", "Message", "check", "fix", "message_of", "title"]

#: The most characters a title has; a longer first clause is cut at a word, with ``…``.
TITLE_CHARS = 80
#: A hole's value longer than this is shown as ``…`` in a title.
HOLE_CHARS = 40
ELLIPSIS = "\u2026"


@attrs.frozen(kw_only=True)
class Message:
    """A record's message as this match saw it: literal parts and the holes' values.

    ``parts`` alternates as the template does: a ``str`` is literal text, a one-item tuple a
    hole with its value (``None`` when the message did not show it).
    """

    parts: tuple[str | tuple[str | None], ...]

    def text(self, *, hole_chars: int | None = None) -> tuple[str, tuple[bool, ...]]:
        """The message with each hole's value, and for each character whether it is literal.

        A hole without a value, or one longer than ``hole_chars``, is ``…``.
        """
        out: list[str] = []
        literal: list[bool] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                literal.extend([True] * len(part))
                continue
            value = part[0]
            if value is None or "\n" in value or (hole_chars and len(value) > hole_chars):
                value = ELLIPSIS
            out.append(value)
            literal.extend([False] * len(value))
        return "".join(out), tuple(literal)


_HOLE = regex.compile(r"\{[^{}\n]*\}")


def message_of(record: Record, *messages: str) -> Message:
    """The record's message as seen in the first of ``messages`` it matches.

    Its holes hold the text of the pattern's groups, else (no match) nothing.

    The pattern is searched again (bounded) so that the holes hold the text as printed
    (``1.10`` stays ``1.10``, where a capture is typed as a number). Without a message, or when
    the pattern does not match one whole (a message cut short), the template's ``{expr}``
    holes have no value.
    """
    hit = None
    for message in messages:
        try:
            hit = search(compile_pattern(record.message_pattern), message)
        except (PatternTimeoutError, regex.error, RecursionError):
            hit = None
        if hit is not None:
            break
    if hit is None:
        parts: list[str | tuple[str | None]] = []
        at = 0
        for m in _HOLE.finditer(record.error_message):
            parts.extend((record.error_message[at : m.start()], (None,)))
            at = m.end()
        parts.append(record.error_message[at:])
        return Message(parts=tuple(p for p in parts if p != ""))
    spans = sorted(
        (hit.span(i), i) for i in range(1, (hit.re.groups or 0) + 1) if hit.span(i)[0] >= 0
    )
    text, start = hit.group(0), hit.start()
    parts = []
    at = 0
    for (first, end), _ in spans:
        lo, hi = first - start, end - start
        if lo < at:  # a group inside another: the outer one is the hole
            continue
        parts.extend((text[at:lo], (text[lo:hi],)))
        at = hi
    parts.append(text[at:])
    return Message(parts=tuple(p for p in parts if p != ""))


# -- title ------------------------------------------------------------------------------------

_CLAUSE_END = regex.compile(r"(?<=[.!?;])\s+|\n")
_SKEW_VERBS = {
    "removed": "was removed from {dist} in {when}",
    "renamed": "was renamed in {dist} {when}",
    "moved": "was moved in {dist} {when}",
    "added": "is new in {dist} {when} (older releases lack it)",
    "required": "is required from {dist} {when} on",
}


def title(record: Record, seen: Message) -> str:
    r"""A short title in words: the message's first clause, or a skew record's change.

    >>> from errkb.testing import record_dict
    >>> from errkb.records import record_from_dict
    >>> r, _ = record_from_dict(record_dict(errorMessage="Bad size {n}. Use less.",
    ...                                     messagePattern=r"Bad size (?P<n>\d+)\. Use less\."))
    >>> title(r, message_of(r, "Bad size 12. Use less."))
    'Bad size 12'
    """
    skew = record.skew
    if skew is not None and skew.changed_in:
        name = skew.name.rpartition(".")[2] if "(" not in skew.name else skew.name
        said = _SKEW_VERBS.get(skew.change, "changed in {dist} {when}")
        when = skew.changed_in
        if skew.exact is False and skew.last_before:  # the releases between were not read
            said, when = (
                said.replace("in {when}", "{when}"),
                (f"between {skew.last_before} and {skew.changed_in}"),
            )
        text = f"`{name}` " + said.format(dist=skew.distribution, when=when)
        if skew.replacement and skew.change in ("renamed", "moved"):
            text += f" (now `{skew.replacement}`)"
        return text
    text, _ = seen.text(hole_chars=HOLE_CHARS)
    text = " ".join(_CLAUSE_END.split(text.strip(), maxsplit=1)[0].split())
    text = text.rstrip(".:;, ")
    if len(text) > TITLE_CHARS:
        cut = text[: TITLE_CHARS - 1].rpartition(" ")[0] or text[: TITLE_CHARS - 1]
        text = cut.rstrip(",;:") + ELLIPSIS
    return text or record.heading


# -- fix ----------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class DerivedFix:
    """A fix derived from the record: its words, and a command or settings when it has them.

    ``source`` says where it came from: ``message`` (the message's own instruction), ``skew``
    (the pin or upgrade of an error of version skew) or ``condition`` (the check's setting).
    """

    text: str
    source: str
    command: str | None = None
    settings: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "text": self.text,
            "source": self.source,
            "command": self.command,
            "settings": dict(self.settings),
        }


_SPEC = r"(?:>=|==|~=|<=|!=|>|<)"
_VERSION = r"v?(?P<ver>\d+(?:\.\d+)*(?:[a-z]+\d*)?(?:\.post\d+|\.dev\d+)?)"
_NAME = r"`?(?P<name>[A-Za-z][\w\-\[\]]{0,60}(?:\.[A-Za-z]\w{0,40}){0,4})`?"
_PIP = regex.compile(
    r"\bpip3?\s+install\s+(?P<args>[^`\n()]+?)"
    r"(?=\s*(?:`|\)|\n|$|[.,;:](?:\s|$|`)|\s+(?:or|and|to|for|which|if|then|first)\b))",
    regex.IGNORECASE,
)
_INSTALL_AT_LEAST = regex.compile(
    rf"\binstall(?:ing)?\s+(?:the\s+)?{_NAME}(?:\s+package)?\s*(?P<op>{_SPEC})\s*`?{_VERSION}",
    regex.IGNORECASE,
)
_REQUIRED = regex.compile(
    rf"{_NAME}\s*(?P<op>>=|==)\s*{_VERSION}`?\s+(?:is|are)\s+required", regex.IGNORECASE
)
_UPGRADE = regex.compile(
    rf"\bupgrade\s+(?:your\s+|the\s+)?{_NAME}(?:\s+(?:package|version|library|installation))?"
    rf"(?:\s+to\s+(?:at\s+least\s+|version\s+|>=\s*)?`?{_VERSION})?",
    regex.IGNORECASE,
)
_PLEASE_INSTALL = regex.compile(
    rf"\bplease\s+install\s+{_NAME}(?:(?:\s+\S+){{0,6}}?\s+(?:at|from|here:?)\s+(?P<url>https?://[^\s`'\")]+))?",
    regex.IGNORECASE,
)
_VALUE = r"(?P<value>`[^`\n]+`|'[^'\n]*'|\"[^\"\n]*\"|True|False|None|true|false|-?\d+(?:[._]\d+)*(?:e-?\d+)?)"
_SET_TO = regex.compile(
    rf"\bset\s+`(?P<name>[^`\s]+)`\s+to\s+{_VALUE}(?!\w|\.\d)", regex.IGNORECASE
)
_SET_EQ = regex.compile(
    r"\bset\s+`?(?P<name>--?[\w\-.]+|[A-Za-z_][\w.]*)\s*=\s*(?P<value>[^`\s,;)]+?)`?(?=[\s,;)`]|\.(?:\s|$)|$)",
    regex.IGNORECASE,
)
_PASS = regex.compile(
    r"\bpass\s+(?:the\s+(?:argument|flag|option|keyword(?:\s+argument)?)\s+)?"
    r"(?:`(?P<code>[^`\n]+)`|(?P<name>[A-Za-z_]\w*)\s*=\s*(?P<value>[^\s,;)`]+?)(?=[\s,;)]|\.(?:\s|$)|$)"
    r"|(?P<flag>--[\w\-]+))",
    regex.IGNORECASE,
)
_USE_INSTEAD = regex.compile(
    r"\buse\s+(?P<what>`[^`\n]+`|[A-Za-z_][\w.\-]*(?:\(\))?)\s+instead\b", regex.IGNORECASE
)
_USE = regex.compile(r"\buse\s+(?P<what>`[^`\n]+`)(?=\s*(?:[.,;]|$|\s+or\b))", regex.IGNORECASE)
#: Words before an instruction that make it one (an imperative, not a noun: "a pass that...").
_LEADS = ("please", "or", "and", "can", "must", "should", "to", "try", "either", "then", "kindly")
_NOT_NAMES = frozenset({"it", "the", "them", "this", "that", "to", "your", "a", "an", "one"})
#: Names a message uses for a distribution whose PyPI name differs.
_DIST_NAMES = {"pytorch": "torch"}


def _imperative(text: str, start: int) -> bool:
    before = text[:start].rstrip().lower()
    return not before or before[-1] in ".!?;:(,`\n'\"" or before.endswith(_LEADS)


def _dist(name: str) -> str:
    return _DIST_NAMES.get(name.lower(), name)


def _quoted(arg: str) -> str:
    """A pip argument quoted for the shell when it holds a version specifier or extras."""
    if arg[:1] in "'\"" or not any(c in arg for c in "<>=![]~*"):
        return arg
    return f"'{arg}'"


def _setting(name: str, value: str) -> tuple[str, str]:
    return name.strip("`"), value.strip("`")


#: What a word of a command errkb writes may hold: names, versions, specifiers, URLs. A word
#: with anything else (``;``, ``$``, quotes, a pipe) came from text errkb does not trust and
#: would run more than it says; such a command is not offered.
_SAFE_WORD = regex.compile(r"[\w.\-\[\],=<>!~*+:/@%]+")


def _from_pip(m: regex.Match[str], _text: str) -> DerivedFix | None:
    args = [a.strip("`").rstrip(".,;:") for a in m["args"].split()]
    args = [a for a in args if a]
    if not args or ELLIPSIS in m["args"] or not all(_SAFE_WORD.fullmatch(a) for a in args):
        return None
    command = "pip install " + " ".join(_quoted(a) for a in args)
    return DerivedFix(text=command, source="message", command=command)


def _from_install(m: regex.Match[str], _text: str) -> DerivedFix | None:
    if m["name"].lower() in _NOT_NAMES or not _SAFE_WORD.fullmatch(m["name"]):
        return None
    command = f"pip install '{_dist(m['name'])}{m['op']}{m['ver']}'"
    return DerivedFix(text=command, source="message", command=command)


def _from_upgrade(m: regex.Match[str], text: str) -> DerivedFix | None:
    name = m["name"]
    if name.lower() in _NOT_NAMES:
        return None
    dist = _dist(name)
    version = m["ver"]
    if version is None:  # "torch>=1.12.0 is required ... Please upgrade torch."
        wanted = regex.search(
            rf"(?<![\w\-]){regex.escape(name)}`?\s*>=\s*v?(\d+(?:\.\d+)*)", text, regex.IGNORECASE
        )
        version = wanted.group(1) if wanted is not None else None
    command = f"pip install '{dist}>={version}'" if version else f"pip install --upgrade {dist}"
    return DerivedFix(text=command, source="message", command=command)


def _from_please_install(m: regex.Match[str], _text: str) -> DerivedFix | None:
    if m["name"].lower() in _NOT_NAMES:
        return None
    see = f" (see {m['url'].rstrip('.,')})" if m["url"] else ""
    return DerivedFix(text=f"install `{m['name']}`{see}", source="message")


def _from_set(m: regex.Match[str], _text: str) -> DerivedFix | None:
    name, value = _setting(m["name"], m["value"])
    if ELLIPSIS in name + value:
        return None
    if name.startswith("-"):
        return DerivedFix(
            text=f"pass `{name}={value}`", source="message", settings=((name, value),)
        )
    if regex.fullmatch(r"[A-Z][A-Z0-9_]{2,}", name) and _SAFE_WORD.fullmatch(value):
        command = f"export {name}={value}"  # an environment variable
        return DerivedFix(text=command, source="message", command=command)
    return DerivedFix(text=f"set `{name}={value}`", source="message", settings=((name, value),))


def _from_pass(m: regex.Match[str], _text: str) -> DerivedFix | None:
    if m["flag"]:
        return DerivedFix(text=f"pass `{m['flag']}`", source="message")
    code = m["code"] if m["code"] is not None else f"{m['name']}={m['value']}"
    if ELLIPSIS in code or " " in code.strip():
        return None
    name, eq, value = code.partition("=")
    settings = (_setting(name, value),) if eq and regex.fullmatch(r"[\w.\-]+", name) else ()
    return DerivedFix(text=f"pass `{code}`", source="message", settings=settings)


def _from_use(m: regex.Match[str], text: str) -> DerivedFix | None:
    what = m["what"].strip("`")
    if ELLIPSIS in what or what.lower() in _NOT_NAMES:
        return None
    if text[: m.start()].rstrip().lower().endswith("back to"):  # "falling back to use X"
        return None
    if what.startswith("--"):  # a command-line flag is passed, not used
        return DerivedFix(text=f"pass `{what}`", source="message")
    instead = " instead" if m.re is _USE_INSTEAD else ""
    return DerivedFix(text=f"use `{what}`{instead}", source="message")


#: The message's instructions, most direct first: a command, then a setting, then a swap.
_RULES: tuple[tuple[regex.Pattern[str], Callable[..., DerivedFix | None], bool], ...] = (
    (_PIP, _from_pip, False),
    (_INSTALL_AT_LEAST, _from_install, False),
    (_UPGRADE, _from_upgrade, True),
    (_REQUIRED, _from_install, False),
    (_SET_TO, _from_set, True),
    (_SET_EQ, _from_set, True),
    (_PASS, _from_pass, True),
    (_USE_INSTEAD, _from_use, True),
    (_USE, _from_use, True),
    (_PLEASE_INSTALL, _from_please_install, False),
)


def _whole_holes_safe(text: str, literal: tuple[bool, ...], start: int, end: int) -> bool:
    """Whether every hole the instruction ``text[start:end]`` reads is safe whole.

    An instruction cut inside a hole (``pip install {pkg}`` holding ``acme; curl ... | sh``)
    would offer part of text errkb does not trust; it is offered only when each hole it
    touches holds nothing but words a command may hold.
    """
    i = start
    while i < end:
        if literal[i]:
            i += 1
            continue
        j = i
        while j < len(text) and not literal[j]:
            j += 1
        if not all(_SAFE_WORD.fullmatch(w) for w in text[i:j].split()):
            return False
        i = j
    return True


def message_fix(seen: Message) -> DerivedFix | None:
    """The message's own instruction as a command or a setting, or ``None``.

    >>> message_fix(Message(parts=("8-bit needs it: please install bitsandbytes >= 0.43.2.",)))
    DerivedFix(text="pip install 'bitsandbytes>=0.43.2'", source='message', command="pip install 'bitsandbytes>=0.43.2'", settings=())
    """
    text, literal = seen.text()
    for pattern, build, imperative in _RULES:
        for m in pattern.finditer(text):
            if not literal[m.start()] or (imperative and not _imperative(text, m.start())):
                continue
            if not _whole_holes_safe(text, literal, m.start(), m.end()):
                continue
            found = build(m, text)
            if found is not None:
                return found
    return None


_SKEW_COMMAND = regex.compile(r"pip install '[^'\n]+'")


def skew_fix(record: Record) -> DerivedFix | None:
    """A skew record's pin (or, for a name that is new, its upgrade), from its solutions."""
    if record.skew is None:
        return None
    for solution in record.solutions:
        m = _SKEW_COMMAND.search(solution)
        if m is not None:
            return DerivedFix(text=m.group(), source="skew", command=m.group())
    return None


# -- the guard condition -------------------------------------------------------------------

_DOC = regex.compile(
    r"^(?P<verb>Raised|Logged|Warned)(?P<through> through torch\._check)?"
    r" (?:by (?P<function>\S+)|at module level in (?P<path>\S+))"
    r"(?: when (?P<condition>.+?))?\.$",
    regex.DOTALL,
)
_COMPARE = regex.compile(r"\s(>=|<=|==|!=|>|<|is not|is|not in|in)\s")
_PATH = regex.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+")
_LITERAL = regex.compile(r"-?\d[\d_.]*|'[^']*'|\"[^\"]*\"|True|False|None")


def _conjuncts(condition: str) -> list[str]:
    """``a and (b and c) and not (d)`` -> ``['a', '(b and c)', 'not (d)']``."""
    out, depth, at = [], 0, 0
    i = 0
    while i < len(condition):
        ch = condition[i]
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0 and condition.startswith(" and ", i):
            out.append(condition[at:i])
            at = i = i + 5
            continue
        i += 1
    out.append(condition[at:])
    return [c.strip() for c in out if c.strip()]


def _config_setting(path: str) -> str | None:
    """The setting a dotted path reads when it goes through a configuration, else ``None``.

    ``self.model_config.max_model_len`` -> ``max_model_len``; ``self.max_len`` -> None.
    """
    *through, name = path.split(".")
    config_like = any(p in ("config", "args") or p.endswith(("_config", "_args")) for p in through)
    return name if config_like and not name.startswith("_") else None


_RAISED_WHEN = {
    ">": ("lower", "to at most {}"),
    ">=": ("lower", "below {}"),
    "<": ("raise", "to at least {}"),
    "<=": ("raise", "above {}"),
}
_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">=", "==": "==", "!=": "!="}
_NEGATE = {
    ">": "<=",
    ">=": "<",
    "<": ">=",
    "<=": ">",
    "==": "!=",
    "!=": "==",
    "is": "is not",
    "is not": "is",
    "in": "not in",
    "not in": "in",
}


def _clause_fix(clause: str, negated: bool, others: str = "") -> tuple[int, str] | None:
    """The setting one clause of a condition reads, restated, with its rank (0 best), or None.

    A comparison with a bound ranks first, a setting that must be set or unset next, a flag
    read as true or false last; a flag named as a property (``is_*``, ``has_*``) is the model's
    nature, not a setting, and is passed over.
    """
    while clause.startswith("not "):
        negated, clause = not negated, clause[4:].strip()
    if (
        clause.startswith("(")
        and clause.endswith(")")
        and _conjuncts(clause[1:-1]) == [clause[1:-1]]
    ):
        return _clause_fix(clause[1:-1].strip(), negated)
    if _top_level_or(clause):
        return None
    found = _COMPARE.search(clause)
    if found is None:
        setting = _config_setting(clause) if _PATH.fullmatch(clause) else None
        if setting is None or setting.startswith(("is_", "has_")):
            return None
        if regex.search(rf"(?<![\w.]){regex.escape(clause)}(?!\w)", others):
            return None  # "args.n and args.n != x": a guard that the value is set, not the check
        return (2, f"turn on `{setting}`" if negated else f"turn off or unset `{setting}`")
    op = found.group(1)
    left, right = clause[: found.start()].strip(), clause[found.end() :].strip()
    if _PATH.fullmatch(left) and (setting := _config_setting(left)):
        other = right
    elif _PATH.fullmatch(right) and (setting := _config_setting(right)) and op in _FLIP:
        other, op = left, _FLIP[op]
    else:
        return None
    if negated:
        op = _NEGATE[op]
    if op in _RAISED_WHEN:
        verb, bound = _RAISED_WHEN[op]
        if _LITERAL.fullmatch(other):
            return (0, f"{verb} `{setting}` {bound.format(other)}")
        back = "raise" if verb == "lower" else "lower"
        if _PATH.fullmatch(other) or other.isidentifier():
            return (0, f"{verb} `{setting}` (or {back} `{other}`, which bounds it)")
        return (0, f"{verb} `{setting}` (or {back} what bounds it)")
    literal = _LITERAL.fullmatch(other) is not None
    said = None
    if op == "is" and other == "None":
        said = f"set `{setting}`"
    elif op == "is not" and other == "None":
        said = f"leave `{setting}` unset"
    elif op in ("!=", "is not") and literal:
        said = f"set `{setting}` to {other}"
    elif op in ("==", "is") and literal:
        said = f"change `{setting}` from {other}"
    elif op == "not in":
        said = f"set `{setting}` to one of {other}"
    elif op == "in":
        said = f"change `{setting}` (it may not be one of {other})"
    return (1, said) if said else None


def _top_level_or(clause: str) -> bool:
    depth = 0
    for i, ch in enumerate(clause):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth == 0 and clause.startswith(" or ", i):
            return True
    return False


def condition_fix(record: Record) -> DerivedFix | None:
    """The guard condition restated as the setting it reads, when it reads a configuration.

    >>> from errkb.testing import record_dict
    >>> from errkb.records import record_from_dict
    >>> r, _ = record_from_dict(record_dict(documentation="Raised by LLMEngine._init_cache "
    ...     "when self.model_config.max_model_len > max_seq_len."))
    >>> condition_fix(r).text
    'lower `max_model_len` (or raise `max_seq_len`, which bounds it)'
    """
    m = _DOC.match(record.documentation or "")
    if m is None or not m["condition"] or m["condition"].endswith("..."):
        return None
    clauses = _conjuncts(m["condition"])
    found = [
        said
        for i, clause in enumerate(clauses)
        if (
            said := _clause_fix(
                clause,
                negated=False,
                others=" and ".join(clauses[:i] + clauses[i + 1 :]),
            )
        )
        is not None
    ]
    if not found:
        return None
    return DerivedFix(text=min(found, key=lambda f: f[0])[1], source="condition")


def fix(record: Record, seen: Message) -> DerivedFix | None:
    """The first fix derivable: the message's instruction, the skew pin, the condition's setting."""
    return message_fix(seen) or skew_fix(record) or condition_fix(record)


def check(record: Record, file: str | None = None) -> str | None:
    """What the check was, in one sentence: the record's documentation.

    The miner states every condition as the one under which the message is raised (a
    ``TORCH_CHECK(cond, ...)``'s is ``cond`` turned round), so the sentence is said as written.
    A check at module level names its file: ``file``, the release in use's, when given, in
    place of the newest release's. ``None`` when the record has no documentation.
    """
    doc = record.documentation
    if not doc:
        return None
    m = _DOC.match(doc)
    if m is None or not file or m["path"] != record.file_path or file == m["path"]:
        return doc
    through = m["through"] or ""
    when = f" when {m['condition']}" if m["condition"] else ""
    return f"{m['verb']}{through} at module level in {file}{when}."
