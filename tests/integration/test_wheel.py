from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from helpers import SEED_MESSAGE

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(
    not (ROOT / "pyproject.toml").exists(), reason="needs the source tree to build from"
)
def test_built_wheel_installs_and_explains(tmp_path):
    """Build the wheel, install it into a fresh venv, run `errkb explain` from there.

    A record or module that the wheel forgets makes this fail: the venv has no source tree.
    """
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--wheel", "--outdir", str(dist), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    [wheel] = dist.glob("errkb-*.whl")
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run(
        [str(bindir / "python"), "-m", "pip", "install", "-q", str(wheel)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    proc = subprocess.run(
        [str(bindir / "errkb"), "explain", "--json", SEED_MESSAGE],
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert 0 == proc.returncode, proc.stderr
    assert b'"vllm-kv-cache-max-seq-len"' in proc.stdout
    listed = subprocess.run(
        [str(bindir / "errkb"), "list"], capture_output=True, cwd=tmp_path, timeout=120, check=True
    )
    shipped = sorted(p for p in (ROOT / "records").rglob("*.json"))
    assert len(shipped) == len(listed.stdout.decode().splitlines())
