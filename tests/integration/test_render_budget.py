"""The first screen is the fix: the seed's error under the hook, counted line by line.

A child process installs the hook with injected GPU measurements and raises vLLM's KV-cache
error; the lines Python and errkb write after the traceback are counted on the real stderr.
"""

from __future__ import annotations

import textwrap

import pytest
from helpers import SEED_MESSAGE, run_python

_APP = """
import errkb
from errkb import Options
from errkb.testing import FakeGpu, FakeMeasurements

gpu = FakeGpu(total_bytes=24 * 2**30, free_bytes=24 * 2**30)
errkb.install(Options(measurements=FakeMeasurements(gpus=[gpu]){detail}))


def start_engine():
    raise ValueError({message!r})


{body}
"""

_WRAPPED = """
try:
    start_engine()
except ValueError as exc:
    raise RuntimeError("Engine core initialization failed. See root cause above.") from exc
"""


def _after_traceback(body: str = "start_engine()", width: int = 100, detail: str = "") -> list[str]:
    """The lines after the traceback's last line, in a child at ``width`` columns."""
    code = textwrap.dedent(_APP).format(message=SEED_MESSAGE, body=body, detail=detail)
    proc = run_python(code, env={"NO_COLOR": "1", "COLUMNS": str(width)})
    assert 1 == proc.returncode, proc.stderr
    lines = proc.stderr.decode().splitlines()
    last = max(
        i for i, line in enumerate(lines) if line.startswith(("ValueError: ", "RuntimeError: "))
    )
    return lines[last + 1 :]


def test_the_whole_diagnosis_is_at_most_30_lines_and_the_fix_within_12():
    """At 100 columns: the fix on a line at most the 12th after the traceback, the whole
    diagnosis at most 30 lines."""
    lines = _after_traceback()
    fix = next(n for n, line in enumerate(lines, 1) if line.startswith("Fix: "))
    assert fix <= 12, "\n".join(lines)
    assert len(lines) <= 30, "\n".join(lines)
    assert lines[fix - 1].startswith("Fix: Lower max_model_len from 32768 to 12288")


@pytest.mark.parametrize("width", [60, 80, 100, 120])
def test_no_line_after_the_traceback_is_wider_than_the_terminal(width):
    """COLUMNS sets the width, and the plain text wraps to it, code included."""
    lines = _after_traceback(width=width)
    assert [] == [line for line in lines if len(line) > width]


def test_a_wrapper_is_one_line_under_its_root_cause():
    """vLLM's "See root cause above" wrapper, chained to the seed's error: one block, the
    root cause's, and the wrapper one line of it; the diagnosis ends with that line's block."""
    lines = _after_traceback(_WRAPPED)
    assert 1 == sum(line.startswith("errkb: vLLM") for line in lines)
    at = lines.index("Reported again by")
    assert lines[at + 1].endswith("(vllm-engine-core-initialization-failed)")
    assert lines[at + 2].startswith("\u2500\u2500 more: errkb show vllm-kv-cache-max-seq-len")
    assert len(lines) <= 32, "\n".join(lines)


def test_the_hook_shows_the_long_form_with_detail_long():
    """Options(detail="long") under the hook: the prose the short form leaves out."""
    short = "\n".join(_after_traceback())
    long = "\n".join(_after_traceback(detail=', detail="long"'))
    for heading in ("What happened", "Likely situations", "Upstream"):
        assert f"\n{heading}\n" in long
        assert f"\n{heading}\n" not in short
