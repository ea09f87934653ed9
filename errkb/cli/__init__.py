"""The ``errkb`` command line: explain, scan, show, list, validate, probe, doctor, run, serve, mine.

This module holds the parser and hands each command to its own module (``errkb.cli.explain``
for ``errkb explain``, ...), imported only when that command runs: ``errkb --version`` imports
neither rich nor the records. What several commands share is in :mod:`errkb.cli._common`.

Exit status: 0 when the command found what it was asked for (a match, a valid set of records),
1 when it did not (no record matched, a record is invalid), 2 for bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import TYPE_CHECKING, Any, NoReturn

from errkb._version import __version__
from errkb.cli._common import (
    EXIT_OK,
    EXIT_USAGE,
    add_evidence_flags,
    add_records_flag,
    add_render_flags,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

__all__ = ["main"]

#: Each command and the module under ``errkb.cli`` whose ``run(args)`` carries it out.
_COMMANDS = {
    "explain": "explain",
    "show": "show",
    "list": "list_",
    "scan": "scan",
    "validate": "validate",
    "probe": "probe",
    "doctor": "doctor",
    "run": "run",
    "serve": "serve",
    "mine": "mine",
}


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse exits 2 on errors, as we want; the message says it is errkb's.
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"errkb: error: {message}\n")


def _add_doctor(sub: Any) -> None:
    """``errkb doctor`` and its flags."""
    doctor = sub.add_parser(
        "doctor",
        help="check this environment: GPU, driver, torch's build, requirements, extensions",
        description="Read this machine's environment (the GPUs through NVML, torch's build in a "
        "child interpreter, the installed distributions, the compiled extensions, /dev/shm) and "
        "say what is broken and the command that fixes it; commands are shown, never run. "
        "With --from-paste, judge the environment a pasted report describes instead. "
        "Exit status 1 when something is broken.",
    )
    add_render_flags(doctor)
    _add_format(doctor, "the versioned object", "an issue")
    doctor.add_argument(
        "--hide-user",
        action="store_true",
        help="show the home folder as ~ and the user's name as <user> (secrets are always masked)",
    )
    doctor.add_argument(
        "--from-paste",
        metavar="FILE",
        help="judge the environment a pasted report describes (collect_env, vllm collect-env, "
        "accelerate env, transformers env, nvidia-smi; '-' for stdin) instead of this machine",
    )


def _add_format(parser: argparse.ArgumentParser, json_is: str, markdown_for: str) -> None:
    """``--format text|json|markdown`` and ``--json``, the same as ``--format json``."""
    parser.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default=None,
        help=f"text (the default), json ({json_is}), or markdown (for {markdown_for})",
    )
    parser.add_argument("--json", action="store_true", help="the same as --format json")


def _add_scan(sub: Any) -> None:
    """``errkb scan``'s arguments: one log, or a fleet's (docs/fleet.md)."""
    scan = sub.add_parser(
        "scan",
        help="find known errors in logs: files, folders, globs, URLs (s3://...), or - for stdin",
        description="Find known errors in logs. Several sources (paths, globs, folders, fsspec "
        "URLs, compressed by their extension) are scanned on Dask and merged (docs/fleet.md).",
    )
    add_records_flag(scan)
    scan.add_argument(
        "paths",
        nargs="+",
        metavar="SOURCE",
        help="log files, folders, globs or URLs; .gz .bz2 .xz .zst too; - is stdin",
    )
    _add_format(scan, "errkb.scan/1", "a ticket")
    scan.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report")
    scan.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help="local worker processes (default: one per core when several sources are "
        "given; 0: scan in this process)",
    )
    scan.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="a running Dask scheduler to use (tcp://host:8786); local-cluster: start a "
        "distributed.LocalCluster of --workers; processes (the default): Dask's single-machine "
        "scheduler on a pool of --workers processes",
    )
    scan.add_argument(
        "--state", metavar="FILE", help="remember what was read; scan only what is new next time"
    )
    scan.add_argument(
        "--split",
        type=int,
        metavar="BYTES",
        help="scan plain files larger than this in byte ranges of this size (default 64 MiB)",
    )
    scan.add_argument("--no-progress", dest="progress", action="store_false")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="errkb", description="Error knowledge for the ML and LLM stack.")
    parser.add_argument("--version", action="version", version=f"errkb {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    ex = sub.add_parser(
        "explain",
        help="diagnose a message or a pasted traceback",
        description="Diagnose a message, a 'Class: message' line, or a whole pasted traceback. "
        "Give '-' (or nothing, with piped input) to read standard input.",
    )
    add_records_flag(ex)
    add_render_flags(ex)
    ex.add_argument("text", nargs="*", help="the message, or - for standard input")
    _add_format(ex, "the versioned object", "an issue comment or a chat message")
    ex.add_argument("--no-probes", dest="probes", action="store_false", help="measure nothing")
    add_evidence_flags(ex)

    show = sub.add_parser("show", help="show one record by id or slug")
    add_records_flag(show)
    show.add_argument("key", metavar="ID_OR_SLUG")
    show.add_argument("--json", action="store_true", help="print the record's JSON")

    lst = sub.add_parser("list", help="list the records")
    add_records_flag(lst)
    lst.add_argument("--tag", help="only records with this tag (mined ones included)")
    lst.add_argument(
        "--all", action="store_true", help="also the records mined from source (tag mined)"
    )
    lst.add_argument("--json", action="store_true", help="print JSON lines")

    _add_scan(sub)

    val = sub.add_parser("validate", help="check record files; exit 1 when anything is invalid")
    val.add_argument("paths", nargs="+", metavar="PATH")
    val.add_argument(
        "--published",
        metavar="FILE",
        help="a file of ids (one a line) that must all still be there: published records are "
        "retired, never deleted",
    )

    probe = sub.add_parser("probe", help="measure the GPUs and a model's KV cache")
    probe.add_argument("--json", action="store_true", help="print JSON")
    add_evidence_flags(probe)

    _add_doctor(sub)

    run = sub.add_parser(
        "run",
        help="run a command with the hook in every Python process it starts",
        usage="errkb run [--] COMMAND [ARGS...]",
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="COMMAND [ARGS...]")

    serve = sub.add_parser(
        "serve",
        help="the lookup API and the console page over HTTP (the serve extra)",
        description="Serve errkb's API (/v1/..., described at /openapi.json) and the console "
        "page at /. Loopback by default; any other address needs a token.",
    )
    add_records_flag(serve)
    serve.add_argument(
        "--host", default="127.0.0.1", help="the address to listen on (IPv6 with or without [])"
    )
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--token",
        help="every /v1 request must send 'Authorization: Bearer TOKEN' (ERRKB_SERVE_TOKEN too); "
        "needed off loopback",
    )
    serve.add_argument(
        "--token-file", metavar="PATH", help="read the token from this file (kept out of ps)"
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a name the server is reached under besides loopback and its address (repeatable; "
        "* for any): the Host header must name one",
    )
    serve.add_argument(
        "--timeout",
        type=float,
        default=10.0,
        help="seconds a request may take (then 503, and its work stops)",
    )
    serve.add_argument(
        "--threads",
        type=int,
        default=4,
        help="worker threads for diagnoses and scans (default 4; more requests wait)",
    )
    serve.add_argument(
        "--header-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="close a connection that sends no whole request head for this long (default 10)",
    )
    serve.add_argument("--quiet", action="store_true", help="no access log")

    _mine_parser(sub)
    return parser


def _mine_parser(sub: argparse._SubParsersAction[_Parser]) -> None:
    """The ``errkb mine`` sub-command's arguments."""
    mine = sub.add_parser(
        "mine",
        help="make records from the source of distributions",
        description="Read each SOURCE (an installed distribution's name, a wheel, an sdist or a "
        "source folder; never installed, built or imported) and write one record per specific "
        "message it raises, checks, warns or logs.",
    )
    mine.add_argument("sources", nargs="+", metavar="SOURCE")
    mine.add_argument("--output", "-o", required=True, metavar="PACK", help="the pack to write")
    mine.add_argument("--format", choices=("jsonl", "jsonl.gz"), help="default: from PACK's name")
    mine.add_argument(
        "--excerpt-lines",
        type=int,
        default=10,
        metavar="N",
        help="lines of source kept on each side of the message's line (default 10)",
    )
    mine.add_argument("--summary", metavar="FILE", help="also write the summary as JSON")
    mine.add_argument("--no-native", dest="native", action="store_false", help="Python only")
    mine.add_argument(
        "--history",
        action="store_true",
        help="also diff the public API of consecutive releases and write the records of "
        "version skew (needs errkb[mine])",
    )
    mine.add_argument(
        "--max-classes",
        type=int,
        metavar="N",
        help="leave out the skew records of members of more than N classes, and of members "
        "added to classes (counted as left-out-for-size): a class list runs to 1,400 names",
    )
    mine.add_argument(
        "--index",
        action="store_true",
        help="also write PACK.index beside the pack, so it loads lazily wherever it is installed",
    )
    mine.add_argument(
        "--bounds",
        nargs="+",
        default=[],
        metavar="SOURCE",
        help="more releases of the same distributions, read only to make each record's first "
        "and last release exact (the records' sites stay those of the SOURCEs)",
    )
    mine.add_argument(
        "--releases",
        metavar="FILE",
        help="every release the package index has, one a line; 'VERSION # why' for one not "
        "read. Writes the pack's release list beside it (PACK with the suffix .releases)",
    )
    mine.add_argument(
        "--history-from",
        metavar="PACK",
        help="with --history: take the skew records of PACK (and the counts of --summary) "
        "from an earlier run of the same releases instead of diffing their APIs again",
    )
    mine.add_argument(
        "--bounds-cache",
        metavar="DIR",
        help="keep what each --bounds release raises in DIR, reused while the file and "
        "errkb's readers are the same",
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (``sys.argv[1:]`` when None); returns the exit status.

    A ``UsageError`` from any command is one line on stderr and exit status 2.
    """
    args = _parser().parse_args(argv)
    from errkb.exceptions import UsageError

    module: Any = importlib.import_module(f"{__name__}.{_COMMANDS[args.command]}")
    command: Callable[[argparse.Namespace], int] = module.run
    try:
        return command(args)
    except UsageError as exc:
        print(f"errkb: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (| head): not an error of ours; keep Python from complaining.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
