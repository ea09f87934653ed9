"""A generated fleet of logs: hosts and days, plain and gzip, with known errors planted.

Used by tests/integration/test_fleet.py and benchmarks/fleet.py. The lines are real formats:

- vLLM's logger (``%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s`` with
  ``%m-%d %H:%M:%S``, the format the stand-in vLLM of tests/data/pasted/generate.py logs with),
  written by Python's own ``logging.Formatter``;
- Kubernetes' container log files (CRI: ``<RFC 3339 time> stdout F <line>``), under
  ``pods/<namespace>_<pod>_<uid>/<container>/0.log``;
- syslog (``Mmm dd HH:MM:SS host program[pid]: <line>``), as rsyslog writes a unit's output.

The planted errors are the real tool outputs of tests/data/pasted (vLLM's engine core failing
with its traceback, a Ray worker's, torchrun's ``--tee``, Python logging's), their clocks moved
to the file's time; the unknown errors are log lines no record knows. In a plain file a planted
traceback is put across each multiple of :data:`STRADDLE` bytes, where a fleet scan with
``split=STRADDLE`` cuts the file.
"""

from __future__ import annotations

import gzip
import logging
import os
import random
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

PASTED = Path(__file__).resolve().parent / "data" / "pasted"
#: The pasted outputs planted as known errors (several lines each, tracebacks among them).
PLANTED = (
    "log-vllm-engine-core-raw.txt",
    "log-ray-worker-plain.txt",
    "log-torchrun-tee.txt",
    "log-plain-timestamp.txt",
)
#: Error lines that no record knows, in vLLM's format ({} is a number or an id).
UNKNOWN = (
    ("serving_chat.py", 204, "Error in preprocessing prompt inputs"),
    ("async_llm_engine.py", 61, "Engine background task failed"),
    ("serving_completion.py", 160, "KeyError: 'cmpl-{id}'"),
    ("scheduler.py", 1120, "RuntimeError: sequence group {n} exceeded its budget of {n} tokens"),
)
#: Ordinary lines: the metrics line of vllm/engine/metrics.py (its wording) and request and
#: route lines as vllm/entrypoints words them.
NOISE = (
    (
        "metrics.py",
        406,
        (
            "Avg prompt throughput: {f} tokens/s, Avg generation throughput: {f} tokens/s, "
            "Running: {n} reqs, Swapped: 0 reqs, Pending: {n} reqs, GPU KV cache usage: {f}%, "
            "CPU KV cache usage: 0.0%."
        ),
    ),
    ("logger.py", 39, "Received request cmpl-{id}: prompt: 'Hello', params: SamplingParams(n=1)"),
    ("async_llm_engine.py", 123, "Finished request cmpl-{id}."),
    ("launcher.py", 28, "Route: /v1/completions, Methods: POST"),
)
#: A plain file has a planted traceback across each multiple of this many bytes.
STRADDLE = 64 << 10
_PASTED_CLOCK = "11-30 14:02:11"


class _Writer:
    """Lines of one file in one of the three formats, with the clock moving on."""

    def __init__(self, kind: str, host: str, at: datetime, rng: random.Random) -> None:
        self.kind, self.host, self.at, self.rng = kind, host, at, rng
        self.formatter = logging.Formatter(
            "%(levelname)s %(asctime)s [%(filename)s:%(lineno)d] %(message)s", "%m-%d %H:%M:%S"
        )
        self.formatter.converter = time.gmtime  # the fleet's clocks are UTC

    def _wrap(self, line: str) -> str:
        if self.kind == "k8s":
            stamp = self.at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{self.at.microsecond:06d}000Z"
            return f"{stamp} stdout F {line}"
        if self.kind == "syslog":
            return f"{self.at.strftime('%b')} {self.at.day:2d} {self.at:%H:%M:%S} {self.host} vllm[122]: {line}"
        return line

    def vllm(self, level: str, filename: str, lineno: int, message: str) -> str:
        record = logging.LogRecord(
            "vllm", logging.getLevelName(level), filename, lineno, message, None, None
        )
        record.filename = filename
        record.created = self.at.timestamp()
        return self._wrap(self.formatter.format(record))

    def fill(self, template: str) -> str:
        rng = self.rng
        return (
            template.replace("{f}", f"{rng.uniform(0, 900):.1f}", 3)
            .replace("{n}", str(rng.randint(0, 512)), 1)
            .replace("{n}", str(rng.randint(0, 512)), 1)
            .replace("{id}", f"{rng.getrandbits(64):016x}")
        )

    def noise(self) -> str:
        filename, lineno, message = self.rng.choice(NOISE)
        self.at += timedelta(seconds=self.rng.randint(0, 2))
        return self.vllm("INFO", filename, lineno, self.fill(message))

    def unknown(self) -> str:
        filename, lineno, message = self.rng.choice(UNKNOWN)
        return self.vllm("ERROR", filename, lineno, self.fill(message))

    def planted(self, name: str) -> list[str]:
        text = (PASTED / name).read_text(encoding="utf-8")
        text = text.replace(_PASTED_CLOCK, self.at.strftime("%m-%d %H:%M:%S"))
        text = text.replace("2026-11-30 14:02:11", self.at.strftime("%Y-%m-%d %H:%M:%S"))
        return [self._wrap(line) for line in text.splitlines()]


