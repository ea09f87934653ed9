"""The fleet scan: serial ``errkb scan`` against ``--workers 2``, with zgrep as the anchor.

    python benchmarks/fleet.py [--size MB] [--runs N] [--keep DIR]

Generates a fleet (tests/fleet_data.py: eight hosts, four days, one file in three gzipped,
vLLM's log format with the real failures of tests/data/pasted planted in it) of about ``--size``
MB uncompressed into a temporary folder (never committed; ``--keep DIR`` writes it there and
keeps it, or, when DIR holds files, scans those and generates nothing), then times,
interleaved, each in a child process:

- ``errkb scan ROOT --workers 0 --json``: every file in one process, one after another;
- ``errkb scan ROOT --workers 2 --json``: Dask's single-machine scheduler on a pool of two
  worker processes, the default (its start-up is in the time);
- ``errkb scan ROOT --workers 2 --scheduler local-cluster --json``: a ``distributed``
  LocalCluster of two worker processes (its start-up too);
- ``zgrep -c -F -f needles FILES``: each hand-written record's longest literal, the anchor
  (one process, like the serial scan).

and, in this process, the same two workers as one process with two threads
(``LocalCluster(n_workers=1, threads_per_worker=2)``): which is faster decides the default.
Prints rows (MB/s of the uncompressed bytes, the speed-up over serial) and writes
bench-results/fleet.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent / "tests")]

from fleet_data import make_fleet  # noqa: E402
from run import OUT, _medians, needles_file  # noqa: E402

HOSTS, DAYS, FILES = 8, 4, 8
#: A planted failure starts at this share of lines (one in 10,000: a fleet that mostly works;
#: each is a vLLM, Ray, torchrun or Python logging failure of 10 to 60 lines).
ERRORS = 0.0001


def generate(root: Path, size_mb: int) -> list[Path]:
    """A fleet of about ``size_mb`` MB uncompressed (a file's mean size is 1.125 its base)."""
    file_bytes = int(size_mb * 1e6 / (HOSTS * DAYS * FILES) / 1.125)
    return make_fleet(
        root,
        hosts=HOSTS,
        days=DAYS,
        files=FILES,
        file_bytes=file_bytes,
        errors=ERRORS,
        straddle=None,
    )


def _threads(root: Path) -> float:
    """Seconds for the fleet on one worker process with two threads (its start-up included)."""
    from distributed import Client, LocalCluster

    from errkb.fleet._run import FleetOptions, run

    t0 = time.perf_counter()
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=2, processes=True, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        run([str(root)], FleetOptions(), client=client)
    return time.perf_counter() - t0


def fleet_rows(size_mb: int, runs: int = 1, keep: Path | None = None) -> list[dict[str, object]]:
    """Generate, time, and return the rows (also written to bench-results/fleet.json)."""
    tmp = Path(tempfile.mkdtemp(prefix="errkb-fleet-"))
    root = keep or tmp / "fleet"
    try:
        t0 = time.perf_counter()
        if keep is not None and keep.is_dir() and any(keep.iterdir()):
            files = sorted(f for f in keep.rglob("*") if f.is_file())  # kept from a run before
        else:
            files = generate(root, size_mb)
        made = time.perf_counter() - t0
        needles = tmp / "needles.txt"
        needles_file(needles)
        scan = [sys.executable, "-m", "errkb", "scan", str(root), "--json"]
        cases = {
            "serial": ([*scan, "--workers", "0"], None),
            "workers 2": ([*scan, "--workers", "2"], None),
            "workers 2, local-cluster": (
                [*scan, "--workers", "2", "--scheduler", "local-cluster"],
                None,
            ),
            "zgrep": (["zgrep", "-c", "-F", "-f", str(needles), *map(str, files)], None),
        }
        done = subprocess.run(cases["serial"][0], capture_output=True, check=True, text=True)
        result = json.loads(done.stdout)
        medians = _medians(cases, runs)
        threads = _threads(root)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    size = result["bytes"]
    on_disk = sum(f.stat().st_size for f in files) if keep else None
    serial = medians["serial"]
    rows: list[dict[str, object]] = []
    for name, seconds in [*medians.items(), ("1 process, 2 threads", threads)]:
        rows.append(
            {
                "benchmark": "fleet",
                "case": f"{name}: {len(files)} files, {size / 1e6:,.0f} MB uncompressed",
                "median_ms": round(seconds * 1000),
                "mb_per_s": round(size / 1e6 / seconds, 1),
                "anchor": f"{serial / seconds:.2f}x the serial scan's speed",
            }
        )
    rows.append(
        {
            "benchmark": "fleet",
            "case": "the fleet's findings",
            "median_ms": "",
            "anchor": f"{sum(g['count'] for g in result['groups']):,} known errors in "
            f"{len(result['groups'])} kinds, {len(result['unknown'])} unknown shapes, "
            f"{result['lines']:,} lines; generated in {made:.0f} s"
            + (f"; {on_disk / 1e6:,.0f} MB on disk" if on_disk else ""),
        }
    )
    OUT.mkdir(exist_ok=True)
    (OUT / "fleet.json").write_text(json.dumps(rows, indent=2) + "\n")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--size", type=int, default=2048, help="MB uncompressed (default 2048)")
    parser.add_argument("--runs", type=int, default=1, help="timed runs of each case")
    parser.add_argument("--keep", type=Path, help="generate the fleet here and keep it")
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs; load average {os.getloadavg()}", file=sys.stderr)
    for row in fleet_rows(args.size, args.runs, args.keep):
        print(
            f"| {row['case']} | {row['median_ms']} | {row.get('mb_per_s', '')} | {row['anchor']} |"
        )


if __name__ == "__main__":
    main()
