"""errkb benchmarks: every figure measured side by side with its baseline, in one run.

Prints a table and writes it to bench-results/bench.md (and .json). Run with `nox -s bench`.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SEED = (
    "The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    "stored in KV cache (12288). Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine."
)
RUNS = int(os.environ.get("ERRKB_BENCH_RUNS", "30"))
OUT = Path(os.environ.get("ERRKB_BENCH_OUT", "bench-results"))


def _time_command(code: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
    return time.perf_counter() - t0


def startup() -> list[dict[str, object]]:
    """Interpreter start-up: bare, with errkb installed, with rich.traceback installed."""
    cases = {
        "python -c pass (baseline)": "pass",
        "import errkb; errkb.install()": "import errkb; errkb.install()",
        "rich.traceback.install()": "import rich.traceback; rich.traceback.install()",
    }
    samples: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(3):  # warm the file cache
        for code in cases.values():
            _time_command(code)
    for _ in range(RUNS):  # interleaved, so drift hits every case alike
        for name, code in cases.items():
            samples[name].append(_time_command(code))
    base = statistics.median(samples["python -c pass (baseline)"])
    rows = []
    for name, values in samples.items():
        med = statistics.median(values)
        rows.append(
            {
                "benchmark": "start-up",
                "case": name,
                "median_ms": round(med * 1000, 2),
                "vs_baseline_ms": round((med - base) * 1000, 2),
            }
        )
    return rows


_COLD = f"""
import io, time, errkb
from errkb.hook import diagnose_and_render
from errkb.options import Options
try:
    raise ValueError({SEED!r})
except ValueError as exc:
    t0 = time.perf_counter()
    diagnose_and_render(exc, Options(file=io.StringIO(), probes=False))
    t1 = time.perf_counter()
    diagnose_and_render(exc, Options(file=io.StringIO(), probes=False))
    t2 = time.perf_counter()
print(t1 - t0, t2 - t1)
"""


def diagnosis_latency() -> list[dict[str, object]]:
    """Exception to end of diagnosis for the seed's error: cold (first in the process), warm."""
    cold, warm = [], []
    for _ in range(max(5, RUNS // 3)):
        out = subprocess.run(
            [sys.executable, "-c", _COLD], check=True, capture_output=True, text=True
        )
        c, w = map(float, out.stdout.split())
        cold.append(c)
        warm.append(w)
    return [
        {
            "benchmark": "diagnosis",
            "case": "seed error, cold",
            "median_ms": round(statistics.median(cold) * 1000, 2),
        },
        {
            "benchmark": "diagnosis",
            "case": "seed error, warm",
            "median_ms": round(statistics.median(warm) * 1000, 2),
        },
    ]


def main() -> None:
    rows = startup() + diagnosis_latency()
    OUT.mkdir(exist_ok=True)
    lines = ["| benchmark | case | median (ms) | vs baseline (ms) |", "| --- | --- | ---: | ---: |"]
    lines += [
        f"| {r['benchmark']} | {r['case']} | {r['median_ms']} | {r.get('vs_baseline_ms', '')} |"
        for r in rows
    ]
    table = "\n".join(lines)
    header = (
        f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {RUNS} runs per start-up case\n\n"
    )
    (OUT / "bench.md").write_text(header + table + "\n")
    (OUT / "bench.json").write_text(json.dumps(rows, indent=2))
    print(header + table)


if __name__ == "__main__":
    main()
