"""``errkb run``: a command run with the hook in every Python process it starts."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import argparse

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Run the command (see :mod:`errkb._run`); its exit status is ours."""
    from errkb._run import main

    return main(list(args.argv))
