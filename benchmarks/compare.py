"""Two source trees, the same benchmarks, side by side: did a change cost speed?

    python benchmarks/compare.py OLD_TREE NEW_TREE [--rounds 5] [BENCH ...]

Runs `benchmarks/run.py BENCH...` (default: startup diagnosis lookup scan) `--rounds` times
for each tree, alternating, with the tree first on PYTHONPATH, and prints each case's median
over the rounds for both trees and their ratio. It writes the table to
bench-results/compare.md. Smaller figures than the full bench keep rounds short (override with
ERRKB_BENCH_RUNS, ERRKB_BENCH_LOOKUP_SIZES, ERRKB_BENCH_SCAN_MB).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULTS = {
    "ERRKB_BENCH_RUNS": "15",
    "ERRKB_BENCH_LOOKUP_SIZES": "1000,10000",
    "ERRKB_BENCH_SCAN_MB": "50",
}


def _round(tree: Path, benches: list[str]) -> list[dict[str, object]]:
    with tempfile.TemporaryDirectory() as out:
        env = {**DEFAULTS, **os.environ, "PYTHONPATH": str(tree), "ERRKB_BENCH_OUT": out}
        subprocess.run(
            [sys.executable, str(HERE / "run.py"), *benches],
            check=True,
            env=env,
            cwd=tree,
            stdout=subprocess.DEVNULL,
        )
        return json.loads((Path(out) / "bench.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("benches", nargs="*", default=["startup", "diagnosis", "lookup", "scan"])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    samples: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for i in range(args.rounds):
        for side, tree in (("old", args.old), ("new", args.new)):
            print(f"round {i + 1}/{args.rounds}: {side} ({tree})", file=sys.stderr)
            for row in _round(tree.resolve(), args.benches):
                key = f"{row['benchmark']} | {row['case']}"
                samples[side].setdefault(key, []).append(float(row["median_ms"]))
    lines = [
        f"Median of {args.rounds} rounds, each the bench's own median; ms. "
        f"old = {args.old}, new = {args.new}.",
        "",
        "| benchmark | case | old | new | new / old |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for key in samples["old"]:
        if key not in samples["new"]:
            continue
        old = statistics.median(samples["old"][key])
        new = statistics.median(samples["new"][key])
        ratio = f"{new / old:.2f}" if old else ""
        lines.append(f"| {key} | {old:.4g} | {new:.4g} | {ratio} |")
    table = "\n".join(lines)
    print(table)
    out = Path("bench-results")
    out.mkdir(exist_ok=True)
    (out / "compare.md").write_text(table + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
