"""``errkb run -- CMD ARGS...``: run a command with the hook in every Python process it starts.

The command runs with errkb's ``sitecustomize`` folder first on ``PYTHONPATH`` and
``ERRKB_AUTOINSTALL=1``, both inherited by whatever it starts, so an error raised in a worker
process (vLLM's engine core, a ``multiprocessing`` pool, a ``subprocess``) gets its diagnosis
where it happens. A ``sitecustomize`` the environment already had still runs. Signals sent to
``errkb run`` go to the command, and its exit status is the command's.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Mapping
    from types import FrameType

__all__ = ["child_env", "main"]

USAGE = "usage: errkb run [--] COMMAND [ARGS...]"

#: Signals passed on to the command. SIGINT from a terminal reaches it directly (see below).
_FORWARDED = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGWINCH")


def child_env(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` with errkb's ``sitecustomize`` first on ``PYTHONPATH`` and autoinstall on."""
    from errkb._autostart import ENV, site_dir

    env = dict(environ)
    here = site_dir()
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != here]
    env["PYTHONPATH"] = os.pathsep.join([here, *rest])
    env[ENV] = "1"
    return env


def _in_terminal_foreground() -> bool:
    """Whether a terminal's own SIGINT (Ctrl-C) already reaches the command: same group."""
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (AttributeError, OSError, ValueError):
        return False


def main(argv: list[str]) -> int:
    """Run ``argv`` (after an optional ``--``) as described above; returns its exit status."""
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print(USAGE, file=sys.stderr)
        return 2
    try:
        child = subprocess.Popen(argv, env=child_env(os.environ))
    except OSError as exc:
        print(f"errkb: cannot run {argv[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        return 127 if isinstance(exc, FileNotFoundError) else 126

    def forward(signum: int, frame: FrameType | None) -> None:
        del frame
        if signum == signal.SIGINT and _in_terminal_foreground():
            return  # the terminal sent it to the whole group, the command included
        if child.poll() is None:
            child.send_signal(signum)

    for name in _FORWARDED:
        signum = getattr(signal, name, None)
        if signum is not None:
            signal.signal(signum, forward)
    status = child.wait()
    if status < 0:
        # Killed by a signal: die of the same one, so the caller sees what a shell would.
        try:
            signal.signal(-status, signal.SIG_DFL)
            os.kill(os.getpid(), -status)
        except (OSError, ValueError):
            pass
        return 128 - status
    return status
