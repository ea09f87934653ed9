"""``errkb list``: the hand-written records (``--all``: the mined too), one a line or as JSON.

``--tag`` lists the records with a tag, mined ones included.

(Named ``list_`` so that importing it does not bind ``list`` in the package's namespace.)
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_NONE, EXIT_OK, registry

if TYPE_CHECKING:
    import argparse

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Print the records sorted by library and id; exit 1 when there are none."""
    from errkb._sanitize import clean

    found = registry(args)
    # Listing needs no record's body: refs keep what is shown.
    records = found.refs_with_tag(args.tag) if args.tag else found.refs
    if not (args.all or args.tag):
        # Tens of thousands of mined records would bury the hand-written ones.
        records = tuple(r for r in records if "mined" not in r.tags)
    for r in sorted(records, key=lambda r: (r.library, r.id)):
        if args.json:
            print(
                json.dumps(
                    {
                        "id": r.id,
                        "slug": r.slug,
                        "library": r.library,
                        "severity": r.severity,
                        "title": r.heading,
                        "tags": list(r.tags),
                    }
                )
            )
        else:
            print(clean(f"{r.id:<48} {r.severity or '':<9} {r.heading}"))
    return EXIT_OK if records else EXIT_NONE
