"""The example fix of a computed solution: the user's own code changed, or the record's example.

Advisors compute settings (``max_model_len=20480``); this module shows them where the user will
use them, in this order:

* settings that are environment variables: the command line with them set;
* the engine built by the user's code: that code, rewritten where the engine takes the settings
  (:func:`errkb.advisors._callsite.rewrite_settings`), with every other byte kept;
* the engine built inside an installed library: never an edit of the library, but lines for the
  user's file, before their call, that hand the engine the settings;
* the engine built by vLLM's own command line (``vllm serve``): the command line with the flags
  (the running process's, or the last one in a pasted text, found by :func:`pasted_command`);
* else the record's own example, its numbers replaced by the computed ones wherever it writes
  them (``key=N``, ``--flag N``, ``"key": N``); it says which settings it does not show.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import regex

from errkb.findings import ExampleFix

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from errkb.advisors._callsite import CallSite, Rewrite
    from errkb.evidence import Evidence
    from errkb.findings import FrameInfo
    from errkb.match import Match

__all__ = ["example_fix", "rewritten"]

_NUMBER = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"


def example_fix(
    match: Match,
    evidence: Evidence,
    settings: Mapping[str, object],
    current: Mapping[str, object],
) -> ExampleFix | None:
    """The example fix for ``settings`` (a computed solution's), or None when there is none.

    ``current`` holds this run's values of settings the record's example may show, so that
    what the fix leaves alone keeps the value it had.
    """
    if not settings:
        return None
    engine_settings = {k: v for k, v in settings.items() if not k.isupper()}
    if not engine_settings:
        env = " ".join(f"{k}={v}" for k, v in settings.items())
        return ExampleFix(
            before=None,
            after=f"{env} python your_app.py",
            note="set in the environment of the engine's process",
        )
    from errkb.advisors._callsite import find_engine_call

    live = next(iter(evidence.frames()), None) is not None
    command = _typed(sys.argv) if live else pasted_command(evidence.text)
    user_code = False
    for info in evidence.infos:
        site = find_engine_call(info.frames)
        if site is None:
            continue
        user_code = user_code or not site.engine
        fix = _from_frames(info.frames, site, engine_settings, command)
        if fix is not None:
            return fix
    if command is not None and not user_code:
        # A pasted message or traceback whose files are not here, below the command that ran.
        before, after = _rewrite_command(command, engine_settings)
        return ExampleFix(
            before=before,
            after=after,
            note="the command line in the pasted text, with the computed values",
        )
    return _from_record(match, settings, current)


def _from_frames(
    frames: Sequence[FrameInfo],
    site: CallSite,
    settings: Mapping[str, object],
    command: Sequence[str] | None,
) -> ExampleFix | None:
    from errkb.advisors._callsite import rewrite_settings

    if site.engine:
        return _command_line(site, settings, command)
    if site.library:
        return _library(site, settings)
    rewrite = rewrite_settings(frames, site.index, settings)
    return None if rewrite is None else rewritten(rewrite)


def rewritten(rewrite: Rewrite) -> ExampleFix:
    """The example fix that is ``rewrite``: the user's own lines, before and after."""
    return ExampleFix(
        before=rewrite.before,
        after=rewrite.after,
        location=f"{rewrite.file}:{rewrite.line}",
        note="; ".join(rewrite.notes) or None,
    )


def _keywords(settings: Mapping[str, object]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in settings.items())


def _library(site: CallSite, settings: Mapping[str, object]) -> ExampleFix:
    from errkb.advisors._callsite import wrap_library_call

    where = f"{site.file}:{site.line}"
    rewrite = wrap_library_call(site, settings)
    if rewrite is not None:
        return ExampleFix(
            before=rewrite.before,
            after=rewrite.after,
            location=f"{rewrite.file}:{rewrite.line}",
            note=f"the engine is built inside an installed library ({where}), whose files errkb "
            "leaves alone: the lines above your call make that engine get these settings",
        )
    note = (
        f"the engine is built inside an installed library ({where}), whose files errkb leaves "
        "alone, and errkb cannot see how to reach it from your code: give the engine these "
        "settings through the library's own options"
    )
    if site.user_frame is not None:
        note += f"; your code reached it from {site.user_frame.file}:{site.user_frame.line}"
    return ExampleFix(before=None, after=_keywords(settings), note=note)


def _program(argv: Sequence[str]) -> str | None:
    """How the command that started vLLM is typed: ``vllm``, or ``python -m <module>``."""
    from pathlib import Path

    from errkb.advisors._callsite import engine_file

    if not argv:
        return None
    name = Path(argv[0]).name
    if name == "vllm":
        return "vllm"
    if name.endswith(".py") and engine_file(argv[0]):
        parts = Path(argv[0]).with_suffix("").parts
        return "python -m " + ".".join(parts[len(parts) - parts[::-1].index("vllm") - 1 :])
    return None


def _typed(argv: Sequence[str]) -> list[str] | None:
    """This process's command line as typed: the program (:func:`_program`), then its args."""
    program = _program(argv)
    return None if program is None else [program, *argv[1:]]


#: A command that starts vLLM's server, in a line of a pasted text: ``vllm serve MODEL ...``
#: or ``python -m vllm.entrypoints.openai.api_server ...`` (the older ``...entrypoints.
#: api_server`` too), after whatever prompt or log prefix stands before it.
_SERVE = regex.compile(
    r"(?:^|(?<=[\s$#>:;&|(]))(?P<program>(?:[\w.~/-]*/)?vllm\s+serve(?=\s+[^\s-]))(?P<args>.*)$"
    r"|(?:^|(?<=[\s$#>:;&|(]))(?:[\w.~/-]*/)?(?P<python>python[\d.]*)(?:\s+-[^\s-m]\S*)*\s+"
    r"-m\s+(?P<module>vllm\.entrypoints\.(?:openai\.)?api_server)\b(?P<margs>.*)$"
)
#: Where a shell command line ends: a pipe, a redirection, the next command.
_SHELL_END = regex.compile(r"^(?:\||\|\||&&|;|&|\d*>.*|<.*)$")


def pasted_command(text: str | None) -> list[str] | None:
    """The last command line in ``text`` that starts vLLM's server, as typed; else None.

    ``["vllm", "serve", "MODEL", "--max-model-len", "131072"]``, or ``["python -m
    vllm.entrypoints.openai.api_server", "--model", ...]`` (the program as one word, as
    :func:`errkb.advisors._callsite.rewrite_command` takes it). Lines continued with a
    backslash are joined; a pipe or a redirection ends the command; a line that does not split
    as a shell would split it is passed over.
    """
    import shlex

    if not text:
        return None
    found = None
    for line in text.replace("\\\r\n", " ").replace("\\\n", " ").splitlines():
        m = _SERVE.search(line)
        if m is None:
            continue
        if m.group("program") is not None:
            program, rest = "vllm", "serve" + m.group("args")
        else:
            program, rest = f"{m.group('python')} -m {m.group('module')}", m.group("margs")
        try:
            args = shlex.split(rest)
        except ValueError:
            continue
        end = next((i for i, a in enumerate(args) if _SHELL_END.match(a)), len(args))
        found = [program, *args[:end]]
    return found


def _rewrite_command(command: Sequence[str], settings: Mapping[str, object]) -> tuple[str, str]:
    from errkb.advisors._callsite import rewrite_command

    return rewrite_command(command, settings)


def _command_line(
    site: CallSite, settings: Mapping[str, object], command: Sequence[str] | None
) -> ExampleFix:
    where = f"{site.file}:{site.line}"
    if command is not None:
        before, after = _rewrite_command(command, settings)
        return ExampleFix(
            before=before,
            after=after,
            note=f"vLLM's own server built the engine ({where}): change the command line, "
            "not vLLM's files",
        )
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in settings.items())
    return ExampleFix(
        before=None,
        after=flags,
        note=f"vLLM's own code built the engine ({where}): add these flags to the command "
        "that started it (vllm serve ...), or pass the settings to the engine you build",
    )


