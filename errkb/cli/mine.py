"""``errkb mine``: records from the source of distributions, written as a pack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from errkb.cli._common import EXIT_OK

if TYPE_CHECKING:
    import argparse

__all__ = ["run"]


def run(args: argparse.Namespace) -> int:
    """Mine the sources, write the pack, print the summary; a bad source is exit status 2."""
    from errkb.exceptions import UsageError
    from errkb.mine import mine, write_pack
    from errkb.mine._bounds import RELEASES_SCHEMA

    if args.excerpt_lines < 0:
        raise UsageError(f"--excerpt-lines: expected 0 or more, got {args.excerpt_lines}")
    output = Path(args.output)
    fmt = args.format or ("jsonl.gz" if output.name.endswith(".gz") else "jsonl")
    if args.max_classes is not None and args.max_classes < 0:
        raise UsageError(f"--max-classes: expected 0 or more, got {args.max_classes}")
    if args.index and fmt != "jsonl":
        raise UsageError("--index: only a plain .jsonl pack is read by offset and can be indexed")
    releases, unread, yanked = _release_file(args.releases) if args.releases else ([], {}, [])
    result = mine(
        args.sources,
        excerpt_lines=args.excerpt_lines,
        native=args.native,
        history=args.history,
        bounds=args.bounds,
        releases=releases,
        unread=unread,
        yanked=yanked,
        bounds_cache=Path(args.bounds_cache) if args.bounds_cache else None,
        history_from=_history_from(args.history_from, args.summary) if args.history_from else None,
        max_classes=args.max_classes,
    )
    try:
        size = write_pack(result.records, output, fmt)
        if args.index:
            from errkb.packs import write_index

            write_index(output, label=output.name)
        if args.releases:
            from errkb.packs import releases_path

            body = {"schema": RELEASES_SCHEMA, "distributions": result.summary["releases"]}
            releases_path(output).write_text(
                json.dumps(body, indent=1, ensure_ascii=False) + "\n", encoding="utf-8"
            )
    except OSError as exc:
        raise UsageError(f"{output}: cannot write the pack ({exc.strerror or exc})") from None
    summary = {**result.summary, "output": str(output), "format": fmt, "bytes": size}
    if args.summary:
        try:
            Path(args.summary).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        except OSError as exc:
            raise UsageError(
                f"{args.summary}: cannot write the summary ({exc.strerror or exc})"
            ) from None
    print(_text(summary))
    return EXIT_OK


def _history_from(pack: str, summary: str | None) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """``--history-from PACK``: its skew records, and the history counts of ``--summary``."""
    from errkb.exceptions import UsageError

    try:
        lines = Path(pack).read_text(encoding="utf-8").splitlines()
        kept = [r for r in map(json.loads, filter(None, lines)) if "skew" in r]
        counts = (
            json.loads(Path(summary).read_text(encoding="utf-8")).get("history", {})
            if summary
            else {}
        )
    except (OSError, ValueError) as exc:
        raise UsageError(f"--history-from {pack}: cannot read it or --summary ({exc})") from None
    return kept, counts


def _release_file(name: str) -> tuple[list[str], dict[str, str], list[str]]:
    """``--releases FILE``: one release a line, ``VERSION [yanked] [# why it was not read]``."""
    from errkb.exceptions import UsageError

    try:
        text = Path(name).read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--releases {name}: cannot read it ({exc.strerror or exc})") from None
    releases: list[str] = []
    unread: dict[str, str] = {}
    yanked: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        head, _, why = line.partition("#")
        words = head.split()
        if not words:
            continue
        if len(words) > 2 or words[1:] not in ([], ["yanked"]):
            raise UsageError(
                f"--releases {name}: line {number}: expected 'VERSION [yanked] [# why]', "
                f"got {line.strip()!r}"
            )
        releases.append(words[0])
        if len(words) == 2:
            yanked.append(words[0])
        if why.strip():
            unread[words[0]] = why.strip()
    return releases, unread, yanked


def _text(summary: dict[str, Any]) -> str:
    """The summary as a few plain lines."""
    from errkb._sanitize import clean

    lines = [
        f"{s['distribution']} {s['version'] or '(version unknown)'} ({s['archive']}): "
        f"{s['sites']} sites"
        for s in summary["sources"]
    ]
    kinds = ", ".join(f"{k} {n}" for k, n in summary["kinds"].items()) or "none"
    languages = ", ".join(f"{k} {n}" for k, n in summary["languages"].items()) or "none"
    dropped = ", ".join(f"{k} {n}" for k, n in summary["dropped"].items()) or "none"
    lines += [
        f"{summary['records']} records ({kinds}; {languages})",
        f"dropped: {dropped}",
        *(
            [f"version skew: {', '.join(f'{k} {n}' for k, n in summary['history'].items())}"]
            if summary.get("history")
            else []
        ),
        (
            f"wrote {summary['output']} ({summary['format']}, {summary['bytes']:,} bytes) "
            f"in {summary['seconds']} s"
        ),
    ]
    return "\n".join(clean(line) for line in lines)
