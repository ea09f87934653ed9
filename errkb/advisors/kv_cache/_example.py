"""The KV family's example fix: its computed settings shown where the user will use them.

In this order:

* settings that are environment variables: the command line with them set;
* the engine built by the user's code: that code, rewritten where the engine takes the settings
  (:func:`~errkb.advisors.kv_cache._engine_calls.rewrite_settings`), with every other byte kept;
* the engine built inside an installed library: never an edit of the library, but lines for the
  user's file, before their call, that hand the engine the settings;
* the engine built by vLLM's own command line (``vllm serve``): the command line with the flags
  (the running process's, or the last one in a pasted text);
* else the record's own example with the computed values put in
  (:func:`errkb.advisors._fix.from_record`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from errkb.advisors._callsite import rewrite_command
from errkb.advisors._fix import from_record, keywords, rewritten
from errkb.advisors.kv_cache._engine_calls import (
    SERVE_LINE,
    find_engine_call,
    pasted_command,
    rewrite_settings,
    typed_command,
    wrap_library_call,
)
from errkb.findings import ExampleFix

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from errkb.advisors._callsite import CallSite
    from errkb.evidence import Evidence
    from errkb.findings import FrameInfo
    from errkb.match import Match

__all__ = ["engine_example", "example_fix"]


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
    found = engine_example(evidence, engine_settings)
    if found is not None:
        return found
    return from_record(match, settings, current, command_line=SERVE_LINE)


def engine_example(evidence: Evidence, settings: Mapping[str, object]) -> ExampleFix | None:
    """``settings`` of a vLLM engine written where this run gave its engine its settings.

    The user's call that built the engine (in the frames), the engine a library built, or
    the ``vllm serve`` command (typed here, or in the pasted text). None when none is found:
    any family whose fix is an engine's settings (the out-of-memory one too) takes this road.
    """
    live = next(iter(evidence.frames()), None) is not None
    command = typed_command() if live else pasted_command(evidence.text)
    user_code = False
    for info in evidence.infos:
        site = find_engine_call(info.frames)
        if site is None:
            continue
        user_code = user_code or not site.engine
        fix = _from_frames(info.frames, site, settings, command)
        if fix is not None:
            return fix
    if command is not None and not user_code:
        # A pasted message or traceback whose files are not here, below the command that ran.
        before, after = rewrite_command(command, settings)
        return ExampleFix(
            before=before,
            after=after,
            note="the command line in the pasted text, with the computed values",
        )
    return None


def _from_frames(
    frames: Sequence[FrameInfo],
    site: CallSite,
    settings: Mapping[str, object],
    command: Sequence[str] | None,
) -> ExampleFix | None:
    if site.engine:
        return _command_line(site, settings, command)
    if site.library:
        return _library(site, settings)
    rewrite = rewrite_settings(frames, site.index, settings)
    return None if rewrite is None else rewritten(rewrite)


def _library(site: CallSite, settings: Mapping[str, object]) -> ExampleFix:
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
    return ExampleFix(before=None, after=keywords(settings), note=note)


def _command_line(
    site: CallSite, settings: Mapping[str, object], command: Sequence[str] | None
) -> ExampleFix:
    where = f"{site.file}:{site.line}"
    if command is not None:
        before, after = rewrite_command(command, settings)
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
