"""``errkb doctor``: this machine's environment read, judged, and the commands that fix it.

Verdicts first (what is broken, why, the command that fixes it, shown and never run), then the
facts with their sources; ``--json`` gives the versioned object (``errkb.doctor/1``), ``--format
markdown`` a short report for an issue. ``--from-paste FILE`` judges the environment a pasted
report describes (``collect_env``, ``vllm collect-env``, ``accelerate env``, ``transformers env``,
``nvidia-smi``) instead of this machine: the verdicts a support engineer needs for the reporter's
machine. Exit status 0 when nothing is broken, 1 when something is, 2 on bad usage (a file that
cannot be read, or that holds no report tool's output).
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_NONE, EXIT_OK, EXIT_USAGE, options

if TYPE_CHECKING:
    import argparse

    from errkb.doctor import Checkup

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Examine the environment and print the checkup in the form asked for."""
    from errkb._redact import redact_all
    from errkb.doctor import examine
    from errkb.render import render_checkup
    from errkb.render._doctor import render_checkup_markdown, user_hider

    if getattr(args, "from_paste", None):
        checkup = _from_paste(args.from_paste)
        if checkup is None:
            return EXIT_USAGE
    else:
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


def _from_paste(name: str) -> Checkup | None:
    """The checkup of the environment in file ``name`` (``-``: standard input), or ``None``.

    ``None`` after saying why on stderr: the file cannot be read, or holds no report tool's
    output.
    """
    from errkb.doctor import examine_paste

    shown = "standard input" if name == "-" else repr(name)
    try:
        if name == "-":
            text = sys.stdin.read()
        else:
            with open(name, encoding="utf-8", errors="replace") as file:  # noqa: PTH123
                text = file.read()
    except OSError as exc:
        print(f"errkb: doctor: cannot read {shown}: {exc.strerror or exc}", file=sys.stderr)
        return None
    checkup = examine_paste(text)
    if checkup is None:
        print(
            f"errkb: doctor: {shown} holds no output of collect_env, vllm collect-env, "
            "accelerate env, transformers env or nvidia-smi",
            file=sys.stderr,
        )
    return checkup


def _strings(value: object, shown: object) -> object:
    """``value`` with ``shown`` applied to every string in it (JSON-like data)."""
    if isinstance(value, str) and callable(shown):
        return shown(value)
    if isinstance(value, dict):
        return {k: _strings(v, shown) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings(v, shown) for v in value]
    return value
