"""How often errkb names the right record for errors users really reported.

    python benchmarks/corpus.py [--records PATH]... [--corpus FILE] [--json OUT]

Reads ``tests/data/reports/corpus.jsonl`` (real error texts from public issue trackers, each
with its URL; how they were chosen is in ``tests/data/reports/README.md``) and runs each text
through :func:`errkb.diagnosis.explain`, the path ``errkb explain`` takes for pasted text,
without probes, in two forms: the whole paste (``text``) and its error line alone
(``errorLine``, the exception line with its class). Each form's top finding is then judged
against the labels written from the text alone:

- recognised: the top record's library is the distribution that raised the error
  (``raisedBy``) or, for an error Python raises itself, the distribution the message names
  (``subject``), and the record matches the entry's ``errorLine`` on its own, as errkb's
  matcher matches any message (whole, or cut short after the pattern's head);
- false match: there is a top finding, but it fails that test;
- unknown: no finding at all.

Prints a table per library (the library whose tracker the report came from) and the totals,
one for each form, and the entries whose paste does worse than their error line (recognised
beats unknown, which beats a false match), and writes every entry's outcome to ``--json`` when
given (the paste's at the top level of each result, the error line's under ``"line"``). The records used are whatever the
registry loads (the shipped ones, plus ``--records``), so the same corpus measures today's
records and any pack added later.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "reports" / "corpus.jsonl"

#: Spellings of one distribution seen in labels, record folders and repositories.
ALIASES = {
    "pytorch": "torch",
    "flash_attn": "flash-attn",
    "flash-attention": "flash-attn",
    "flash_attention": "flash-attn",
    "huggingface-hub": "huggingface_hub",
    "hub": "huggingface_hub",
}


def normalise(name: str | None) -> str:
    """One spelling per distribution: lower case, aliases folded (``pytorch`` is ``torch``)."""
    if not name:
        return ""
    key = name.strip().lower()
    return ALIASES.get(key, ALIASES.get(key.replace("-", "_"), key))


def load(path: Path) -> list[dict[str, Any]]:
    """The corpus entries, one JSON object a line."""
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def judge(entry: dict[str, Any], diagnosis: Any) -> dict[str, Any]:
    """The outcome of one entry: recognised, false match or unknown, with what was found.

    The top record must be of the distribution that raised the error (or that a Python error
    names) and must match the error line on its own, as errkb matches any message: the whole
    message, or the message cut short after the pattern's head (a label or an excerpt cut the
    line; a paste joined a message's lines). ``pattern_in_error_line`` keeps the stricter test
    of the first measurements, a plain search of the whole pattern in the line.
    """
    from errkb._patterns import compile_pattern, search
    from errkb.match import Matcher

    if diagnosis is None or not diagnosis.findings:
        return {"outcome": "unknown", "record": None, "library": None}
    record = diagnosis.top.record
    library = normalise(record.library)
    wanted = {normalise(entry["raisedBy"]), normalise(entry.get("subject"))} - {""}
    try:
        in_line = search(compile_pattern(record.message_pattern), entry["errorLine"]) is not None
    except Exception:  # a pattern that does not compile or times out does not match
        in_line = False
    matches_line = bool(Matcher([record]).match(entry["errorLine"]))
    outcome = "recognised" if library in wanted and matches_line else "false match"
    return {
        "outcome": outcome,
        "record": record.slug,
        "library": library,
        "library_ok": library in wanted,
        "pattern_in_error_line": in_line,
        "matches_error_line": matches_line,
    }


#: How good an outcome is, to tell a paste that does worse than its error line.
RANK = {"recognised": 2, "unknown": 1, "false match": 0}


def run(entries: list[dict[str, Any]], records: list[str]) -> list[dict[str, Any]]:
    """Explain every entry in both forms and judge them; one result an entry, in corpus order."""
    from errkb.diagnosis import explain
    from errkb.options import Options
    from errkb.registry import Registry, default_registry

    registry = Registry.from_paths(records) if records else default_registry()
    options = Options(probes=False)
    results = []
    for entry in entries:
        paste = judge(entry, explain(entry["text"], options=options, registry=registry))
        line = judge(entry, explain(entry["errorLine"], options=options, registry=registry))
        results.append({"id": entry["id"], "url": entry["url"], **paste, "line": line})
    return results


def worse(results: list[dict[str, Any]]) -> list[str]:
    """The ids of the entries whose paste is judged worse than their error line alone."""
    return [r["id"] for r in results if RANK[r["outcome"]] < RANK[r["line"]["outcome"]]]


def table(entries: list[dict[str, Any]], outcomes: list[str]) -> str:
    """A markdown table: per tracker library, n and the share of each outcome, then totals."""
    by_lib: dict[str, Counter[str]] = {}
    for entry, outcome in zip(entries, outcomes, strict=True):
        by_lib.setdefault(entry["library"], Counter())[outcome] += 1
    total: Counter[str] = Counter(outcomes)
    lines = [
        "| library | n | recognised | false match | unknown |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]

    def row(name: str, c: Counter[str]) -> str:
        n = sum(c.values())
        pct = [f"{100 * c[k] / n:.0f}% ({c[k]})" for k in ("recognised", "false match", "unknown")]
        return f"| {name} | {n} | " + " | ".join(pct) + " |"

    lines += [row(lib, c) for lib, c in by_lib.items()]
    lines.append(row("**all**", total))
    return "\n".join(lines)


def _commit() -> str:
    """The commit of the errkb measured: ``ERRKB_COMMIT`` when set (a tree outside git), else HEAD."""
    if os.environ.get("ERRKB_COMMIT"):
        return os.environ["ERRKB_COMMIT"]
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", action="append", default=[], help="more records or packs")
    parser.add_argument("--corpus", type=Path, default=CORPUS)
    parser.add_argument("--json", type=Path, help="write each entry's outcome here")
    args = parser.parse_args(argv)
    entries = load(args.corpus)
    results = run(entries, args.records)
    print(f"corpus: {args.corpus.name}, {len(entries)} entries; errkb at commit {_commit()}")
    print("\nThe error line alone (errorLine):\n")
    print(table(entries, [r["line"]["outcome"] for r in results]))
    print("\nThe whole paste (text):\n")
    print(table(entries, [r["outcome"] for r in results]))
    behind = worse(results)
    print(f"\nPastes judged worse than their error line: {len(behind)}", *behind)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(
            json.dumps({"commit": _commit(), "records": args.records, "results": results}, indent=2)
            + "\n",
            encoding="utf-8",
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
