"""``errkb serve``: the lookup API and the console page over HTTP (the ``serve`` extra).

Loopback by default. Any other address serves whoever can reach it, so it needs a token
(``--token`` or ``ERRKB_SERVE_TOKEN``), which every ``/v1`` request must then send as
``Authorization: Bearer <token>``; without one the command refuses to start (exit 2).
"""

from __future__ import annotations

import ipaddress
import sys
from typing import TYPE_CHECKING

from errkb.cli._common import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    import argparse

__all__ = ["is_loopback", "run"]


def is_loopback(host: str) -> bool:
    """Whether ``host`` only reaches this machine: ``localhost`` or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; exit 2 when the bind is unsafe or the extra is missing."""
    from errkb._env import text

    token = args.token or text("ERRKB_SERVE_TOKEN")
    if not is_loopback(args.host) and not token:
        print(
            f"errkb: serve: refusing to listen on {args.host} without a token: anyone who can "
            "reach it could use it; give --token or ERRKB_SERVE_TOKEN (or keep to 127.0.0.1)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.timeout <= 0:
        print("errkb: serve: --timeout must be above 0 seconds", file=sys.stderr)
        return EXIT_USAGE
    try:
        import uvicorn

        from errkb.serve import create_app
    except ImportError as exc:
        print(
            f"errkb: serve needs the serve extra ({exc.name} is missing): "
            "pip install 'errkb[serve]'",
            file=sys.stderr,
        )
        return EXIT_USAGE
    app = create_app(records=tuple(args.records), token=token, timeout=args.timeout)
    where = f"[{args.host}]" if ":" in args.host else args.host
    said = "every /v1 request needs the token" if token else "no token: loopback only"
    print(f"errkb: serving on http://{where}:{args.port}/ ({said})", file=sys.stderr)
    uvicorn.run(
        app,
        host=args.host,
        port=args.port,
        log_level="warning" if args.quiet else "info",
        access_log=not args.quiet,
    )
    return EXIT_OK
