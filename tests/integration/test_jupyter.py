"""IPython and Jupyter: a real InteractiveShell in a child process, text and HTML paths."""

from __future__ import annotations

import json
import textwrap

import pytest
from helpers import SEED_MESSAGE, run_python

pytest.importorskip("IPython")

SHELL = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

class ZMQInteractiveShell(InteractiveShell):
    '''Named as ipykernel's shell: errkb decides from the class name, never importing it.'''

shell = (ZMQInteractiveShell if sys.argv[1] == "kernel" else InteractiveShell).instance()
shell.run_line_magic("load_ext", "errkb")
with capture_output() as captured:
    shell.run_cell(CELL)
print(json.dumps({
    "stdout": captured.stdout,
    "stderr": captured.stderr,
    "outputs": [o.data for o in captured.outputs],
}))
"""


def _run_cell(kind: str, cell: str) -> dict:
    code = f"CELL = {cell!r}\n" + textwrap.dedent(SHELL)
    proc = run_python(code, kind, env={"NO_COLOR": "1"})
    assert 0 == proc.returncode, proc.stderr
    return json.loads(proc.stdout)


SEED_CELL = f"raise ValueError({SEED_MESSAGE!r})"


def test_terminal_ipython_shows_text_after_the_traceback():
    """Terminal IPython: the cell's traceback, then the plain diagnosis on stderr; no display."""
    out = _run_cell("terminal", SEED_CELL)
    assert "ValueError" in out["stdout"]
    assert "vllm-kv-cache-max-seq-len" in out["stderr"]
    assert [] == out["outputs"]


def test_kernel_publishes_html_with_a_text_fallback():
    """In a kernel the diagnosis is a display bundle: text/html and text/plain, nothing on stderr."""
    out = _run_cell("kernel", SEED_CELL)
    [bundle] = out["outputs"]
    assert ["text/html", "text/plain"] == sorted(bundle)
    assert "vllm-kv-cache-max-seq-len" in bundle["text/html"]
    assert "vllm-kv-cache-max-seq-len" in bundle["text/plain"]
    assert "" == out["stderr"]


#: The streamer pattern: generation runs in a thread while the cell reads what it streams.
THREAD_CELL = f"""
import queue, threading

def generate(streamer):
    raise ValueError({SEED_MESSAGE!r})

streamer = queue.Queue()
thread = threading.Thread(target=generate, args=(streamer,), name="generate")
thread.start()
thread.join()
"""


@pytest.mark.parametrize("kind", ["terminal", "kernel"])
def test_exception_in_a_thread_started_by_a_cell_gets_a_diagnosis(kind):
    """Thread(target=generate) in a cell: the thread's traceback, then the diagnosis as text on
    the same stream (stderr, which a kernel shows under the cell)."""
    out = _run_cell(kind, THREAD_CELL)
    err = out["stderr"]
    assert -1 < err.find("Exception in thread generate") < err.find("vllm-kv-cache-max-seq-len")
    record_id = "vllm-kv-cache-max-seq-len"
    assert _one_diagnosis().count(record_id) == err.count(record_id)  # one diagnosis
    assert [] == out["outputs"]


def test_html_escapes_untrusted_text():
    """Markup and escape sequences in a record or message reach the HTML cleaned and escaped."""
    from errkb.diagnosis import explain
    from errkb.render import render_html
    from errkb.testing import record_dict, registry_from_dicts

    registry = registry_from_dicts(
        [
            record_dict(
                id="acme-markup",
                messagePattern=r"boom (?P<what>\S+)",
                documentation="<script>alert(1)</script> \x1b]52;c;AAAA\x07",
            )
        ]
    )
    html = render_html(explain("boom <b>x</b>", options=_no_probes(), registry=registry))
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "what = &lt;b&gt;x&lt;/b&gt;" in html
    assert "<script>" not in html
    assert "\x1b" not in html


def test_unknown_error_in_a_kernel_publishes_nothing():
    """An error no record knows: the traceback only, no display output."""
    out = _run_cell("kernel", "raise RuntimeError('the frobnicator is out of beans')")
    assert ([], "") == (out["outputs"], out["stderr"])


def _one_diagnosis() -> str:
    """The seed's diagnosis as plain text: what one diagnosis of it holds."""
    from errkb.diagnosis import explain
    from errkb.render import render_plain

    return render_plain(explain(f"ValueError: {SEED_MESSAGE}", options=_no_probes()), 100)


def _no_probes():
    from errkb import Options

    return Options(probes=False)
