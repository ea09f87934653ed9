"""The verdicts on an environment: plain frozen values.

The doctor (``errkb doctor``) and the environment advisor both judge an
:class:`errkb.probes.environment.Environment` and give :class:`Verdict` values; the renderers
turn them into text, Markdown or JSON, nothing here prints.
"""

from __future__ import annotations

from typing import Literal

from errkb._attrs import attrs

__all__ = ["SEVERITY_ORDER", "Severity", "Verdict"]

#: ``broken``: something fails now (exit status 1); ``warning``: it works with a limit or may
#: fail under load; ``note``: a fact worth saying (no GPU, no torch).
Severity = Literal["broken", "warning", "note"]

#: The severities, the most serious first.
SEVERITY_ORDER = {"broken": 0, "warning": 1, "note": 2}


@attrs.frozen(kw_only=True)
class Verdict:
    """One finding: what is wrong, why (with the facts and table rows it rests on), the fix.

    ``commands`` are shown, never run. ``sources`` cite the table rows the verdict used.
    """

    code: str
    severity: Severity
    title: str
    why: str
    fix: str = ""
    commands: tuple[str, ...] = ()
    sources: tuple[str, ...] = ()
