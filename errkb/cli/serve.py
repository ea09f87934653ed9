"""``errkb serve``: the lookup API and the console page over HTTP (the ``serve`` extra).

Loopback by default. Any other address serves whoever can reach it, so it needs a token
(``--token``, ``--token-file`` or ``ERRKB_SERVE_TOKEN``), which every ``/v1`` request must
then send as ``Authorization: Bearer <token>``; without one the command refuses to start
(exit 2). A request's ``Host`` must name the server (``--allowed-host`` adds names), its work
runs in ``--threads`` worker threads and stops at ``--timeout``; a connection that has not
sent a whole request's headers within ``--header-timeout`` is closed.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb.cli._common import EXIT_OK, EXIT_USAGE

if TYPE_CHECKING:
    import argparse

__all__ = ["is_loopback", "run"]

#: The most worker threads ``--threads`` takes.
MAX_THREADS = 64


def is_loopback(host: str) -> bool:
    """Whether ``host`` only reaches this machine: ``localhost`` or a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


class _NoQuery(logging.Filter):
    """Access-log lines without the query string: a ``?token=`` is refused, and never written."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].partition("?")[0], *args[3:])
        return True


def _refuse(why: str) -> int:
    print(f"errkb: serve: {why}", file=sys.stderr)
    return EXIT_USAGE


def _token(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """The token, from ``--token``, ``--token-file`` or the environment; or why it is unusable."""
    from errkb._env import text

    if args.token_file is not None:
        try:
            token = Path(args.token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            return None, f"--token-file: cannot read {args.token_file} ({exc})"
        if not token:
            return None, f"--token-file: {args.token_file} is empty"
        if "\n" in token:
            return None, f"--token-file: {args.token_file} holds more than one line"
        return token, None
    return args.token or text("ERRKB_SERVE_TOKEN"), None


def run(args: argparse.Namespace) -> int:
    """Serve until interrupted; exit 2 when a flag is unusable, the bind unsafe or the extra missing."""
    host = args.host.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]  # an IPv6 literal, bracketed as in a URL
    if not host:
        return _refuse("--host: expected an address or a name, got nothing")
    if args.token is not None and args.token_file is not None:
        return _refuse("give --token or --token-file, not both")
    token, why = _token(args)
    if why is not None:
        return _refuse(why)
    if not is_loopback(host) and not token:
        return _refuse(
            f"refusing to listen on {host} without a token: anyone who can reach it could use "
            "it; give --token, --token-file or ERRKB_SERVE_TOKEN (or keep to 127.0.0.1)"
        )
    for flag, value in (("--timeout", args.timeout), ("--header-timeout", args.header_timeout)):
        if not math.isfinite(value) or value <= 0:
            return _refuse(f"{flag} must be above 0 seconds and finite, got {value:g}")
    if not 1 <= args.threads <= MAX_THREADS:
        return _refuse(f"--threads: expected 1 to {MAX_THREADS}, got {args.threads}")
    if not 0 <= args.port <= 65535:
        return _refuse(f"--port: expected 0 to 65535, got {args.port}")
    try:
        import uvicorn

        from errkb.serve import create_app
        from errkb.serve._protocol import header_timeout_protocol
    except ImportError as exc:
        return _refuse(
            f"it needs the serve extra ({exc.name} is missing): pip install 'errkb[serve]'"
        )
    app = create_app(
        records=tuple(args.records),
        token=token,
        timeout=args.timeout,
        threads=args.threads,
        host=host,
        allowed_hosts=tuple(args.allowed_host),
    )
    where = f"[{host}]" if ":" in host else host
    said = "every /v1 request needs the token" if token else "no token: loopback only"
    print(f"errkb: serving on http://{where}:{args.port}/ ({said})", file=sys.stderr)
    options: dict[str, Any] = {
        "host": host,
        "port": args.port,
        "http": header_timeout_protocol(args.header_timeout),
        "log_level": "warning" if args.quiet else "info",
        "access_log": not args.quiet,
    }
    config = uvicorn.Config(app, **options)
    # After uvicorn has configured its loggers, which would drop a filter set before.
    logging.getLogger("uvicorn.access").addFilter(_NoQuery())
    uvicorn.Server(config).run()
    return EXIT_OK
