"""``errkb show``: one record by id or slug, in the long form of a diagnosis or as its JSON."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_NONE, EXIT_OK, options, registry

if TYPE_CHECKING:
    import argparse

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Print the record's long form (or its JSON); exit 1 when no record has that id or slug.

    The long form is what ``errkb explain --long`` shows of a diagnosis, less the numbers of
    a message: what the record matches, its solutions, example, documentation, history,
    likely situations and where upstream raises the error.
    """
    from errkb.exceptions import RegistryError
    from errkb.render import render_record

    try:
        record = registry(args).get(args.key)
    except RegistryError as exc:
        print(f"errkb: {exc}", file=sys.stderr)
        return EXIT_NONE
    if args.json:
        print(json.dumps(record.to_json(), indent=2, ensure_ascii=True))
        return EXIT_OK
    render_record(record, options(args, sys.stdout))
    return EXIT_OK
