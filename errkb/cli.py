"""The ``errkb`` command line: explain, scan, show, list, validate, probe, run.

Exit status: 0 when the command found what it was asked for (a match, a valid set of records),
1 when it did not (no record matched, a record is invalid), 2 for bad usage or unreadable input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from errkb import __version__

if TYPE_CHECKING:
    from collections.abc import Sequence

    from errkb.options import Options
    from errkb.registry import Registry

__all__ = ["main"]

EXIT_OK, EXIT_NONE, EXIT_USAGE = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # argparse exits 2 on errors, as we want
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"errkb: error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="errkb", description="Error knowledge for the ML and LLM stack.")
    parser.add_argument("--version", action="version", version=f"errkb {__version__}")
    common = _Parser(add_help=False)
    common.add_argument(
        "--records",
        action="append",
        default=[],
        metavar="PATH",
        help="also load records from this file or folder (repeatable; ERRKB_RECORDS too)",
    )
    common.add_argument("--color", action=argparse.BooleanOptionalAction, default=None)
    common.add_argument("--width", type=int, default=None, help="render at this many columns")
    sub = parser.add_subparsers(dest="command", required=True)

    ex = sub.add_parser(
        "explain",
        parents=[common],
        help="diagnose a message or a pasted traceback",
        description="Diagnose a message, a 'Class: message' line, or a whole pasted traceback. "
        "Give '-' (or nothing, with piped input) to read standard input.",
    )
    ex.add_argument("text", nargs="*", help="the message, or - for standard input")
    ex.add_argument("--json", action="store_true", help="print the versioned JSON object")
    ex.add_argument("--no-probes", dest="probes", action="store_false", help="measure nothing")
    _add_evidence_flags(ex)

    show = sub.add_parser("show", parents=[common], help="show one record by id or slug")
    show.add_argument("key", metavar="ID_OR_SLUG")
    show.add_argument("--json", action="store_true", help="print the record's JSON")

    lst = sub.add_parser("list", parents=[common], help="list the records")
    lst.add_argument("--tag", help="only records with this tag")
    lst.add_argument("--json", action="store_true", help="print JSON lines")

    scan = sub.add_parser(
        "scan", parents=[common], help="find known errors in logs (files, .gz, or - for stdin)"
    )
    scan.add_argument("paths", nargs="+", metavar="FILE", help="log files, gzip too; - is stdin")
    scan.add_argument("--json", action="store_true", help="print the versioned JSON object")
    scan.add_argument("--no-progress", dest="progress", action="store_false")

    val = sub.add_parser("validate", help="check record files; exit 1 when anything is invalid")
    val.add_argument("paths", nargs="+", metavar="PATH")
    val.add_argument(
        "--published",
        metavar="FILE",
        help="a file of ids (one a line) that must all still be there: published records are "
        "retired, never deleted",
    )

    probe = sub.add_parser(
        "probe", parents=[common], help="measure the GPUs and a model's KV cache"
    )
    probe.add_argument("--json", action="store_true", help="print JSON")
    _add_evidence_flags(probe)

    run = sub.add_parser(
        "run",
        help="run a command with the hook in every Python process it starts",
        usage="errkb run [--] COMMAND [ARGS...]",
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, metavar="COMMAND [ARGS...]")
    return parser


def _add_evidence_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("values to use instead of measurements")
    group.add_argument("--model", metavar="PATH", help="a local model folder or config.json")
    group.add_argument("--gpu-memory", metavar="SIZE", help="total memory of one GPU, e.g. 24GiB")
    group.add_argument("--gpu-memory-utilization", type=float, metavar="FRACTION")
    group.add_argument("--block-size", type=int, metavar="TOKENS")
    group.add_argument("--kv-cache-dtype", metavar="DTYPE", help="auto, fp8, fp8_e5m2, ...")
    group.add_argument("--tensor-parallel-size", type=int, metavar="N")


def _given(args: argparse.Namespace) -> dict[str, Any]:
    from errkb.units import parse_size

    given: dict[str, Any] = {}
    if getattr(args, "gpu_memory", None):
        given["gpu_memory_bytes"] = parse_size(args.gpu_memory)
    for name in (
        "model",
        "gpu_memory_utilization",
        "block_size",
        "kv_cache_dtype",
        "tensor_parallel_size",
    ):
        value = getattr(args, name, None)
        if value is not None:
            given[name] = value
    return given


def _options(args: argparse.Namespace, file: Any) -> Options:
    from errkb.options import Options

    return Options(
        file=file,
        width=args.width,
        color=args.color,
        probes=getattr(args, "probes", True),
        given=_given(args),
        records=tuple(args.records),
    )


def _registry(args: argparse.Namespace) -> Registry:
    from errkb.registry import Registry, default_registry

    if not args.records:
        return default_registry()
    # Records named on the command line are few and worth checking at once.
    registry = Registry.from_paths(args.records, validate=True)
    for problem in registry.problems:
        if any(problem.source.startswith(p) for p in args.records):
            print(f"errkb: {problem.line}", file=sys.stderr)
    return registry


def _read_text(args: argparse.Namespace) -> str | None:
    if args.text in ([], ["-"]):
        if not args.text and sys.stdin is not None and sys.stdin.isatty():
            return None
        try:
            return sys.stdin.read() if sys.stdin is not None else None
        except (OSError, UnicodeDecodeError) as exc:
            print(f"errkb: cannot read standard input ({exc})", file=sys.stderr)
            return None
    return " ".join(args.text)


def _explain(args: argparse.Namespace) -> int:
    from errkb.diagnosis import SCHEMA, explain
    from errkb.render import render_json

    text = _read_text(args)
    if text is None or not text.strip():
        print(
            "errkb: nothing to explain: give a message, or - to read standard input",
            file=sys.stderr,
        )
        return EXIT_USAGE
    options = _options(args, sys.stdout)
    diagnosis = explain(text, options=options, registry=_registry(args))
    if args.json:
        if diagnosis is None:
            empty: dict[str, object] = {
                "schema": SCHEMA,
                "exceptions": [],
                "matches": [],
                "solutions": [],
                "facts": [],
                "example_fix": None,
                "notes": [],
            }
            print(json.dumps(empty, indent=2))
        else:
            print(render_json(diagnosis))
    elif diagnosis is not None:
        diagnosis.render(options)
    else:
        print("errkb: no known error matches this text", file=sys.stderr)
    return EXIT_OK if diagnosis is not None else EXIT_NONE


def _show(args: argparse.Namespace) -> int:
    from errkb.exceptions import RegistryError
    from errkb.render._sanitize import clean

    try:
        record = _registry(args).get(args.key)
    except RegistryError as exc:
        print(f"errkb: {exc}", file=sys.stderr)
        return EXIT_NONE
    if args.json:
        print(json.dumps(record.to_json(), indent=2, ensure_ascii=True))
        return EXIT_OK
    lines = [f"{record.id}  [{record.severity or 'error'}]  {record.heading}"]
    for label, value in (
        ("class", record.error_class),
        ("message", record.error_message),
        ("pattern", record.message_pattern),
        ("raised in", f"{record.repo or ''} {record.file_path or ''}:{record.line_number or ''}"),
        ("url", record.github_url),
        ("tags", ", ".join(record.tags)),
        ("what happened", record.documentation),
    ):
        if value and value.strip(" :"):
            lines.append(f"{label:>14}: {value}")
    for i, solution in enumerate(record.solutions, 1):
        lines.append(f"{'solution ' + str(i):>14}: {solution}")
    print(clean("\n".join(lines)))
    return EXIT_OK


def _list(args: argparse.Namespace) -> int:
    from errkb.render._sanitize import clean

    registry = _registry(args)
    # Listing needs no record's body: refs keep what is shown.
    records = registry.refs_with_tag(args.tag) if args.tag else registry.refs
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


def _validate(args: argparse.Namespace) -> int:
    from errkb.records import load_paths
    from errkb.render._sanitize import clean
    from errkb.validate import check_published, check_ranking

    result = load_paths(args.paths)
    problems = [*result.problems, *check_ranking(result.records)]
    if args.published:
        problems.extend(check_published(result.records, args.published))
    for problem in problems:
        print(clean(problem.line))
    summary = f"{len(result.records)} records loaded, {len(problems)} problems"
    print(f"errkb: {summary}", file=sys.stderr)
    return EXIT_NONE if problems else EXIT_OK


def _probe(args: argparse.Namespace) -> int:
    from errkb.probes.report import probe_command

    return probe_command(_options(args, sys.stdout), as_json=args.json)


def _scan(args: argparse.Namespace) -> int:
    from errkb.scan import scan_command

    return scan_command(args.paths, _registry(args), as_json=args.json, progress=args.progress)


def _run(args: argparse.Namespace) -> int:
    from errkb._run import main as run_main

    return run_main(list(args.argv))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    args = _parser().parse_args(argv)
    from errkb.exceptions import UsageError

    handlers = {
        "explain": _explain,
        "show": _show,
        "list": _list,
        "validate": _validate,
        "probe": _probe,
        "scan": _scan,
        "run": _run,
    }
    try:
        return handlers[args.command](args)
    except UsageError as exc:
        print(f"errkb: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:
        # The reader went away (| head): not an error of ours; keep Python from complaining.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
