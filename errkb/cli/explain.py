"""``errkb explain``: diagnose a message, a ``Class: message`` line, or a pasted traceback."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_NONE, EXIT_OK, EXIT_USAGE, options, registry

if TYPE_CHECKING:
    import argparse
    from collections.abc import Iterable, Iterator

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Print the diagnosis (rich, plain, ``--json`` or Markdown); exit 0 on a match, 1 on none.

    Standard input is read whole, streamed: a log of any size is read to its end. What had to
    be cut or left out is said on stderr, matched or not.
    """
    from errkb.diagnosis import explain, explain_lines
    from errkb.findings import empty_dict
    from errkb.render import render, render_json, render_markdown

    opts = options(args, sys.stdout)
    cut: list[str] = []
    if args.text not in ([], ["-"]):
        diagnosis = explain(" ".join(args.text), options=opts, registry=registry(args))
    elif not args.text and (sys.stdin is None or sys.stdin.isatty()):
        return _nothing()
    else:
        lines = _Lines(sys.stdin)
        try:
            diagnosis = explain_lines(lines, options=opts, registry=registry(args), notes=cut)
        except (OSError, UnicodeDecodeError) as exc:
            print(f"errkb: cannot read standard input ({exc})", file=sys.stderr)
            return EXIT_USAGE
        if not lines.any_text:
            return _nothing()
    for note in cut:
        print(f"errkb: {note}", file=sys.stderr)
    form = "json" if args.json else (args.format or "text")
    if form == "json":
        if diagnosis is None:
            # Nothing matched: still the object, with the same keys, all empty.
            print(json.dumps(empty_dict(), indent=2))
        else:
            print(render_json(diagnosis))
    elif form == "markdown" and diagnosis is not None:
        print(render_markdown(diagnosis, detail=opts.detail), end="")
    elif diagnosis is not None:
        render(diagnosis, opts)
    else:
        print("errkb: no known error matches this text", file=sys.stderr)
    return EXIT_OK if diagnosis is not None else EXIT_NONE


def _nothing() -> int:
    print("errkb: nothing to explain: give a message, or - to read standard input", file=sys.stderr)
    return EXIT_USAGE


class _Lines:
    """The lines of a stream, noting whether any held more than white space."""

    def __init__(self, stream: Iterable[str]) -> None:
        self._stream = stream
        self.any_text = False

    def __iter__(self) -> Iterator[str]:
        for line in self._stream:
            if not self.any_text and line.strip():
                self.any_text = True
            yield line