def make_fleet(
    root: Path,
    *,
    hosts: int = 6,
    days: int = 3,
    files: int = 12,
    file_bytes: int = 60_000,
    seed: int = 0,
    errors: float = 0.004,
    straddle: int | None = STRADDLE,
) -> list[Path]:
    """Write a fleet under ``root``; the files written, in name order.

    ``hosts`` hosts (the last but one on Kubernetes, the last through syslog; the others in
    ``<host>/<day>/``), ``days`` days ending yesterday (UTC), ``files`` files a host a day of
    about ``file_bytes`` bytes each (a random size up to twice that), one in three gzipped;
    a planted failure starts at a line with the chance ``errors``, an unknown error line half
    as often again, and in a plain file another straddles each multiple of ``straddle`` bytes
    (None: none).
    """
    rng = random.Random(seed)
    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    written: list[Path] = []
    for h in range(hosts):
        kind = "k8s" if h == hosts - 2 else "syslog" if h == hosts - 1 else "plain"
        host = f"gpu-node-{h + 1}"
        for d in range(days):
            day = today - timedelta(days=days - d)
            for f in range(files):
                at = day + timedelta(hours=rng.randint(0, 23), minutes=rng.randint(0, 59))
                writer = _Writer(kind, host, at, rng)
                zipped = f % 3 == 2
                if kind == "k8s":
                    path = root / "pods" / f"serving_{host}_{seed}{d}{f:03d}" / "vllm" / "0.log"
                elif kind == "syslog":
                    path = root / "syslog" / f"{day:%Y-%m-%d}" / f"messages-{f:03d}"
                else:
                    path = root / host / f"{day:%Y-%m-%d}" / f"vllm-{f:03d}.log"
                if zipped:
                    path = path.with_name(path.name + ".gz")
                size = rng.randint(file_bytes // 4, file_bytes * 2)
                lines = _lines(writer, size, errors, None if zipped else straddle)
                path.parent.mkdir(parents=True, exist_ok=True)
                data = ("\n".join(lines) + "\n").encode()
                if zipped:
                    data = gzip.compress(data, compresslevel=1, mtime=0)
                path.write_bytes(data)
                stamp = writer.at.timestamp() + 60
                os.utime(path, (stamp, stamp))
                written.append(path)
    return sorted(written)


def _lines(writer: _Writer, size: int, errors: float, straddle: int | None) -> list[str]:
    rng = writer.rng
    lines: list[str] = []
    held = 0
    mark = straddle or size + 1
    while held < size:
        roll = rng.random()
        if straddle and held + 400 >= mark:
            block = writer.planted(rng.choice(PLANTED))
            mark += straddle
        elif roll < errors:
            block = writer.planted(rng.choice(PLANTED))
        elif roll < errors * 2.5:
            block = [writer.unknown()]
        else:
            block = [writer.noise()]
        lines.extend(block)
        held += sum(len(line) + 1 for line in block)
        while straddle and held >= mark:
            mark += straddle
    return lines
