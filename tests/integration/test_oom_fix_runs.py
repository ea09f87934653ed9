"""The out-of-memory fix runs: errkb's batch, put into the user's call, fits the card.

Each test writes a training script that builds transformers' real ``TrainingArguments`` and
trains one step with the stand-in trainer (``tests/data/trainer``: torch's message and plain
memory arithmetic, nothing of errkb's), runs it under errkb's hook in a child process, takes the
diagnosis' example fix, splices it into the file (``test_fix_runs.splice``: the file parses and
nothing outside the edit changes) and runs it again: the step must fit, with the same effective
batch.

The card: 24 GiB, 512 MiB of CUDA context, 6 GiB of weights, gradients and optimizer state, and
1.5 GiB of activations a sample in 32 allocations. A micro-batch of 16 needs 24 GiB of
activations: it fails. errkb, not seeing the model on a card (the stand-in keeps none), takes
all that was allocated as fixed, the cautious reading, and lowers the batch to a divisor of the
effective batch that fits.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import DATA, HOOK_WITH_FAKE_GPU, _child_env, splice

pytest.importorskip("accelerate")  # transformers' TrainingArguments needs it

GIB, MIB = 1 << 30, 1 << 20
CARD = {
    "SIM_TOTAL": str(24 * GIB),
    "SIM_FIXED": str(6 * GIB),
    "SIM_PER_SAMPLE": str(1536 * MIB),
    "SIM_LAYERS": "32",
    "FAKE_GPU_TOTAL_BYTES": str(24 * GIB),
}


class Project:
    """A user's training project: the stand-in trainer installed, a script, errkb's hook."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.site = root / "site-packages"
        shutil.copytree(DATA / "trainer" / "simtrain", self.site / "simtrain")
        self.hook = root / "hook"
        self.hook.mkdir()
        (self.hook / "sitecustomize.py").write_text(HOOK_WITH_FAKE_GPU)
        self.diagnosis_file = root / "diagnosis.json"

    def script(self, source: str) -> Path:
        path = self.root / "train.py"
        path.write_text(textwrap.dedent(source).replace("OUT", json.dumps(str(self.root / "out"))))
        return path

    def run(self, path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
        self.diagnosis_file.unlink(missing_ok=True)
        paths = [str(self.hook), str(self.site), *(str(Path(p).resolve()) for p in sys.path if p)]
        child = {**env, "PYTHONPATH": os.pathsep.join(paths), "NO_COLOR": "1",
                 "DIAGNOSIS_JSON": str(self.diagnosis_file)}  # fmt: skip
        return subprocess.run(
            [sys.executable, str(path)],
            capture_output=True, env=_child_env(child), cwd=self.root, timeout=180, check=False,
        )  # fmt: skip

    def fails(self, path: Path, env: dict[str, str]) -> dict:
        proc = self.run(path, env)
        assert 1 == proc.returncode, proc.stderr.decode()
        assert b"CUDA out of memory" in proc.stderr
        return json.loads(self.diagnosis_file.read_text())

    def fits(self, path: Path, env: dict[str, str]) -> str:
        proc = self.run(path, env)
        assert 0 == proc.returncode, proc.stderr.decode()
        return proc.stdout.decode()


@pytest.fixture
def project(tmp_path) -> Project:
    return Project(tmp_path)


def fix_and_rerun(project: Project, path: Path, effective: int) -> dict:
    diagnosis = project.fails(path, CARD)
    fix = diagnosis["example_fix"]
    assert fix is not None, diagnosis
    splice(path, fix)
    assert f"trained: effective batch {effective}" in project.fits(path, CARD)
    return fix


SHAPES = {
    "multi-line call": """\
        from transformers import TrainingArguments
        from simtrain import Trainer

        args = TrainingArguments(
            output_dir=OUT,
            per_device_train_batch_size=16,
            gradient_accumulation_steps=1,
            report_to=[],
        )
        Trainer(args).train()
        """,
    "one-line call, no accumulation keyword": """\
        from transformers import TrainingArguments
        from simtrain import Trainer

        args = TrainingArguments(output_dir=OUT, per_device_train_batch_size=16, report_to=[])
        Trainer(args).train()
        """,
    "batch named above the call": """\
        from transformers import TrainingArguments
        from simtrain import Trainer

        BATCH = 16  # what fitted on the old card
        args = TrainingArguments(output_dir=OUT, per_device_train_batch_size=BATCH,
                                 gradient_accumulation_steps=1, report_to=[])
        Trainer(args).train()
        """,
    "settings in a dict passed as **": """\
        from transformers import TrainingArguments
        from simtrain import Trainer

        settings = {"per_device_train_batch_size": 16, "gradient_accumulation_steps": 1}
        args = TrainingArguments(output_dir=OUT, report_to=[], **settings)
        Trainer(args).train()
        """,
    "inside main(), Seq2Seq arguments": """\
        from transformers import Seq2SeqTrainingArguments
        from simtrain import Trainer


        def main():
            args = Seq2SeqTrainingArguments(
                output_dir=OUT,
                per_device_train_batch_size=16,  # per GPU
                gradient_accumulation_steps=1,
                report_to=[],
            )
            Trainer(args).train()


        main()
        """,
    "accumulation already on": """\
        from transformers import TrainingArguments
        from simtrain import Trainer

        args = TrainingArguments(
            output_dir=OUT, per_device_train_batch_size=16, gradient_accumulation_steps=2,
            report_to=[],
        )
        Trainer(args).train()
        """,
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_batch_that_fits_is_written_into_the_call_and_fits(project, shape):
    path = project.script(SHAPES[shape])
    effective = 32 if shape == "accumulation already on" else 16
    fix = fix_and_rerun(project, path, effective)
    assert fix["location"].startswith(str(path))
    # A micro-batch of 16 needs 24 GiB of activations; 4 fits: 4 x 4 (or 4 x 8) as before.
    assert ("BATCH = 4" if shape == "batch named above the call" else
            'per_device_train_batch_size": 4' if "dict" in shape else
            "per_device_train_batch_size=4") in fix["after"]  # fmt: skip
    if "main()" in shape:
        assert "per_device_train_batch_size=4,  # per GPU" in fix["after"]  # the comment stays


def test_fragmentation_fix_set_in_the_environment_fits(project):
    """R reserved but unallocated covers the request: the variable the example sets fits it."""
    path = project.script(SHAPES["multi-line call"])
    env = {**CARD, "SIM_PER_SAMPLE": str(1024 * MIB), "SIM_UNUSED": str(5 * GIB)}
    diagnosis = project.fails(path, env)
    first = diagnosis["solutions"][0]
    assert first["settings"] == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert "trained: effective batch 16" in project.fits(path, {**env, **first["settings"]})


def test_another_process_named_and_the_job_fits_once_it_is_gone(project):
    path = project.script(SHAPES["multi-line call"])
    env = {**CARD, "SIM_PER_SAMPLE": str(256 * MIB), "SIM_OTHERS": f"4242:{14 * GIB}"}
    diagnosis = project.fails(path, env)
    first = diagnosis["solutions"][0]
    assert first["settings"] == {"stop_pids": [4242]}
    assert diagnosis["example_fix"] is None
    gone = {k: v for k, v in env.items() if k != "SIM_OTHERS"}
    assert "trained: effective batch 16" in project.fits(path, gone)
