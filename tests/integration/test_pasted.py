"""errkb explain on text as people paste it, and on every example the knowledge base ships.

The pasted texts are tests/data/pasted: printed by the real tools (rich, IPython, pytest, vLLM's
log format, GitHub's quote reply, ...), each with the record errkb must find as its top match
(``manifest.json``). The records' own examples go through the same road: the parser, then the
matcher and the ranking.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import DATA

import errkb
from errkb.match import Matcher
from errkb.options import Options
from errkb.parse import parse_lines, parse_text
from errkb.registry import default_registry

_PASTED = DATA / "pasted"
_MANIFEST = json.loads((_PASTED / "manifest.json").read_text(encoding="utf-8"))
_OPTIONS = Options(probes=False)


@pytest.mark.parametrize("entry", _MANIFEST, ids=[e["file"] for e in _MANIFEST])
def test_pasted_text_gives_its_record_as_top_match(entry):
    """Each pasted text, as a user would paste it, gives the manifest's record first."""
    with (_PASTED / entry["file"]).open(encoding="utf-8") as f:
        diagnosis = errkb.explain(f.read(), options=_OPTIONS)
    assert diagnosis is not None, entry["file"]
    assert entry["record"] == diagnosis.top.record.id


def _examples() -> list[tuple[str, str, str | None]]:
    return [
        (record.id, example, record.variant_of)
        for record in default_registry().hand_written().records
        for example in record.examples
    ]


def test_explain_finds_every_shipped_record_example_as_its_top_match():
    """explain finds every shipped record example as its top match (the records check runs the
    parser): the record itself, or the record it is a variant of when the example shows no
    traceback that could tell the copy apart."""
    wrong = []
    for record_id, example, variant_of in _examples():
        diagnosis = errkb.explain(example, options=_OPTIONS)
        top = diagnosis.top.record.id if diagnosis else None
        allowed = {record_id}
        if variant_of and not any(p.frames for p in parse_text(example)):
            allowed.add(variant_of)
        if top not in allowed:
            wrong.append((record_id, top, example[:80]))
    assert [] == wrong


def _reports() -> list[dict[str, str]]:
    with (DATA / "reports" / "corpus.jsonl").open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_no_report_is_recognised_worse_as_a_paste_than_as_its_best_line():
    """Over the whole corpus of real reports (tests/data/reports): where the error line alone
    gives a record, the whole paste gives a record that matches that line too, and where any
    line of the paste read alone gives a record, the paste gives one."""
    registry = default_registry()
    worse = []
    for entry in _reports():
        paste = errkb.explain(entry["text"], options=_OPTIONS, registry=registry)
        line = errkb.explain(entry["errorLine"], options=_OPTIONS, registry=registry)
        if line is not None and (
            paste is None or not Matcher([paste.top.record]).match(entry["errorLine"])
        ):
            worse.append((entry["id"], line.top.record.id, paste and paste.top.record.id))
        alone = [
            p for p in parse_lines(entry["text"]) if registry.matcher.match(p.message, p.class_name)
        ]
        if alone and paste is None:
            worse.append((entry["id"], alone[-1].message[:60], None))
    assert [] == worse


def _lazy_module_wrapper(module: str, inner: str) -> str:
    """The line transformers' lazy module raises around an import error (its wording read in the
    transformers 4.40.0 wheel, transformers/utils/import_utils.py), for a paste of that line."""
    return (
        f"RuntimeError: Failed to import {module} because of the following error (look up to "
        f"see its traceback):\n{inner}"
    )


def test_an_error_wrapped_by_transformers_lazy_module_is_explained_with_its_own_record():
    """flash-attn's undefined symbol (the record's example, from a user's report) inside
    transformers' "Failed to import ..." RuntimeError: the flash-attn record comes first, not
    hidden by the wrapper's class."""
    inner = default_registry().get("flash-attn-cuda-extension-undefined-symbol").examples[0]
    text = _lazy_module_wrapper("transformers.models.llama.modeling_llama", inner)
    diagnosis = errkb.explain(text, options=_OPTIONS)
    assert diagnosis is not None
    assert "flash-attn-cuda-extension-undefined-symbol" == diagnosis.top.record.id


def test_a_pasted_lazy_module_wrapper_gives_the_error_it_carries_first():
    """A real report of the wrapper alone (huggingface/transformers#3895, transformers-27 in the
    corpus): the carried message is read as its own exception, before the wrapper."""
    entry = next(e for e in _reports() if e["id"] == "transformers-27")
    found = parse_text(entry["text"])
    assert [
        (None, "CUDA_HOME does not exist, unable to compile CUDA op(s)", False),
        ("RuntimeError", True),
    ] == [
        (found[0].class_name, found[0].message, found[0].chained),
        (found[1].class_name, found[1].chained),
    ]


_RAISING_RANK = """\
from torch.distributed.elastic.multiprocessing.errors import record


@record
def main():
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


main()
"""


