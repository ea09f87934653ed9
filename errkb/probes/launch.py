"""The launch probe: how this process was started, and a TCP port that is free on this machine.

A rendezvous port that is taken (torchrun's 29500, ``MASTER_PORT``) is fixed by starting again
on a free one. The port is found as the operating system finds one: a socket bound to port 0 is
given a free port, read, and closed again. It is free when read; another program may take it
before the command runs, which the advice says. Nothing is sent: the socket never listens.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from errkb._attrs import attrs

if TYPE_CHECKING:
    from errkb.evidence import Evidence

__all__ = ["LaunchReading", "free_port", "probe"]


@attrs.frozen(kw_only=True)
class LaunchReading:
    """This process's command line and a port the system called free (``None``: none found).

    ``argv`` is ``sys.orig_argv``: the interpreter and its options too, so that ``python -m
    torch.distributed.run`` reads as typed.
    """

    argv: tuple[str, ...]
    free_port: int | None
    source: str = "sys.orig_argv; a socket bound to port 0"


def free_port() -> int | None:
    """A TCP port the system reports free now (bind to port 0, read it, close), or ``None``."""
    import socket

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("", 0))
            port: int = sock.getsockname()[1]
    except OSError:
        return None
    return port


def probe(evidence: Evidence, timeout: float) -> LaunchReading | None:  # noqa: ARG001
    """The ``launch`` probe: the command line and a free port; ``None`` with probes off."""
    if not evidence.options.probes:
        return None
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return LaunchReading(argv=tuple(str(a) for a in argv), free_port=free_port())
