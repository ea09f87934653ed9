"""What several commands share: exit statuses, the shared flags, and what is read from them.

Each shared flag is declared here beside the function that reads it, so a command that takes
the flag gets its meaning with it: ``--records`` (:func:`registry`), ``--color``,
``--width`` and ``--long`` (:func:`options`), and the values that stand in for measurements
(:func:`given`). Importing this module imports nothing beyond the standard library; the
records, rich and the probes are loaded by the functions that need them.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from errkb.options import Options
    from errkb.registry import Registry

__all__ = [
    "EXIT_NONE",
    "EXIT_OK",
    "EXIT_USAGE",
    "add_evidence_flags",
    "add_records_flag",
    "add_render_flags",
    "given",
    "options",
    "registry",
]

#: Found what was asked for (a match, a valid set of records).
EXIT_OK = 0
#: Found nothing (no record matched, a record is invalid).
EXIT_NONE = 1
#: Bad usage or unreadable input.
EXIT_USAGE = 2


def add_records_flag(parser: argparse.ArgumentParser) -> None:
    """``--records PATH`` (repeatable), for commands that load records."""
    parser.add_argument(
        "--records",
        action="append",
        default=[],
        metavar="PATH",
        help="also load records from this file or folder (repeatable; ERRKB_RECORDS too)",
    )


def add_render_flags(parser: argparse.ArgumentParser) -> None:
    """``--color/--no-color``, ``--width`` and ``--long``, for commands that render a diagnosis."""
    parser.add_argument("--color", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--width", type=int, default=None, help="render at this many columns")
    parser.add_argument(
        "--long",
        action="store_true",
        help="also show the record's full documentation, history, likely situations, "
        "upstream raise site and the other records that matched",
    )


def add_evidence_flags(parser: argparse.ArgumentParser) -> None:
    """The values a user can give instead of measurements (see :class:`errkb.options.Given`)."""
    group = parser.add_argument_group("values to use instead of measurements")
    group.add_argument("--model", metavar="PATH", help="a local model folder or config.json")
    group.add_argument("--gpu-memory", metavar="SIZE", help="total memory of one GPU, e.g. 24GiB")
    group.add_argument("--gpu-memory-utilization", type=float, metavar="FRACTION")
    group.add_argument("--block-size", type=int, metavar="TOKENS")
    group.add_argument("--kv-cache-dtype", metavar="DTYPE", help="auto, fp8, fp8_e5m2, ...")
    group.add_argument("--tensor-parallel-size", type=int, metavar="N")
    group.add_argument(
        "--dtype", metavar="DTYPE", help="the engine's dtype: float32, bfloat16, half, ..."
    )


def given(args: argparse.Namespace) -> dict[str, Any]:
    """The evidence flags that were given, by :class:`errkb.options.Given` field name.

    A bad ``--gpu-memory`` or a figure out of its plausible range
    (:mod:`errkb.probes._plausible`) raises ``UsageError`` naming the flag and the range.
    """
    from errkb.exceptions import UsageError
    from errkb.probes._plausible import RANGES, gpu_memory

    values: dict[str, Any] = {}
    if getattr(args, "gpu_memory", None):
        values["gpu_memory_bytes"] = gpu_memory(args.gpu_memory, "--gpu-memory")
    for name in (
        "model",
        "gpu_memory_utilization",
        "block_size",
        "kv_cache_dtype",
        "tensor_parallel_size",
        "dtype",
    ):
        value = getattr(args, name, None)
        if value is not None:
            if name in RANGES:  # each figure in its plausible range, as errkb serve checks it
                value = RANGES[name].check(value, "--" + name.replace("_", "-"))
            values[name] = value
    if values.get("model"):
        # Read now, so that a config that cannot be used (absent, a figure out of range) is a
        # usage error of every command, as a bad --gpu-memory is, not a note in a diagnosis.
        from errkb.probes.model import read_model_path

        try:
            read_model_path(values["model"])
        except UsageError as exc:
            raise UsageError(f"--model {exc}") from None
    return values


def options(args: argparse.Namespace, file: TextIO) -> Options:
    """The :class:`~errkb.options.Options` of a command: its render flags and evidence flags.

    A flag the command does not take keeps the option's default.
    """
    from errkb.options import Options

    return Options(
        file=file,
        width=getattr(args, "width", None),
        color=getattr(args, "color", None),
        probes=getattr(args, "probes", True),
        # A command of its own: importing torch to measure costs only this process.
        import_torch=True,
        given=given(args),
        records=tuple(getattr(args, "records", ())),
        detail="long" if getattr(args, "long", False) else "short",
    )


def registry(args: argparse.Namespace) -> Registry:
    """The default registry, or one with ``--records`` added (checked, problems on stderr)."""
    from errkb.registry import Registry, default_registry

    if not args.records:
        return default_registry()
    # Records named on the command line are few and worth checking at once.
    loaded = Registry.from_paths(args.records, validate=True)
    for problem in loaded.problems:
        if any(problem.source.startswith(p) for p in args.records):
            print(f"errkb: {problem.line}", file=sys.stderr)
    return loaded
