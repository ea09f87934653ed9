"""The example fix of a computed solution: the user's own call rewritten, or the record's example.

Advisors compute settings (``max_model_len=20480``); this module shows them where the user will
use them. First choice, the call that built the engine, found in the traceback and rewritten
(:mod:`errkb.advisors._callsite`); else, for settings that are environment variables, the
command line; else the record's own example with the computed values put in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import regex

from errkb.findings import ExampleFix

if TYPE_CHECKING:
    from collections.abc import Mapping

    from errkb.evidence import Evidence
    from errkb.match import Match

__all__ = ["example_fix"]

_NUMBER_SETTING = regex.compile(
    r"\b(max_model_len|gpu_memory_utilization|tensor_parallel_size)\s*=\s*[\d.]+"
)


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
    from errkb.advisors._callsite import find_engine_call, rewrite_call

    engine_settings = {k: v for k, v in settings.items() if not k.isupper()}
    if not settings:
        return None
    if not engine_settings:
        env = " ".join(f"{k}={v}" for k, v in settings.items())
        return ExampleFix(
            before=None,
            after=f"{env} python your_app.py",
            note="set in the environment of the engine's process",
        )
    for info in evidence.infos:
        site = find_engine_call(info.frames)
        if site is None:
            continue
        after = rewrite_call(site, engine_settings)
        if after is None:
            continue
        note = None
        if site.library:
            note = f"this call is inside an installed library ({site.file}:{site.line}); its callers cannot pass these settings"
            if site.user_frame is not None:
                note += f"; your code reached it from {site.user_frame.file}:{site.user_frame.line}"
        if site.has_double_star:
            note = (
                note + "; " if note else ""
            ) + "the call also passes **kwargs: make sure they do not set these too"
        return ExampleFix(
            before=site.text, after=after, location=f"{site.file}:{site.line}", note=note
        )
    text = match.record.example_fix
    if not text:
        return None
    base = ExampleFix.from_record_text(text)

    # The record's "after" shows the settings of the best solution; what it leaves alone keeps
    # the value this run had (the requested length stays when the utilization is what changes).
    values: dict[str, object] = {**current, **settings}

    def put(m: regex.Match[str]) -> str:
        key = m.group(1)
        return f"{key}={values[key]}" if values.get(key) is not None else m.group(0)

    after = _NUMBER_SETTING.sub(put, base.after)
    return ExampleFix(
        before=base.before,
        after=after,
        note="the record's example, with the computed values put in",
    )
