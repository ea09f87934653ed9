"""`errkb scan` in a child process: gzip files, standard input, exit statuses, the engine."""

from __future__ import annotations

import gzip
import io
import json

import pytest
from helpers import NOISE, run_cli, serve_log

from errkb.exceptions import UsageError
from errkb.scan import scan_stream


def test_cli_scans_gzip_and_prints_json(tmp_path):
    """errkb scan file.gz --json reads gzip directly; exit 0 when something was found."""
    path = tmp_path / "serve.log.gz"
    path.write_bytes(gzip.compress(serve_log().encode()))
    proc = run_cli("scan", "--json", str(path))
    assert 0 == proc.returncode, proc.stderr
    data = json.loads(proc.stdout)
    assert "errkb.scan/1" == data["schema"]
    assert {"vllm-kv-cache-max-seq-len": 2, "vllm-no-cache-blocks": 1} == {
        g["id"]: g["count"] for g in data["groups"] if g["id"].startswith("vllm-")
    }


def test_cli_scans_stdin():
    """errkb scan - reads standard input, plain or gzip."""
    proc = run_cli("scan", "--json", "-", stdin=gzip.compress(serve_log().encode()))
    assert 0 == proc.returncode, proc.stderr
    assert 50 == json.loads(proc.stdout)["lines"]
    plain = run_cli("scan", "-", stdin=serve_log().encode())
    assert b"vllm-kv-cache-max-seq-len  (first at line 10, 30)" in plain.stdout


def test_cli_scan_nothing_found_exits_1_unreadable_exits_2(tmp_path):
    """Exit 1 when no known error is in the log, 2 when the file cannot be read."""
    clean = tmp_path / "clean.log"
    clean.write_text(NOISE.format(n=1) + "\n")
    assert 1 == run_cli("scan", str(clean)).returncode
    assert 2 == run_cli("scan", str(tmp_path / "missing.log")).returncode


def test_cli_scan_engine_from_the_environment():
    """ERRKB_SCAN_ENGINE picks the engine; an unknown one is a usage error (exit 2)."""
    python = run_cli(
        "scan", "--json", "-", stdin=serve_log().encode(), env={"ERRKB_SCAN_ENGINE": "python"}
    )
    assert 0 == python.returncode, python.stderr
    assert json.loads(python.stdout) == json.loads(
        run_cli("scan", "--json", "-", stdin=serve_log().encode()).stdout
    )
    bogus = run_cli("scan", "-", stdin=b"", env={"ERRKB_SCAN_ENGINE": "grep"})
    assert 2 == bogus.returncode
    assert b"unknown scan engine 'grep'" in bogus.stderr
    with pytest.raises(UsageError, match="unknown scan engine"):
        scan_stream(io.BytesIO(b""), engine="grep")
