"""``errkb explain``: diagnose a message, a ``Class: message`` line, or a pasted traceback."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_NONE, EXIT_OK, EXIT_USAGE, options, registry

if TYPE_CHECKING:
    import argparse

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Print the diagnosis (rich, plain or ``--json``); exit 0 on a match, 1 on none."""
    from errkb.diagnosis import explain
    from errkb.findings import empty_dict
    from errkb.render import render, render_json

    text = _read_text(args)
    if text is None or not text.strip():
        print(
            "errkb: nothing to explain: give a message, or - to read standard input",
            file=sys.stderr,
        )
        return EXIT_USAGE
    opts = options(args, sys.stdout)
    diagnosis = explain(text, options=opts, registry=registry(args))
    if args.json:
        if diagnosis is None:
            # Nothing matched: still the object, with the same keys, all empty.
            print(json.dumps(empty_dict(), indent=2))
        else:
            print(render_json(diagnosis))
    elif diagnosis is not None:
        render(diagnosis, opts)
    else:
        print("errkb: no known error matches this text", file=sys.stderr)
    return EXIT_OK if diagnosis is not None else EXIT_NONE


def _read_text(args: argparse.Namespace) -> str | None:
    """The words given, or standard input for ``-`` (or for nothing, when it is piped)."""
    if args.text in ([], ["-"]):
        if not args.text and sys.stdin is not None and sys.stdin.isatty():
            return None
        try:
            return sys.stdin.read() if sys.stdin is not None else None
        except (OSError, UnicodeDecodeError) as exc:
            print(f"errkb: cannot read standard input ({exc})", file=sys.stderr)
            return None
    return " ".join(args.text)