# --- The record's example, with the computed values put in ------------------------------


def _patterns(key: str) -> list[regex.Pattern[str]]:
    """Where an example writes ``key``'s value: the value is the group ``v``."""
    k = regex.escape(key)
    flag = regex.escape("--" + key.replace("_", "-"))
    value = rf"(?P<v>{_NUMBER}|\"[^\"\n]*\"|'[^'\n]*')"
    return [
        regex.compile(rf"(?<![\w-]){k}\s*=\s*{value}"),  # key=1 (code), KEY=1 (shell)
        regex.compile(rf"(?<![\w-]){flag}(?:\s+|=)(?P<v>[^\s\"']+)"),  # --key-name 1
        regex.compile(rf"([\"']){k}\1\s*[:,]\s*{value}"),  # "key": 1, setdefault("key", 1)
        regex.compile(rf"\[([\"']){k}\1\]\s*=\s*{value}"),  # d["key"] = 1
    ]


def _put(text: str, key: str, value: object) -> tuple[str, bool]:
    """``text`` with every value written for ``key`` replaced by ``value``; whether any was."""
    found = False
    for pattern in _patterns(key):

        def swap(m: regex.Match[str]) -> str:
            nonlocal found
            found = True
            old = m.group("v")
            quote = old[0] if isinstance(value, str) and old[:1] in "\"'" else ""
            new = f"{quote}{value}{quote}"
            start, end = m.span("v")
            return m.group(0)[: start - m.start()] + new + m.group(0)[end - m.start() :]

        text = pattern.sub(swap, text)
    return text, found


def _from_record(
    match: Match, settings: Mapping[str, object], current: Mapping[str, object]
) -> ExampleFix | None:
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
        serve = [i for i, ln in enumerate(lines) if regex.match(r"\s*vllm\s+serve\b", ln)]
        if serve and all(not k.isupper() for k in missing):
            flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in missing.items())
            lines[serve[-1]] = f"{lines[serve[-1]].rstrip()} {flags}"
            after, missing = "\n".join(lines), {}
    note = "the record's example, with the computed values put in"
    if missing:
        note = (
            "the record's example, with the computed values put in where it shows them; "
            f"it does not show {_keywords(missing)}: set these too"
        )
    return ExampleFix(before=before, after=after, note=note)
