"""A rendezvous port that is taken: the same launch again, on a port that is free.

torch's TCP store listens on the rendezvous port (torchrun's ``--master-port``, 29500 unless
told, or ``MASTER_PORT`` for ``init_method="env://"``); when another program holds it the store
fails with "Address already in use" (errno 98) or libuv's ``EADDRINUSE``. Where the error was
raised, the ``launch`` probe gives the command line and a port the system called free, and the
command is that command line with the port changed. A pasted text gives neither; when it holds
the torchrun command of a single machine, that command with ``--standalone`` picks a free port
itself (torch's run.py sets the rendezvous endpoint to ``localhost:0``).
"""

from __future__ import annotations

import re
import shlex
from pathlib import PurePath
from typing import TYPE_CHECKING

from errkb.advisors.environment._model import Verdict

if TYPE_CHECKING:
    from collections.abc import Sequence

    from errkb.probes.launch import LaunchReading

__all__ = ["launcher", "pasted_verdict", "port_verdict", "torchrun_on_port", "torchrun_standalone"]

#: The modules ``python -m`` starts torchrun as (``torch.distributed.launch`` is its old name).
_MODULES = ("torch.distributed.run", "torch.distributed.launch")
#: torchrun's options that take no value; every other option takes one (torch/distributed/run.py).
_SWITCHES = frozenset(
    {"--standalone", "--no-python", "--no_python", "--run-path", "--run_path", "-m", "--module"}
)
_PORT_FLAGS = ("--master-port", "--master_port")
_ENDPOINT_FLAGS = ("--rdzv-endpoint", "--rdzv_endpoint")
#: Flags that --standalone replaces: the rendezvous it sets up itself.
_RENDEZVOUS_FLAGS = (
    *_PORT_FLAGS, *_ENDPOINT_FLAGS, "--master-addr", "--master_addr", "--rdzv-backend",
    "--rdzv_backend", "--rdzv-id", "--rdzv_id",
)  # fmt: skip
#: A line of a pasted text that runs torchrun, after whatever prompt or log prefix.
_PASTED = re.compile(
    r"(?:^|(?<=[\s$#>+]))(?P<program>(?:[\w.~/-]*/)?torchrun|python[\d.]*\s+-m\s+"
    r"torch\.distributed\.(?:run|launch))\s+(?P<args>.+)$"
)


def launcher(argv: Sequence[str]) -> tuple[list[str], list[str], str] | None:
    """How ``argv`` (``sys.orig_argv``) was typed: (program words, arguments, kind).

    ``kind`` is ``torchrun`` (the console script or ``python -m torch.distributed.run``) or
    ``script`` (``python SCRIPT``); ``None`` for anything else (``python -c``, a REPL).
    """
    if not argv:
        return None
    if PurePath(argv[0]).name == "torchrun":
        return ["torchrun"], list(argv[1:]), "torchrun"
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-m", "-c"):
        i += 2 if argv[i] in ("-X", "-W") else 1
    if i >= len(argv) or argv[i] == "-c":
        return None
    if argv[i] == "-m":
        if i + 1 < len(argv) and argv[i + 1] in _MODULES:
            return ["python", "-m", argv[i + 1]], list(argv[i + 2 :]), "torchrun"
        return None
    if PurePath(argv[i]).name == "torchrun":
        return ["torchrun"], list(argv[i + 1 :]), "torchrun"
    return ["python", argv[i]], list(argv[i + 1 :]), "script"


