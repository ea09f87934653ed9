"""``python -m errkb``: the command line."""

from errkb.cli import main

raise SystemExit(main())
