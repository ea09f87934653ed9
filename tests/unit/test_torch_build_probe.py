"""errkb.probes.torch_build: torch's build read in a child interpreter, never in errkb's own.

The child imports a stand-in torch package laid out in a temporary folder on PYTHONPATH
(tests/environments.py), which reports a build as the real one does.
"""

from __future__ import annotations

import os
import sys

from environments import write_fake_torch

from errkb.probes.torch_build import read_torch


def _env(site):
    return {**os.environ, "PYTHONPATH": str(site)}


def test_a_cuda_build_and_its_architectures(tmp_path):
    """Version, CUDA runtime, architectures and ABI, as the build reports them."""
    write_fake_torch(tmp_path, "2.13.0+cu126", cuda="12.6", archs="sm_80 sm_90")
    build = read_torch(env=_env(tmp_path))
    assert ("2.13.0+cu126", "12.6", ("sm_80", "sm_90"), True, None) == (
        build.version,
        build.cuda,
        build.archs,
        build.cxx11_abi,
        build.error,
    )


def test_a_cpu_build(tmp_path):
    """No CUDA, no architectures: a CPU-only build."""
    write_fake_torch(tmp_path, "2.13.0+cpu", cuda=None)
    build = read_torch(env=_env(tmp_path))
    assert (True, ()) == (build.cpu_only, build.archs)


def test_a_torch_that_fails_to_import(tmp_path):
    """The import error is the reading, and torch counts as installed."""
    write_fake_torch(
        tmp_path, "2.13.0", cuda="12.6", fail="libcudnn.so.9: cannot open shared object file"
    )
    build = read_torch(env=_env(tmp_path))
    assert (True, "ImportError: libcudnn.so.9: cannot open shared object file") == (
        build.installed,
        build.error,
    )


def test_errkb_s_own_process_never_imports_torch(tmp_path):
    """Reading the build leaves torch out of this process if it was not there."""
    write_fake_torch(tmp_path, "2.13.0+cpu", cuda=None)
    before = "torch" in sys.modules
    read_torch(env=_env(tmp_path))
    assert before == ("torch" in sys.modules)