def _split_options(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """The options torchrun reads itself, and the script with its arguments."""
    i = 0
    while i < len(args) and args[i].startswith("-"):
        if args[i] == "--":
            i += 1
            break
        i += 1 if ("=" in args[i] or args[i] in _SWITCHES) else 2
    return list(args[:i]), list(args[i:])


def _without(options: Sequence[str], flags: Sequence[str]) -> list[str]:
    """``options`` less ``flags`` and their values (``--flag V`` and ``--flag=V``)."""
    out: list[str] = []
    skip = False
    for option in options:
        if skip:
            skip = False
            continue
        name = option.split("=", 1)[0]
        if name in flags:
            skip = "=" not in option
            continue
        out.append(option)
    return out


def _value(options: Sequence[str], flags: Sequence[str]) -> str | None:
    for i, option in enumerate(options):
        name, eq, value = option.partition("=")
        if name in flags:
            return value if eq else (options[i + 1] if i + 1 < len(options) else None)
    return None


def torchrun_on_port(program: Sequence[str], args: Sequence[str], port: int) -> str:
    """The torchrun command with its rendezvous on ``port``.

    ``--rdzv-endpoint host:PORT`` gets the new port where the command names an endpoint (it
    wins over ``--master-port``); else ``--master-port``.
    """
    options, rest = _split_options(args)
    endpoint = _value(options, _ENDPOINT_FLAGS)
    if endpoint is not None:
        host = endpoint.rsplit(":", 1)[0] if ":" in endpoint else endpoint
        options = [*_without(options, _ENDPOINT_FLAGS), f"--rdzv-endpoint={host}:{port}"]
    else:
        options = [*_without(options, _PORT_FLAGS), f"--master-port={port}"]
    return shlex.join([*program, *options, *rest])


def torchrun_standalone(program: Sequence[str], args: Sequence[str]) -> str | None:
    """The torchrun command with ``--standalone`` in place of its rendezvous flags.

    ``None`` when the command runs on more than one machine (``--nnodes`` above 1): a
    standalone rendezvous serves one machine only.
    """
    options, rest = _split_options(args)
    nnodes = _value(options, ("--nnodes",))
    if nnodes is not None and nnodes.split(":")[-1] != "1":
        return None
    kept = [o for o in _without(options, _RENDEZVOUS_FLAGS) if o != "--standalone"]
    return shlex.join([*program, "--standalone", *kept, *rest])


def port_verdict(
    port: int | None, launch: LaunchReading, env_rendezvous: bool
) -> tuple[Verdict | None, list[str]]:
    """The verdict for a taken port where it was raised: the launch again on a free port."""
    taken = f"port {port}" if port is not None else "the rendezvous port"
    free = launch.free_port
    notes: list[str] = []
    if free is None:
        return None, ["environment: no free port could be found here (binding port 0 failed)."]
    notes.append(
        f"environment: port {free} was free when errkb asked the system for one (a socket "
        "bound to port 0); another program may take it before you run the command."
    )
    typed = launcher(launch.argv)
    command = None
    if typed is not None and typed[2] == "torchrun":
        command = torchrun_on_port(typed[0], typed[1], free)
        how = "torchrun's rendezvous port"
    elif typed is not None and env_rendezvous:
        command = "MASTER_PORT=" + str(free) + " " + shlex.join([*typed[0], *typed[1]])
        how = "MASTER_PORT, which init_method='env://' reads"
        notes.append("environment: a program that sets MASTER_PORT itself overrides this.")
    else:
        how = "the port the program gives the TCP store"
    verdict = Verdict(
        code="port-in-use",
        severity="broken",
        title=f"{taken.capitalize()} is taken by another program",
        why=f"torch's TCP store could not listen on {taken}: another process holds it (an "
        "earlier run still alive, a second job on the same machine).",
        fix=f"Start again with {how} set to a free port ({free})"
        + ("." if command else ", or stop the process that holds it."),
        commands=(command,) if command else (),
    )
    return verdict, notes


def pasted_verdict(port: int | None, text: str) -> tuple[Verdict | None, list[str]]:
    """A pasted text: its torchrun command with ``--standalone``, when it shows one."""
    found = None
    for line in text.replace("\\\r\n", " ").replace("\\\n", " ").splitlines():
        m = _PASTED.search(line)
        if m is None:
            continue
        try:
            found = (m.group("program").split(), shlex.split(m.group("args")))
        except ValueError:
            continue
    notes = ["environment: a free port can only be found on the machine that raised the error."]
    if found is None:
        return None, notes
    program = ["torchrun"] if PurePath(found[0][0]).name == "torchrun" else found[0]
    if "--standalone" in _split_options(found[1])[0]:
        return None, [
            *notes,
            (
                "environment: the pasted torchrun command already uses --standalone: the port "
                "taken is one the program itself chose (init_process_group, MASTER_PORT)."
            ),
        ]
    command = torchrun_standalone(program, found[1])
    if command is None:
        return None, [*notes, "environment: the pasted torchrun command runs on several machines."]
    taken = f"port {port}" if port is not None else "the rendezvous port"
    return (
        Verdict(
            code="port-in-use",
            severity="broken",
            title=f"{taken.capitalize()} is taken by another program",
            why=f"torch's TCP store could not listen on {taken}: another process holds it.",
            fix="Run the pasted torchrun command with --standalone: on one machine it lets the "
            "system pick a free rendezvous port (localhost:0).",
            commands=(command,),
        ),
        notes,
    )
