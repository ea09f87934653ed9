"""The output of `errkb explain` on every record example, for before/after comparisons.

A refactor that means to change no behaviour proves it with this script: take a snapshot on
the old code, one on the new, and diff them.

    python benchmarks/explain_snapshot.py write OUT.json [--records records]
    python benchmarks/explain_snapshot.py diff OLD.json NEW.json

`write` runs `errkb explain --json TEXT` and `errkb explain TEXT` (plain, 100 columns, no
colour) with probes off, and `errkb explain --json TEXT` with probes on (the GPU reading of
this machine reaches the advice: compare snapshots taken on one machine), in this process, for
every example of every record, and stores each output verbatim with its exit status. The
records are read here as plain JSON, not through errkb, so both sides read the same texts.
`diff` prints every case whose output differs and exits 1 when any does.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
from pathlib import Path


def _examples(folder: Path) -> list[tuple[str, str]]:
    cases = []
    for path in sorted(folder.rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for item in data if isinstance(data, list) else [data]:
            record = item.get("record", item)
            for i, text in enumerate(record.get("examples", ())):
                cases.append((f"{record['id']}#{i}", text))
    return cases


def _run(argv: list[str]) -> dict[str, object]:
    from errkb.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            status = main(argv)
        except SystemExit as exc:
            status = exc.code
    return {"status": status, "stdout": out.getvalue(), "stderr": err.getvalue()}


def write(target: Path, records: Path) -> None:
    os.environ.update({"COLUMNS": "100", "NO_COLOR": "1", "TERM": "dumb"})
    os.environ.pop("FORCE_COLOR", None)
    snapshot: dict[str, object] = {}
    for case, text in _examples(records):
        snapshot[f"{case} --json"] = _run(["explain", "--no-probes", "--json", text])
        snapshot[f"{case} plain"] = _run(["explain", "--no-probes", "--no-color", text])
        # Probes on: this machine's GPU reading (none, on CI) reaches the advice too.
        snapshot[f"{case} --json probed"] = _run(["explain", "--json", text])
    target.write_text(json.dumps(snapshot, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(snapshot)} outputs written to {target}")


def diff(old: Path, new: Path) -> int:
    a = json.loads(old.read_text(encoding="utf-8"))
    b = json.loads(new.read_text(encoding="utf-8"))
    changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
    for key in changed:
        print(f"differs: {key}")
    print(f"{len(a)} cases before, {len(b)} after, {len(changed)} differ")
    return 1 if changed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write")
    w.add_argument("target", type=Path)
    w.add_argument("--records", type=Path, default=Path("records"))
    d = sub.add_parser("diff")
    d.add_argument("old", type=Path)
    d.add_argument("new", type=Path)
    args = parser.parse_args()
    if args.command == "write":
        write(args.target, args.records)
        return 0
    return diff(args.old, args.new)


if __name__ == "__main__":
    sys.exit(main())
