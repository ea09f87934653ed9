"""``errkb show``: one record by id or slug, as lines of text or as its JSON."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_NONE, EXIT_OK, registry

if TYPE_CHECKING:
    import argparse

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Print the record; exit 1 when no record has that id or slug."""
    from errkb._sanitize import clean
    from errkb.exceptions import RegistryError

    try:
        record = registry(args).get(args.key)
    except RegistryError as exc:
        print(f"errkb: {exc}", file=sys.stderr)
        return EXIT_NONE
    if args.json:
        print(json.dumps(record.to_json(), indent=2, ensure_ascii=True))
        return EXIT_OK
    lines = [f"{record.id}  [{record.severity or 'error'}]  {record.heading}"]
    for label, value in (
        ("class", record.error_class),
        ("message", record.error_message),
        ("pattern", record.message_pattern),
        ("raised in", f"{record.repo or ''} {record.file_path or ''}:{record.line_number or ''}"),
        ("url", record.github_url),
        ("tags", ", ".join(record.tags)),
        ("what happened", record.documentation),
    ):
        if value and value.strip(" :"):
            lines.append(f"{label:>14}: {value}")
    for i, solution in enumerate(record.solutions, 1):
        lines.append(f"{'solution ' + str(i):>14}: {solution}")
    print(clean("\n".join(lines)))
    return EXIT_OK
