"""``errkb doctor``: this machine's environment read, judged, and the commands that fix it.

Verdicts first (what is broken, why, the command that fixes it, shown and never run), then the
facts with their sources; ``--json`` gives the versioned object (``errkb.doctor/1``), ``--format
markdown`` a short report for an issue. Exit status 0 when nothing is broken, 1 when something
is, 2 on bad usage.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_NONE, EXIT_OK, options

if TYPE_CHECKING:
    import argparse

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Examine the environment and print the checkup in the form asked for."""
    from errkb._redact import redact_all
    from errkb.doctor import examine
    from errkb.render import render_checkup
    from errkb.render._doctor import render_checkup_markdown, user_hider

    checkup = examine()
    form = "json" if args.json else (args.format or "text")
    if form == "json":
        shown = user_hider(args.hide_user)
        data = _strings(redact_all(checkup.to_dict()), shown)
        print(json.dumps(data, indent=2, ensure_ascii=True))
    elif form == "markdown":
        print(render_checkup_markdown(checkup, hide_user=args.hide_user), end="")
    else:
        render_checkup(checkup, options(args, sys.stdout), hide_user=args.hide_user)
    return EXIT_NONE if checkup.broken else EXIT_OK


def _strings(value: object, shown: object) -> object:
    """``value`` with ``shown`` applied to every string in it (JSON-like data)."""
    if isinstance(value, str) and callable(shown):
        return shown(value)
    if isinstance(value, dict):
        return {k: _strings(v, shown) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v, shown) for v in value]
    return value
