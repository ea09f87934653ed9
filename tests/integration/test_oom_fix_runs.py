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
    "arguments made inside the Trainer call": """\
        from transformers import TrainingArguments
        from simtrain import Trainer

        Trainer(TrainingArguments(output_dir=OUT, per_device_train_batch_size=16, report_to=[])).train()
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


# --- more call shapes: the model on the card, a DataLoader, generate(), an eval loop --------

#: 28 fp32 layers of 8192 x 8192 (1.88 billion parameters) on the card: weights 7 GiB,
#: gradients 7 GiB, AdamW's state 14 GiB: 28 GiB, more than the 24 GiB card. With an 8-bit
#: optimizer, 17.5 GiB.
BIG_MODEL = """\
    from transformers import TrainingArguments
    from simtrain import Trainer, model_on_card

    model = model_on_card(layers=28, width=8192)
    args = TrainingArguments(
        output_dir=OUT,
        per_device_train_batch_size=4,
        OPTIM
        report_to=[],
    )
    Trainer(args, model).train()
    """


@pytest.mark.parametrize("optim", [None, "adamw_torch"])
def test_a_model_too_big_for_its_optimizer_gets_the_8_bit_one_and_fits(project, optim):
    """Weights + gradients + AdamW's state exceed the card: optim='adamw_bnb_8bit' in the call."""
    line = f'optim="{optim}",' if optim else ""
    source = BIG_MODEL.replace("OPTIM\n", f"{line}\n" if line else "")
    path = project.script(source)
    env = {**CARD, "SIM_PER_SAMPLE": str(256 * MIB)}
    diagnosis = project.fails(path, env)
    facts = {f["name"]: f["value"] for f in diagnosis["facts"]}
    assert "weights" == facts["situation"]
    assert 28 * 8192 * 8192 * 4 == facts["weights_on_gpu"]
    assert 2 * facts["weights_on_gpu"] == facts["optimizer_state"]  # AdamW, before its first step
    fix = diagnosis["example_fix"]
    assert 'optim="adamw_bnb_8bit"' in fix["after"]
    splice(path, fix)
    assert "trained: effective batch 4" in project.fits(path, env)


DATALOADER_SHAPES = {
    "DataLoader keyword": """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        from simtrain import fit

        data = TensorDataset(torch.zeros(64, 8))
        loader = DataLoader(data, batch_size=16, shuffle=True)
        fit(loader)
        """,
    "DataLoader batch named above": """\
        import torch
        from torch.utils.data import DataLoader, TensorDataset
        from simtrain import fit

        BATCH_SIZE = 16


        def main():
            loader = DataLoader(TensorDataset(torch.zeros(64, 8)), batch_size=BATCH_SIZE)
            fit(loader)


        if __name__ == "__main__":
            main()
        """,
}


@pytest.mark.parametrize("shape", list(DATALOADER_SHAPES))
def test_a_dataloaders_batch_is_lowered_in_its_call_and_fits(project, shape):
    path = project.script(DATALOADER_SHAPES[shape])
    diagnosis = project.fails(path, CARD)
    first = diagnosis["solutions"][0]
    assert {"batch_size": 4} == first["settings"]
    assert "accumulate gradients over 4 steps" in first["text"]
    fix = diagnosis["example_fix"]
    # A global read inside a function: the call's keyword, as for an engine's settings.
    assert "batch_size=4" in fix["after"]
    splice(path, fix)
    assert "trained: batch 4" in project.fits(path, CARD)


# A two-layer Llama (2 KV heads of 8, fp32): 256 bytes of cache a token of a sequence. The card
# keeps 448 KiB for the cache; 8 beams x 304 tokens need 608 KiB. The cache peaks at 1.25x its
# size (each of its 4 tensors grows while the old one is held) and errkb keeps 10% headroom:
# 0.9 x 448 KiB / 1.25 / (256 B x 304 tokens) = 4.2 beams; greedy, 0.9 x 448 KiB / 1.25 / 256 B
# = 1290 tokens, 1286 new after the prompt's 4.
GENERATION_CARD = {
    "SIM_TOTAL": str(1 * MIB),
    "SIM_CONTEXT": str(64 << 10),
    "SIM_FIXED": str(512 << 10),
    "FAKE_GPU_TOTAL_BYTES": str(1 * MIB),
}

