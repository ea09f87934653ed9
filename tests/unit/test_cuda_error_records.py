"""torch's CUDA runtime errors (``CUDA error: <the runtime's text>``): the generic record and its
specific ones.

c10/cuda/CUDAException.cpp builds every such message as ``"CUDA error: "`` and
``cudaGetErrorString(err)`` and throws ``c10::AcceleratorError`` (``torch.AcceleratorError``, a
``RuntimeError``, from torch 2.8; a plain ``RuntimeError`` before). Messages are the corpus's
(tests/data/reports/corpus.jsonl, by entry id) and the shipped records' own examples.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import errkb
from errkb.diagnosis import explain
from errkb.options import Options

CORPUS = Path(__file__).resolve().parents[1] / "data" / "reports" / "corpus.jsonl"


def _error_line(entry: str) -> str:
    with CORPUS.open(encoding="utf-8") as f:
        found = [e for e in map(json.loads, filter(str.strip, f)) if e["id"] == entry]
    return str(found[0]["errorLine"])


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        ("transformers-26", "torch-cuda-error"),
        ("safetensors-3", "torch-cuda-error-out-of-memory"),
        ("vllm-12", "torch-cuda-os-call-failed"),
    ],
)
def test_a_reported_cuda_error_finds_its_record(entry: str, expected: str) -> None:
    """The error line of a real report, read as ``errkb explain`` reads it."""
    found = explain(_error_line(entry), options=Options(probes=False))
    assert found is not None
    assert expected == found.top.record.id


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("CUDA error: device-side assert triggered", "torch-cuda-device-side-assert"),
        ("CUDA error: invalid device ordinal", "torch-cuda-invalid-device-ordinal"),
        (
            "CUDA error: no kernel image is available for execution on the device",
            "torch-cuda-no-kernel-image",
        ),
        ("CUDA error: out of memory", "torch-cuda-error-out-of-memory"),
    ],
)
@pytest.mark.parametrize("cls", ["RuntimeError", "torch.AcceleratorError"])
def test_a_specific_cuda_error_ranks_above_the_generic_record(
    message: str, expected: str, cls: str
) -> None:
    """Under either class torch raised it as, the record naming the error comes first."""
    ids = [m.record.id for m in errkb.lookup(message, cls)]
    assert (expected, True) == (ids[0], "torch-cuda-error" in ids[1:])


def test_the_generic_record_captures_the_runtimes_text() -> None:
    """The runtime's text stops at the end of its line, before torch's notes."""
    message = (
        "CUDA error: an illegal memory access was encountered\n"
        "CUDA kernel errors might be asynchronously reported at some other API call, so the "
        "stacktrace below might be incorrect.\n"
    )
    top = errkb.lookup(message, "torch.AcceleratorError")[0]
    assert ("torch-cuda-error", "an illegal memory access was encountered") == (
        top.record.id,
        top.captures["cuda_error"],
    )


def test_the_caching_allocators_message_keeps_its_own_record() -> None:
    """``CUDA out of memory. Tried to allocate ...`` is the allocator's, with its figures."""
    ids = [m.record.id for m in errkb.lookup("CUDA out of memory. Tried to allocate 20.00 MiB")]
    assert ("torch-cuda-out-of-memory", False) == (ids[0], "torch-cuda-error" in ids)
