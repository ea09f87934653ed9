"""``errkb validate``: check record files, one line per problem."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_NONE, EXIT_OK

if TYPE_CHECKING:
    import argparse

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Print each problem on stdout and a summary on stderr; exit 1 when there is any."""
    from errkb._sanitize import clean
    from errkb.records import load_paths
    from errkb.validate import check_advisors, check_published, check_ranking, check_variants

    result = load_paths(args.paths)
    problems = [
        *result.problems,
        *check_ranking(result.records),
        *check_advisors(result.records),
        *check_variants(result.records),
    ]
    if args.published:
        problems.extend(check_published(result.records, args.published))
    for problem in problems:
        print(clean(problem.line))
    summary = f"{len(result.records)} records loaded, {len(problems)} problems"
    print(f"errkb: {summary}", file=sys.stderr)
    return EXIT_NONE if problems else EXIT_OK