GENERATE_SHAPES = {
    "beam search": (
        """\
        import torch
        from simtrain import on_card, tiny_llm

        model = on_card(tiny_llm())
        prompt = torch.tensor([[1, 2, 3, 4]])
        out = model.generate(prompt, max_new_tokens=300, num_beams=8, do_sample=False)
        print(f"generated: {out.shape[1] - prompt.shape[1]} tokens")
        """,
        "num_beams=4",
        "generated: 300 tokens",
    ),
    "settings in a dict": (
        """\
        import torch
        from simtrain import on_card, tiny_llm

        settings = dict(max_new_tokens=300, num_beams=8, do_sample=False)
        model = on_card(tiny_llm())
        prompt = torch.tensor([[1, 2, 3, 4]])
        out = model.generate(prompt, **settings)
        print(f"generated: {out.shape[1] - prompt.shape[1]} tokens")
        """,
        "num_beams=4",
        "generated: 300 tokens",
    ),
    "greedy, too many new tokens": (
        """\
        import torch
        from simtrain import on_card, tiny_llm


        def complete(model, prompt):
            return model.generate(
                prompt,
                max_new_tokens=2000,  # a long answer
            )


        prompt = torch.tensor([[1, 2, 3, 4]])
        out = complete(on_card(tiny_llm()), prompt)
        print(f"generated: {out.shape[1] - prompt.shape[1]} tokens")
        """,
        "max_new_tokens=1286,  # a long answer",
        "generated: 1286 tokens",
    ),
}


@pytest.mark.parametrize("shape", list(GENERATE_SHAPES))
def test_generate_gets_the_beams_or_tokens_whose_cache_fits(project, shape):
    """transformers' real generate(): the cache's arithmetic from the model's config fits."""
    source, expected, printed = GENERATE_SHAPES[shape]
    path = project.script(source)
    diagnosis = project.fails(path, GENERATION_CARD)
    facts = {f["name"]: f["value"] for f in diagnosis["facts"]}
    assert "generation" == facts["situation"]
    assert 2 * 2 * 2 * 8 * 4 == facts["kv_cache_per_token"]  # K and V x layers x heads x dim x fp32
    fix = diagnosis["example_fix"]
    assert expected in fix["after"]
    splice(path, fix)
    assert printed in project.fits(path, GENERATION_CARD)


def test_a_loss_added_up_as_a_tensor_is_added_as_a_number_and_fits(project):
    """An eval loop's ``total += loss`` keeps every step's graph: ``loss.item()`` frees them."""
    path = project.script("""\
        import torch
        from simtrain import eval_step

        weight = torch.ones(16, requires_grad=True)
        total = 0.0
        for step in range(40):
            loss = eval_step(weight)
            total += loss
        print(f"evaluated: {total / 40:.1f}")
        """)  # fmt: skip
    env = {**CARD, "SIM_FIXED": str(20 * GIB), "SIM_PER_STEP": str(512 * MIB)}
    diagnosis = project.fails(path, env)
    facts = {f["name"]: f["value"] for f in diagnosis["facts"]}
    assert "growing" == facts["situation"]
    fix = diagnosis["example_fix"]
    assert "    total += loss" == fix["before"]
    assert "    total += loss.item()" == fix["after"]
    splice(path, fix)
    assert "evaluated: 16.0" in project.fits(path, env)


@pytest.fixture
def tiny_model(tmp_path_factory) -> Path:
    """A two-layer Llama saved by transformers (fp32: 88.6 KiB of weights), loaded offline."""
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("tiny-llama")
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2)  # fmt: skip
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def test_a_model_that_does_not_fit_on_its_way_to_the_card_is_loaded_in_bf16_and_fits(
    project, tiny_model
):
    """from_pretrained's fp32 weights run out of the card in .cuda(): dtype='bfloat16' halves them."""
    path = project.script(f"""\
        from transformers import LlamaForCausalLM
        from simtrain import to_card

        model = LlamaForCausalLM.from_pretrained(
            {str(tiny_model)!r},
        )
        model = to_card(model)
        print(f"on the card: {{next(model.parameters()).dtype}}")
        """)  # fmt: skip
    # 128 KiB, 64 KiB of it the CUDA context's: 88.6 KiB of fp32 weights do not fit, 44.3 do.
    env = {"SIM_TOTAL": str(128 << 10), "SIM_CONTEXT": str(64 << 10),
           "FAKE_GPU_TOTAL_BYTES": str(128 << 10)}  # fmt: skip
    diagnosis = project.fails(path, env)
    facts = {f["name"]: f["value"] for f in diagnosis["facts"]}
    assert "weights" == facts["situation"]
    assert {"dtype": "bfloat16"} == diagnosis["solutions"][0]["settings"]
    fix = diagnosis["example_fix"]
    assert "dtype='bfloat16'" in fix["after"] or 'dtype="bfloat16"' in fix["after"]
    splice(path, fix)
    assert "on the card: torch.bfloat16" in project.fits(path, env)
