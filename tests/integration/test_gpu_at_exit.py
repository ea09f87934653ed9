"""The hook never imports torch at exit to measure the GPU of a program that did not import it."""

from __future__ import annotations

from helpers import SEED_MESSAGE, run_python

_PROGRAM = f"""
import atexit, sys, errkb
# atexit handlers run after the exception hook: this reports what the diagnosis imported.
atexit.register(lambda: print("torch imported:", "torch" in sys.modules))
errkb.install()
raise ValueError({SEED_MESSAGE!r})
"""


def test_a_program_without_torch_gets_its_diagnosis_without_torch():
    """torch is installed here, but the program never imported it: the diagnosis comes, the
    GPU is left unmeasured (no NVML on this machine) with the reason, and torch stays out."""
    proc = run_python(_PROGRAM, env={"NO_COLOR": "1"})
    assert 1 == proc.returncode
    err = proc.stderr.decode()
    assert "vllm-kv-cache-max-seq-len" in err
    assert "this program never imported torch" in err
    assert b"torch imported: False\n" == proc.stdout


def test_a_program_that_imported_torch_is_measured_through_it():
    """A program that imported torch is measured through it (the CPU build: no CUDA device)."""
    proc = run_python("import torch\n" + _PROGRAM, env={"NO_COLOR": "1"})
    assert 1 == proc.returncode
    assert "torch sees no CUDA device" in proc.stderr.decode()
