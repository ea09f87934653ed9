"""Load test of `errkb serve`: POST /v1/explain on loopback, beside the CLI's per-call time.

Starts `errkb serve` in a child process, then CLIENTS threads each send REQUESTS requests on
one keep-alive connection (the seed's message, rendered as vLLM prints it). Reports requests
per second, p50 and p99 latency and the errors (any status but 200, or a wrong body), and the
median wall time of `errkb explain --json --no-probes "<msg>"`: what a tool pays per message
without the server. Writes bench-results/serve.md and serve.json; `benchmarks/run.py serve`
runs it with the other benchmarks.

    python benchmarks/serve.py [--clients 8] [--requests 500] [--cli-runs 20]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

SEED = (
    "The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    "stored in KV cache (12288). Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine."
)
OUT = Path(os.environ.get("ERRKB_BENCH_OUT", "bench-results"))
BODY = json.dumps({"text": SEED, "what_if": {"gpu_memory": "24GiB"}}).encode()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(port: int) -> subprocess.Popen[bytes]:
    child = subprocess.Popen(
        [sys.executable, "-m", "errkb", "serve", "--port", str(port), "--quiet"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/healthz")
            if conn.getresponse().status == 200:
                return child
        except OSError:  # noqa: PERF203 - not up yet
            time.sleep(0.1)
    child.kill()
    raise RuntimeError(child.communicate()[1].decode())


def _client(port: int, count: int, latencies: list[float], errors: list[str]) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Content-Type": "application/json"}
    for _ in range(count):
        t0 = time.perf_counter()
        try:
            conn.request("POST", "/v1/explain", body=BODY, headers=headers)
            response = conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            errors.append(repr(exc))
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            continue
        latencies.append(time.perf_counter() - t0)
        if response.status != 200 or b"vllm-kv-cache-max-seq-len" not in data:
            errors.append(f"{response.status}: {data[:200]!r}")


def load(clients: int, requests: int) -> dict[str, float]:
    """Requests per second, p50, p99 (ms) and errors of CLIENTS x REQUESTS explains."""
    port = _free_port()
    server = _start(port)
    try:
        warm: list[float] = []
        _client(port, 20, warm, [])
        latencies: list[float] = []
        errors: list[str] = []
        threads = [
            threading.Thread(target=_client, args=(port, requests, latencies, errors))
            for _ in range(clients)
        ]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
    finally:
        server.terminate()
        server.communicate(timeout=30)
    cuts = statistics.quantiles(latencies, n=100)
    return {
        "requests": clients * requests,
        "wall_s": round(wall, 2),
        "requests_per_s": round(len(latencies) / wall, 1),
        "p50_ms": round(statistics.median(latencies) * 1000, 2),
        "p99_ms": round(cuts[98] * 1000, 2),
        "errors": len(errors),
        "first_error": errors[0] if errors else "",
    }


def cli(runs: int) -> dict[str, float]:
    """Median and p99-ish (max of runs) wall time of one `errkb explain --json --no-probes`."""
    argv = [sys.executable, "-m", "errkb", "explain", "--json", "--no-probes", SEED]
    samples = []
    for i in range(runs + 2):
        t0 = time.perf_counter()
        done = subprocess.run(argv, capture_output=True, check=False)
        if done.returncode != 0:
            raise subprocess.CalledProcessError(done.returncode, argv, done.stdout, done.stderr)
        if i >= 2:  # two untimed runs warm the disk cache
            samples.append(time.perf_counter() - t0)
    return {
        "runs": runs,
        "median_ms": round(statistics.median(samples) * 1000, 1),
        "max_ms": round(max(samples) * 1000, 1),
    }


def rows(clients: int = 8, requests: int = 500, cli_runs: int = 20) -> list[dict[str, object]]:
    """The figures as rows of benchmarks/run.py's table."""
    served = load(clients, requests)
    alone = cli(cli_runs)
    return [
        {
            "benchmark": "serve",
            "case": f"POST /v1/explain, {clients} clients x {requests}, seed message "
            f"({served['requests_per_s']} requests/s, {served['errors']} errors)",
            "median_ms": served["p50_ms"],
            "p99_ms": served["p99_ms"],
            "requests_per_s": served["requests_per_s"],
            "errors": served["errors"],
        },
        {
            "benchmark": "serve",
            "case": f"errkb explain --json --no-probes (one process per call, {cli_runs} runs)",
            "median_ms": alone["median_ms"],
            "p99_ms": "",
            "max_ms": alone["max_ms"],
        },
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--cli-runs", type=int, default=20)
    args = parser.parse_args()
    served = load(args.clients, args.requests)
    alone = cli(args.cli_runs)
    figures = {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "serve": {"clients": args.clients, "requests_per_client": args.requests, **served},
        "cli": alone,
    }
    table = "\n".join(
        [
            (
                f"Python {figures['python']}, {figures['cpus']} CPUs; server and clients on one "
                "machine, loopback\n"
            ),
            "| case | requests/s | p50 (ms) | p99 (ms) | errors |",
            "| --- | ---: | ---: | ---: | ---: |",
            (
                f"| POST /v1/explain, {args.clients} clients x {args.requests} requests | "
                f"{served['requests_per_s']} | {served['p50_ms']} | {served['p99_ms']} | "
                f"{served['errors']} |"
            ),
            (
                f"| errkb explain --json --no-probes, one process a call (median of "
                f"{alone['runs']}) | {round(1000 / alone['median_ms'], 1)} (one at a time) | "
                f"{alone['median_ms']} | max {alone['max_ms']} | 0 |"
            ),
        ]
    )
    OUT.mkdir(exist_ok=True)
    (OUT / "serve.md").write_text(table + "\n", encoding="utf-8")
    (OUT / "serve.json").write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    print(table)
    if served["errors"]:
        print(f"errors: {served['errors']}, first: {served['first_error']}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
