"""The example fix of a computed solution: the user's own lines rewritten, or the record's example.

The general pieces every family shows its computed settings with:

* :func:`rewritten`: the user's own lines, before and after a
  :class:`~errkb.advisors._callsite.Rewrite`, every other byte kept;
* :func:`from_record`: the record's own example, its numbers replaced by the computed ones
  wherever it writes them (``key=N``, ``--flag N``, ``"key": N``); it says which settings it
  does not show.

Which of them a family shows, and where it finds the user's call or command, is the family's
(the KV family's: :mod:`errkb.advisors.kv_cache._example`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from errkb.findings import ExampleFix

if TYPE_CHECKING:
    from collections.abc import Mapping

    import regex

    from errkb.advisors._callsite import Rewrite
    from errkb.match import Match

__all__ = ["from_record", "keywords", "rewritten"]

_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"


def rewritten(rewrite: Rewrite) -> ExampleFix:
    """The example fix that is ``rewrite``: the user's own lines, before and after."""
    return ExampleFix(
        before=rewrite.before,
        after=rewrite.after,
        location=f"{rewrite.file}:{rewrite.line}",
        note="; ".join(rewrite.notes) or None,
    )


def keywords(settings: Mapping[str, object]) -> str:
    """``settings`` as keywords: ``max_model_len=4096, kv_cache_dtype='fp8'``."""
    return ", ".join(f"{k}={v!r}" for k, v in settings.items())


# --- The record's example, with the computed values put in ------------------------------


def _flag(key: str) -> str:
    """``key`` as a command-line flag: ``--max-model-len``."""
    return "--" + key.replace("_", "-")


def _patterns(key: str, text: str) -> list[re.Pattern[str]]:
    """Where an example writes ``key``'s value: the value is the group ``v``.

    errkb's own patterns, without nested repeats, on a record's example (short text): the
    standard library's engine, which compiles three times as fast as ``regex``. Only those
    whose literal part ``text`` holds are compiled.
    """
    k = re.escape(key)
    value = rf"(?P<v>{_NUMBER}|\"[^\"\n]*\"|'[^'\n]*')"
    quoted = f'"{key}"' in text or f"'{key}'" in text
    found = []
    if key in text:  # key=1 (code), KEY=1 (shell)
        found.append(re.compile(rf"(?<![\w-]){k}\s*=\s*{value}"))
    if _flag(key) in text:  # --key-name 1
        found.append(re.compile(rf"(?<![\w-]){re.escape(_flag(key))}(?:\s+|=)(?P<v>[^\s\"']+)"))
    if quoted:  # "key": 1, setdefault("key", 1)
        found.append(re.compile(rf"([\"']){k}\1\s*[:,]\s*{value}"))
    if quoted and "[" in text:  # d["key"] = 1
        found.append(re.compile(rf"\[([\"']){k}\1\]\s*=\s*{value}"))
    return found


def _put(text: str, key: str, value: object) -> tuple[str, bool]:
    """``text`` with every value written for ``key`` replaced by ``value``; whether any was."""
    found = False
    for pattern in _patterns(key, text):

        def swap(m: re.Match[str]) -> str:
            nonlocal found
            found = True
            old = m.group("v")
            quote = old[0] if isinstance(value, str) and old[:1] in "\"'" else ""
            new = f"{quote}{value}{quote}"
            start, end = m.span("v")
            return m.group(0)[: start - m.start()] + new + m.group(0)[end - m.start() :]

        text = pattern.sub(swap, text)
    return text, found


def from_record(
    match: Match,
    settings: Mapping[str, object],
    current: Mapping[str, object],
    *,
    command_line: regex.Pattern[str] | None = None,
) -> ExampleFix | None:
    """The record's example with ``settings`` put in; None when the record has none.

    ``current`` holds this run's values of settings the example may show, so that what the
    fix leaves alone keeps the value it had. A line of the example that ``command_line``
    matches (a program's command) takes, as flags, the settings the example does not show.
    """
    text = match.record.example_fix
    if not text:
        return None
    # The record's remarks speak of its own figures, which this run's replace: dropped.
    split = ExampleFix.from_record_text(text, remarks=False)
    before, after = split.before, split.after
    # The record's "after" shows the settings of the best solution; what it leaves alone keeps
    # the value this run had (the requested length stays when the utilization is what changes),
    # and its "before" shows this run's values: the two differ in what the fix changes, only.
    for key, value in current.items():
        if value is None:
            continue
        if before is not None:
            before, _ = _put(before, key, value)
        if key not in settings:
            after, _ = _put(after, key, value)
    missing = {}
    for key, value in settings.items():
        after, found = _put(after, key, value)
        if not found:
            missing[key] = value
    if missing:
        # A command line in the example takes the flags it lacks.
        lines = after.split("\n")
        serve = [i for i, ln in enumerate(lines) if command_line and command_line.match(ln)]
        if serve and all(not k.isupper() for k in missing):
            flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in missing.items())
            lines[serve[-1]] = f"{lines[serve[-1]].rstrip()} {flags}"
            after, missing = "\n".join(lines), {}
    note = "the record's example, with the computed values put in"
    if missing:
        note = (
            "the record's example, with the computed values put in where it shows them; "
            f"it does not show {keywords(missing)}: set these too"
        )
    return ExampleFix(before=before, after=after, note=note)
