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
    [site] = env_dir.glob("lib/python*/site-packages/errkb")
    assert (site / "_own_patterns.compiled").is_file()  # errkb's own patterns, compiled

    def size() -> int:
        return sum(p.stat().st_size for p in site.rglob("*") if p.is_file())

    # Issue 15's size budget: errkb as pip installs it (its bytecode included) under 60 MB.
    installed = size()
    assert installed < 60 * 2**20
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
    shipped = len(list((ROOT / "records").rglob("*.json")))
    assert shipped == len(listed.stdout.decode().splitlines())
    everything = subprocess.run(
        [str(bindir / "errkb"), "list", "--all"],
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        check=True,
    )
    mined = sum(len(p.read_bytes().splitlines()) for p in (ROOT / "records").rglob("*.jsonl"))
    assert shipped + mined == len(everything.stdout.decode().splitlines())
    # Issue 15's size budget: the wheel under 25 MB. What errkb writes beside its bytecode
    # when it runs (attrs's compiled methods, the index checks: errkb/_attrs.py, errkb/packs.py)
    # stays small.
    assert wheel.stat().st_size < 25 * 2**20
    assert size() - installed < 256 * 2**10