def test_torchrun_summary_gives_the_first_failed_ranks_error_before_its_wrapper(tmp_path):
    """torchrun's ChildFailedError, pasted from its own traceback on (the rank's output above
    left out): the "Root Cause (first observed failure)" block's traceback is read as the
    rank's exception, with its class and frames, before the launcher's error."""
    script = tmp_path / "train.py"
    script.write_text(_RAISING_RANK, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=1", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    launcher = done.stderr.rindex("\nTraceback (most recent call last):") + 1
    found = parse_text(done.stderr[launcher:])
    assert [
        ("RuntimeError", "CUDA error: an illegal memory access was encountered", str(script)),
        ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError", True),
    ] == [
        (found[0].class_name, found[0].message, found[0].files[-1]),
        (found[-1].class_name, found[-1].chained),
    ]


_KILLED_RANK = """\
import os

import torch.distributed as dist

dist.init_process_group("gloo")
os.kill(os.getpid(), 9)
"""


def test_torchrun_summary_of_a_rank_killed_by_sigkill_names_the_out_of_memory_killer(tmp_path):
    """A rank killed by signal 9 under torchrun (CPU, gloo): the whole output, the launcher's
    traceback alone and its "failed (exitcode: -9)" log line alone each give the SIGKILL
    record, with the PID torchrun printed, and its Fix says how to confirm in the kernel log."""
    script = tmp_path / "train.py"
    script.write_text(_KILLED_RANK, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "1", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    launcher = done.stderr.rindex("\nTraceback (most recent call last):") + 1
    logged = next(line for line in done.stderr.splitlines() if "failed (exitcode: -9)" in line)
    pid = int(logged.partition("(pid: ")[2].partition(")")[0])
    found = [
        errkb.explain(text, options=_OPTIONS)
        for text in (done.stdout + done.stderr, done.stderr[launcher:], logged)
    ]
    assert [("torch-elastic-worker-killed-sigkill", pid, True)] * 3 == [
        (d.top.record.id, d.top.match.captures["pid"], "dmesg" in d.top.solutions[0].text)
        for d in found
        if d is not None
    ]


def test_an_out_of_memory_message_cut_at_a_fixed_width_fills_every_figure():
    """torch's out-of-memory message (the record's example, from a user's report) cut by
    coreutils' ``fold`` inside words and figures gives the same captures as the line whole."""
    record = default_registry().get("torch-cuda-out-of-memory")
    line = "torch.OutOfMemoryError: " + record.examples[4]
    folded = subprocess.run(
        ["fold", "-w", "57"], input=line, capture_output=True, text=True, check=True
    ).stdout
    whole = errkb.explain(line, options=_OPTIONS)
    cut = errkb.explain(folded, options=_OPTIONS)
    assert whole is not None
    assert cut is not None
    assert whole.top.match.captures == cut.top.match.captures


_LOG_THEN_RAISE = """\
import logging

logging.basicConfig(format="[%(asctime)s] [%(levelname).4s] ChatTTS | dl | %(message)s")
logging.warning({line!r})


def load():
    raise FileNotFoundError("asset/DVAE.pt")


load()
"""


def test_a_log_line_above_a_traceback_counts_when_its_exception_matches_nothing(tmp_path):
    """A real child's stderr: ChatTTS's hash warning (the record's example, from a user's
    report) logged above a traceback whose exception no record knows: the paste is explained
    by the warning's record, as the warning's line alone is."""
    record = default_registry().get("chattts-asset-sha256-mismatch")
    line = record.examples[1]
    script = tmp_path / "run.py"
    script.write_text(_LOG_THEN_RAISE.format(line=line), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False
    )
    alone = errkb.explain(line, options=_OPTIONS)
    diagnosis = errkb.explain(done.stderr, options=_OPTIONS)
    assert alone is not None
    assert diagnosis is not None
    assert (alone.top.record.id, "FileNotFoundError") == (
        diagnosis.top.record.id,
        parse_text(done.stderr)[-1].class_name,
    )


_BROKEN_DATASET = """\
import torch
from torch.utils.data import DataLoader, Dataset


class Broken(Dataset):
    def __len__(self):
        return 4

    def __getitem__(self, i):
        return torch.ones(3) @ torch.ones(4)


if __name__ == "__main__":
    for batch in DataLoader(Broken(), num_workers=1):
        pass
"""


def test_a_dataloader_workers_error_is_read_with_its_class_and_frames(tmp_path):
    """torch's DataLoader re-raises a worker's error with the worker's traceback in its message
    ("Caught RuntimeError in DataLoader worker process 0. Original Traceback ..."): a real run's
    stderr gives the wrapper, then the worker's error with its own class and the dataset's frame,
    read last, so it is explained first."""
    script = tmp_path / "load.py"
    script.write_text(_BROKEN_DATASET, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=False
    )
    wrapper, worker = parse_text(done.stderr)[-2:]
    assert [
        ("RuntimeError", "Caught RuntimeError in DataLoader worker process 0."),
        ("RuntimeError", str(script), "inconsistent tensor size"),
    ] == [
        (wrapper.class_name, wrapper.message.partition("\n")[0]),
        (worker.class_name, worker.files[-1], worker.message[: len("inconsistent tensor size")]),
    ]
