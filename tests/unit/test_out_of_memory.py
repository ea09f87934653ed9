"""The out-of-memory advisor: the situation real torch messages show, and the fix it computes.

The messages are torch's own, copied from public reports (issue trackers and logs); the
frames hold real torch modules and optimizers and a real transformers TrainingArguments.
"""

from __future__ import annotations

import attrs
import pytest
import torch
from helpers import TORCH_OOM_OTHERS

import errkb
from errkb.advisors import out_of_memory as oom
from errkb.diagnosis import diagnose, explain
from errkb.options import Options
from errkb.units import to_bytes

GIB, MIB = 1 << 30, 1 << 20

# (message, situation), each from a public report.
REPORTED = [
    (TORCH_OOM_OTHERS, "another process"),  # two other jobs hold 88 GiB of a 95 GiB card
    (  # 301.75 MiB cached but unused, 2 MiB asked for
        (
            "CUDA out of memory. Tried to allocate 2.00 MiB. GPU 0 has a total capacity of 23.69 GiB of "
            "which 3.69 MiB is free. Including non-PyTorch memory, this process has 23.68 GiB memory in "
            "use. Of the allocated memory 23.04 GiB is allocated by PyTorch, and 301.75 MiB is reserved "
            "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
            "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        ),
        "fragmentation",
    ),
    (  # lm_eval's log_softmax over a batch of 8
        (
            "CUDA out of memory. Tried to allocate 3.75 GiB. GPU 0 has a total capacity of 23.53 GiB of "
            "which 2.59 GiB is free. Including non-PyTorch memory, this process has 20.93 GiB memory in "
            "use. Of the allocated memory 20.43 GiB is allocated by PyTorch, and 47.16 MiB is reserved by "
            "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
            "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
            "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
        ),
        "activations",
    ),
    (  # another process holds 256 MiB: far less than the 1.56 GiB missing
        (
            "CUDA out of memory. Tried to allocate 2.09 GiB. GPU 0 has a total capacty of 23.69 GiB of "
            "which 541.00 MiB is free. Process 2006998 has 256.00 MiB memory in use. Including non-PyTorch "
            "memory, this process has 22.89 GiB memory in use. Of the allocated memory 21.48 GiB is "
            "allocated by PyTorch, and 1.11 GiB is reserved by PyTorch but unallocated. If reserved but "
            "unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See "
            "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"
        ),
        "activations",
    ),
    (  # torch 1.x wording
        (
            "CUDA out of memory. Tried to allocate 36.00 MiB (GPU 0; 7.93 GiB total capacity; 130.35 MiB "
            "already allocated; 47.06 MiB free; 188.00 MiB reserved in total by PyTorch) If reserved "
            "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See "
            "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"
        ),
        "fragmentation",
    ),
]


def _match(message: str):
    found = [
        m
        for m in errkb.lookup(message, "torch.OutOfMemoryError")
        if "out-of-memory" in m.record.advisors
    ]
    assert found, message
    return found[0]


@pytest.mark.parametrize(("message", "expected"), REPORTED)
def test_real_messages_get_the_situation_their_figures_show(message, expected):
    fig = oom.figures_of(_match(message).captures, message)
    assert fig is not None
    assert oom.situation(fig) == expected


def test_another_process_names_the_pids_and_what_they_hold():
    message = REPORTED[0][0]
    diagnosis = diagnose(torch.OutOfMemoryError(message), options=Options(probes=False))
    finding = diagnosis.findings[0]
    assert finding.record.id == "torch-cuda-out-of-memory"
    first = finding.solutions[0]
    assert "502587" in first.text
    assert "745081" in first.text
    assert first.settings == {"stop_pids": [502587, 745081]}
    facts = {f.name: f for f in finding.facts}
    assert facts["other_processes"].value == round(1.78 * GIB) + round(86.44 * GIB)
    assert facts["other_processes"].source == "message"
    assert facts["requested"].value == 130 * MIB
    assert facts["situation"].value == "another process"
    assert finding.example_fix is None  # the record's lowers a batch size: not this fix


def test_fragmentation_names_the_variable_the_message_names():
    diagnosis = diagnose(torch.OutOfMemoryError(REPORTED[1][0]), options=Options(probes=False))
    example = diagnosis.findings[0].example_fix
    assert example.after.startswith("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True python ")
    assert "an illustration" in example.note
    first = diagnosis.findings[0].solutions[0]
    assert first.settings == {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    assert "before torch is imported" in first.text
    older = diagnose(RuntimeError(REPORTED[4][0]), options=Options(probes=False))
    assert "max_split_size_mb" in older.findings[0].solutions[0].text
    assert not older.findings[0].solutions[0].settings  # no value is made up for it


def test_the_single_request_larger_than_the_card():
    fig = oom.Figures(requested=30 * GIB, free=1 * GIB, total=24 * GIB, allocated=20 * GIB)
    assert oom.situation(fig) == "single request"
    fig = oom.Figures(requested=3 * GIB, free=1 * GIB, total=24 * GIB, others=((7, 22 * GIB),))
    assert oom.situation(fig) == "another process"  # others first: they are why it is short


def test_a_request_alone_decides_nothing():
    assert diagnose(torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 55.57 GiB."),
                    options=Options(probes=False)).findings[0].solutions[0].settings == {}  # fmt: skip


def test_the_fitting_batch_keeps_the_effective_batch_exactly():
    fig = oom.Figures(requested=4 * GIB, free=2 * GIB, total=24 * GIB, allocated=20 * GIB,
                      reserved_unallocated=0)  # fmt: skip
    micro, steps = oom.fitting_batch(fig, oom.Batch(size=8, accumulation=2), fixed=12 * GIB)
    # activations >= 20 - 12 + 4 = 12 GiB for 8; 22 - 12 = 10 GiB left: 8 * 0.9 * 10/12 = 6
    assert micro * steps == 16
    assert micro == 4  # the largest divisor of 16 at most 6
    assert oom.fitting_batch(fig, oom.Batch(size=1), fixed=12 * GIB) is None  # nothing smaller


def _train_step(model, optimizer, args, message):
    """A training step whose frame holds the model, the optimizer and the arguments."""
    raise torch.OutOfMemoryError(message)


def test_frames_give_the_model_and_batch_and_the_batch_that_fits(monkeypatch, tmp_path):
    from transformers import TrainingArguments

    monkeypatch.setattr(oom, "CARD_DEVICES", frozenset({"cpu"}))  # the CPU plays the card
    model = torch.nn.Linear(1024, 1024)  # 1,049,600 fp32 parameters: 4 MiB and change
    optimizer = torch.optim.AdamW(model.parameters())
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=8,
                             gradient_accumulation_steps=2, report_to=[])  # fmt: skip
    try:
        _train_step(model, optimizer, args, REPORTED[2][0])
    except torch.OutOfMemoryError as exc:
        diagnosis = diagnose(exc, options=Options(probes=False))
    finding = diagnosis.findings[0]
    facts = {f.name: f for f in finding.facts}
    weights = 1_049_600 * 4
    assert facts["weights_on_gpu"].value == weights
    assert facts["weights_on_gpu"].source == "frame"
    assert facts["gradients"].value == weights
    assert facts["optimizer_state"].value == 2 * weights  # AdamW before its first step
    assert facts["per_device_train_batch_size"].value == 8
    first = finding.solutions[0]
    assert first.estimate
    micro = first.settings["per_device_train_batch_size"]
    steps = first.settings["gradient_accumulation_steps"]
    assert micro * steps == 16
    assert micro < 8
    assert "the effective batch stays 16" in first.text


def test_weights_that_do_not_fit_get_what_does(monkeypatch):
    model = oom.ModelMemory(weights=14 * GIB, gradients=14 * GIB, optimizer_state=28 * GIB,
                            optimizer="AdamW", wide=True)  # fmt: skip
    fig = oom.Figures(requested=1 * GIB, free=0, total=24 * GIB, allocated=23 * GIB)
    assert oom.situation(fig, model) == "weights"
    text = oom._weights_solutions(fig, model)[0].text
    assert "56 GiB" in text
    assert "LoRA" in text


def _raise_from(folder, relative: str, message: str, function: str = "step"):
    """``message`` raised by torch's class from ``function`` of a real file at ``folder/relative``."""
    import importlib.util

    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        f"import torch\n\n\ndef {function}(message):\n    raise torch.OutOfMemoryError(message)\n"
    )
    spec = importlib.util.spec_from_file_location("oom_site", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    try:
        getattr(module, function)(message)
    except torch.OutOfMemoryError as exc:
        return exc
    raise AssertionError("no error")


def test_a_serving_engine_gets_its_own_settings(tmp_path):
    """Raised inside vLLM, with other processes on the card: the utilization that leaves them room."""
    exc = _raise_from(tmp_path, "site-packages/vllm/worker/model_runner.py", REPORTED[0][0])
    finding = diagnose(exc, options=Options(probes=False)).findings[0]
    first = finding.solutions[0]
    # (94.96 GiB - 88.22 GiB held by others) / 94.96 GiB = 7.1%, less a point: 0.06.
    assert first.settings == {"gpu_memory_utilization": 0.06}
    assert "share of the whole card" in first.text
    assert {f.name: f.value for f in finding.facts}["situation"] == "serving engine"
    assert "gpu_memory_utilization=0.06" in finding.example_fix.after
    alone = _raise_from(tmp_path / "b", "site-packages/vllm/worker/model_runner.py", REPORTED[2][0])
    text = diagnose(alone, options=Options(probes=False)).findings[0].solutions[0].text
    assert "lower gpu_memory_utilization by at least 0.05" in text  # 1.16 GiB of 23.53 GiB
    assert "batch size" not in text  # a serving engine's fix is not a training batch


def test_ranks_of_one_job_on_one_card(tmp_path):
    exc = _raise_from(tmp_path, "torch/distributed/launched.py", REPORTED[0][0])
    first = diagnose(exc, options=Options(probes=False)).findings[0].solutions[0]
    assert "torch.cuda.set_device(int(os.environ['LOCAL_RANK']))" in first.text
    assert "502587" in first.text


# --- generate(): transformers' KV cache --------------------------------------------------


def _tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, eos_token_id=None,
                         pad_token_id=0)  # fmt: skip
    model = LlamaForCausalLM(config).eval()
    model.generation_config.eos_token_id = None
    return model


def _generate_until(model, steps: int, **settings):
    """generate() that runs out at its ``steps``-th forward; the cache's real bytes then."""
    seen: list[int] = []

    def run_out(module, args, kwargs, output):
        cache = output.past_key_values
        seen.append(sum(t.numel() * t.element_size() for layer in cache.layers
                        for t in (layer.keys, layer.values)))  # fmt: skip
        if len(seen) == steps:
            raise torch.OutOfMemoryError(REPORTED[2][0])  # the lm_eval report's figures
        return output

    model.register_forward_hook(run_out, with_kwargs=True)
    try:
        model.generate(torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8]]), do_sample=False, **settings)
    except torch.OutOfMemoryError as exc:
        return exc, seen[-1]
    raise AssertionError("generate() did not run out")


@pytest.mark.parametrize("beams", [1, 3])
def test_the_generation_cache_is_counted_as_transformers_keeps_it(beams):
    """kv_cache_per_token x sequences x length is the bytes of transformers' real cache."""
    exc, held = _generate_until(_tiny_llama(), steps=6, max_new_tokens=40, num_beams=beams)
    finding = diagnose(exc, options=Options(probes=False)).findings[0]
    facts = {f.name: f for f in finding.facts}
    assert "generation" == facts["situation"].value
    per_token = facts["kv_cache_per_token"].value
    assert 2 * 2 * 2 * 8 * 4 == per_token  # K and V x 2 layers x 2 KV heads x 8 x fp32
    assert "2 x 2 layers x 2 KV heads x 8 x 4 bytes" in facts["kv_cache_per_token"].note
    # At the 6th forward: the 4-token prompt and 5 new tokens are cached for 2 x beams rows.
    assert held == per_token * 2 * beams * (4 + 5)
    assert per_token * 2 * beams * (4 + 40) == facts["kv_cache_needed"].value
    assert (2, 4, beams, 40) == tuple(
        facts[n].value for n in ("generate_prompts", "prompt_tokens", "num_beams", "max_new_tokens")
    )


def test_the_generation_fix_lowers_beams_then_prompts_then_tokens():
    fig = oom.Figures(requested=1 * MIB, free=100 * MIB, total=24 * GIB, allocated=20 * GIB)
    gen = oom.Generation(batch=4, prompt=1000, new_tokens=3000, beams=8, per_token=128 << 10,
                         formula="", layers=32, length=1000)  # fmt: skip
    # room: 4 x 8 x 1000 tokens x 128 KiB = 3.91 GiB held, + 100 MiB free; 4 x 8 x 4000 needed
    room = gen.room(fig)
    assert 4 * 8 * 1000 * (128 << 10) + 100 * MIB == room
    beams = oom.generation_fix(fig, gen)["num_beams"]
    assert gen.cache(beams=beams) * gen.growth <= oom.HEADROOM * room
    assert gen.cache(beams=beams + 1) * gen.growth > oom.HEADROOM * room
    greedy = attrs.evolve(gen, beams=1, length=4000)  # the same room: 4 x 4000 tokens held
    prompts = oom.generation_fix(fig, greedy)["prompts_at_a_time"]
    assert 0 < prompts < 4
    one = attrs.evolve(greedy, batch=1, length=2000)
    new = oom.generation_fix(fig, one)["max_new_tokens"]
    assert (one.prompt + new) * one.per_token * one.growth <= oom.HEADROOM * one.room(fig)
    assert {} == oom.generation_fix(fig, attrs.evolve(one, new_tokens=10))  # it fits already


# --- a loss added up as a tensor ----------------------------------------------------------


def _evaluate(weight, message):
    total = 0.0
    for step in range(3):
        loss = (weight * step).sum()
        total += loss
    raise torch.OutOfMemoryError(message)


def _evaluate_by_number(weight, message):
    total = 0.0
    for step in range(3):
        loss = (weight * step).sum()
        total += loss.item()
    raise torch.OutOfMemoryError(message)


def test_a_loss_added_up_as_a_tensor_keeps_every_graph():
    """``total += loss`` with a grad_fn: its line, rewritten to add the number."""
    try:
        _evaluate(torch.ones(4, requires_grad=True), REPORTED[2][0])
    except torch.OutOfMemoryError as exc:
        finding = diagnose(exc, options=Options(probes=False)).findings[0]
    assert "growing" == {f.name: f.value for f in finding.facts}["situation"]
    assert "total += loss" == finding.example_fix.before.strip()
    assert "total += loss.item()" == finding.example_fix.after.strip()
    assert finding.example_fix.location.startswith(__file__)
    assert "keeps every step's graph" in finding.solutions[0].text
    try:
        _evaluate_by_number(torch.ones(4, requires_grad=True), REPORTED[2][0])
    except torch.OutOfMemoryError as exc:
        finding = diagnose(exc, options=Options(probes=False)).findings[0]
    assert "activations" == {f.name: f.value for f in finding.facts}["situation"]


def test_the_8_bit_optimizer_is_set_where_the_arguments_name_one():
    model = oom.ModelMemory(weights=7 * GIB, gradients=7 * GIB, optimizer_state=14 * GIB)
    fig = oom.Figures(requested=1 * GIB, free=0, total=24 * GIB, allocated=23 * GIB)
    torch_adam = oom.Batch(size=4, optim="adamw_torch")
    first = oom._weights_solutions(fig, model, torch_adam)[0]
    assert {"optim": "adamw_bnb_8bit"} == first.settings  # 7 + 7 + 3.5 GiB under 0.9 x 24
    already = oom.Batch(size=4, optim="paged_adamw_8bit")
    assert {} == oom._weights_solutions(fig, model, already)[0].settings
    assert {} == oom._weights_solutions(fig, model, oom.Batch(size=4))[0].settings  # no optim


# --- Apple's MPS ---------------------------------------------------------------------------

# (message, what was free under the cap), each from a public report.
MPS_REPORTED = [
    (  # ComfyUI: a 5.81 GiB request with 2.41 GiB left under the cap
        (
            "MPS backend out of memory (MPS allocated: 15.72 GiB, other allocations: 2.41 MiB, "
            "max allowed: 18.13 GiB). Tried to allocate 5.81 GiB on private pool. Use "
            "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory allocations "
            "(may cause system failure)."
        ),
        to_bytes(18.13, "GiB") - to_bytes(15.72, "GiB") - to_bytes(2.41, "MiB"),
    ),
    (  # hunyuan3d: other allocations take the rest; 256 bytes cannot be had
        (
            "MPS backend out of memory (MPS allocated: 16.00 GB, other allocations: 3.31 GB, max "
            "allowed: 18.13 GB). Tried to allocate 256 bytes on shared pool. Use "
            "PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper limit for memory allocations "
            "(may cause system failure)."
        ),
        0,
    ),
]


@pytest.mark.parametrize(("message", "free"), MPS_REPORTED)
def test_mps_figures_are_read_under_the_allocators_cap(message, free):
    """MPS's "max allowed" is the total; what it and the other allocations leave, the free."""
    finding = diagnose(RuntimeError(message), options=Options(probes=False)).findings[0]
    assert "torch-mps-out-of-memory" == finding.record.id
    facts = {f.name: f.value for f in finding.facts}
    assert "activations" == facts["situation"]
    unit = "GiB" if "GiB" in message else "GB"
    assert to_bytes(18.13, unit) == facts["gpu_total"]
    assert free == facts["gpu_free"]
    assert "Lower the batch size" in finding.solutions[0].text


def test_an_mps_model_is_counted_on_the_mps_device(monkeypatch, tmp_path):
    """The figures say which device ran out: the model's parameters on it are its weights."""
    from transformers import TrainingArguments

    model = torch.nn.Linear(1024, 1024)  # on the CPU: nothing of it on the MPS device
    args = TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=8,
                             report_to=[])  # fmt: skip
    try:
        _train_step(model, torch.optim.AdamW(model.parameters()), args, MPS_REPORTED[0][0])
    except torch.OutOfMemoryError as exc:
        finding = diagnose(exc, options=Options(probes=False)).findings[0]
    facts = {f.name: f.value for f in finding.facts}
    assert 0 == facts["weights_on_gpu"]
    assert 8 == facts["per_device_train_batch_size"]
    assert finding.solutions[0].settings["per_device_train_batch_size"] < 8


# --- the report corpus's out-of-memory errors ---------------------------------------------

CORPUS_SITUATIONS = {
    "vllm-9": "activations",  # the message alone, torch 2.0's wording: 565 MiB free of 44.56 GiB
    "vllm-10": "serving engine",  # vLLM's worker log lines around torch's message
    "torch-14": "allocator limit",  # 4.08 GiB free, 2.26 GiB refused
    "bitsandbytes-9": "fragmentation",
    "bitsandbytes-10": "activations",
    "flash-attn-9": "fragmentation",  # 1.39 GiB reserved, unused; 744 MiB asked for
}


@pytest.mark.parametrize("report", list(CORPUS_SITUATIONS))
def test_the_report_corpus_gets_the_situation_its_figures_show(report):
    import json
    from pathlib import Path

    corpus = Path(__file__).parents[1] / "data" / "reports" / "corpus.jsonl"
    rows = (json.loads(line) for line in corpus.read_text(encoding="utf-8").splitlines())
    text = next(row["text"] for row in rows if row["id"] == report)
    finding = explain(text, options=Options(probes=False)).findings[0]
    assert "torch-cuda-out-of-memory" == finding.record.id
    assert CORPUS_SITUATIONS[report] == {f.name: f.value for f in finding.facts}["situation"]


def test_a_request_below_what_was_free_is_not_the_cards_capacity():
    message = (
        "CUDA out of memory. Tried to allocate 2.26 GiB (GPU 0; 6.00 GiB total capacity; 209.63 "
        "MiB already allocated; 4.08 GiB free; 246.00 MiB reserved in total by PyTorch)"
    )
    first = diagnose(RuntimeError(message), options=Options(probes=False)).findings[0].solutions[0]
    assert "set_per_process_memory_fraction" in first.text
    assert "need more than the card has left" not in first.text


def test_other_processes_measured_live_when_the_message_names_none():
    """torch 2.0's wording lists no processes: under the hook, the probe's NVML figure counts."""
    from errkb.testing import FakeGpu, FakeMeasurements

    message = (  # vLLM issue 783: 16 GiB of the 44.56 GiB card unaccounted for
        "CUDA out of memory. Tried to allocate 1.63 GiB (GPU 0; 44.56 GiB total capacity; 27.91 "
        "GiB already allocated; 565.31 MiB free; 27.93 GiB reserved in total by PyTorch) If "
        "reserved memory is >> allocated memory try setting max_split_size_mb to avoid "
        "fragmentation.  See documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"
    )
    gpu = FakeGpu(total_bytes=round(44.56 * GIB), free_bytes=565 * MIB,
                  other_processes_bytes=15 * GIB)  # fmt: skip
    options = Options(measurements=FakeMeasurements(gpus=[gpu]))
    try:
        raise torch.OutOfMemoryError(message)
    except torch.OutOfMemoryError as exc:
        finding = diagnose(exc, options=options).findings[0]
    facts = {f.name: f for f in finding.facts}
    assert "another process" == facts["situation"].value
    assert (15 * GIB, "gpu") == (facts["other_processes"].value, facts["other_processes"].source)
    assert "nvidia-smi names them" in finding.solutions[0].text
    pasted = explain(message, options=options).findings[0]  # someone else's machine
    assert "activations" == {f.name: f.value for f in pasted.facts}["situation"]


def test_other_processes_named_by_nvml_get_their_pids_stopped():
    """Under the hook, NVML's pids stand in for the 'Process N has' lines torch 2.0 lacks."""
    from errkb.testing import FakeGpu, FakeMeasurements

    message = (  # vLLM issue 783, as in the test above
        "CUDA out of memory. Tried to allocate 1.63 GiB (GPU 0; 44.56 GiB total capacity; 27.91 "
        "GiB already allocated; 565.31 MiB free; 27.93 GiB reserved in total by PyTorch)"
    )
    gpu = FakeGpu(total_bytes=round(44.56 * GIB), free_bytes=565 * MIB,
                  other_processes_bytes=15 * GIB, other_processes=((4242, 15 * GIB),))  # fmt: skip
    try:
        raise torch.OutOfMemoryError(message)
    except torch.OutOfMemoryError as exc:
        finding = diagnose(exc, options=Options(measurements=FakeMeasurements(gpus=[gpu])))
    finding = finding.findings[0]
    facts = {f.name: f for f in finding.facts}
    assert ("gpu", "pids 4242, measured after the error, through NVML") == (
        facts["other_processes"].source,
        facts["other_processes"].note,
    )
    assert {"stop_pids": [4242]} == finding.solutions[0].settings
    assert "4242 (15 GiB)" in finding.solutions[0].text


# A vLLM 0.6 engine's log up to its CUDA graph capture (public reports' lines: model_runner.py's
# capture message, as vLLM 0.6.x prints it), then torch's error.
CAPTURE_LOG = (
    "$ vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 8192\n"
    "INFO 12-22 10:55:35 gpu_executor.py:76] # GPU blocks: 715, # CPU blocks: 1310\n"
    "INFO 12-22 10:55:35 gpu_executor.py:80] Maximum concurrency for 2048 tokens per request: "
    "5.59x\n"
    "INFO 12-22 10:55:38 model_runner.py:1413] Capturing cudagraphs for decoding. This may lead "
    "to unexpected consequences if the model is not static. To run the model in eager mode, set "
    "'enforce_eager=True' or use '--enforce-eager' in the CLI.\n"
    f"torch.OutOfMemoryError: {REPORTED[2][0]}\n"
)


def test_a_serving_engine_out_of_memory_capturing_cuda_graphs_runs_eager():
    """vLLM's log says a capture began and never finished: enforce_eager, in the pasted command."""
    finding = explain(CAPTURE_LOG, options=Options(probes=False)).findings[0]
    facts = {f.name: f.value for f in finding.facts}
    assert ("serving engine", "capturing CUDA graphs") == (
        facts["situation"],
        facts["engine_phase"],
    )
    assert {"enforce_eager": True} == finding.solutions[0].settings
    assert "--enforce-eager" in finding.example_fix.after
    assert "vllm serve meta-llama/Llama-3.1-8B-Instruct" in finding.example_fix.before
    finished = CAPTURE_LOG.replace(
        "torch.OutOfMemoryError",
        "INFO 12-22 10:55:52 model_runner.py:1535] Graph capturing "
        "finished in 14 secs.\ntorch.OutOfMemoryError",
    )
    facts = {
        f.name: f.value for f in explain(finished, options=Options(probes=False)).findings[0].facts
    }
    assert "engine_phase" not in facts  # the capture had finished: something else ran out


@pytest.mark.parametrize(
    ("relative", "function", "phase", "said"),
    [
        ("site-packages/vllm/worker/model_runner.py", "capture_model", "capturing CUDA graphs",
         "enforce_eager=True"),
        ("site-packages/vllm/v1/worker/gpu_model_runner.py", "profile_run", "profiling",
         "lower max_num_batched_tokens and max_num_seqs"),
        ("site-packages/vllm/v1/sample/sampler.py", "forward", "sampling", "lower max_num_seqs"),
    ],
)  # fmt: skip
def test_a_serving_engines_phase_from_its_frames(tmp_path, relative, function, phase, said):
    exc = _raise_from(tmp_path, relative, REPORTED[2][0], function)
    finding = diagnose(exc, options=Options(probes=False)).findings[0]
    assert phase == {f.name: f.value for f in finding.facts}["engine_phase"]
    assert said in finding.solutions[0].text


# torch's wordings across its releases, each as a report printed it (see the record's history:
# "cached)" before 1.4, "reserved in total by PyTorch)" to 2.0, "capacty" in 2.1, the per-process
# sentences and "private pools" later, HIP on ROCm): (message, requested, total, free).
WORDINGS = [
    (("CUDA out of memory. Tried to allocate 8.13 GiB (GPU 0; 10.76 GiB total capacity; 643.57 MiB "
     "already allocated; 8.20 GiB free; 32.43 MiB cached)"), "8.13 GiB", "10.76 GiB", "8.20 GiB"),
    (("CUDA out of memory. Tried to allocate 36.00 MiB (GPU 0; 7.93 GiB total capacity; 130.35 MiB "
     "already allocated; 47.06 MiB free; 188.00 MiB reserved in total by PyTorch) If reserved "
     "memory is >> allocated memory try setting max_split_size_mb to avoid fragmentation.  See "
     "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"),
     "36.00 MiB", "7.93 GiB", "47.06 MiB"),
    (("CUDA out of memory. Tried to allocate 5.96 GiB. GPU 0 has a total capacty of 23.69 GiB of "
     "which 5.25 GiB is free. Process 2006998 has 256.00 MiB memory in use. Including non-PyTorch "
     "memory, this process has 18.17 GiB memory in use. Of the allocated memory 17.88 GiB is "
     "allocated by PyTorch, and 0 bytes is reserved by PyTorch but unallocated. If reserved but "
     "unallocated memory is large try setting max_split_size_mb to avoid fragmentation.  See "
     "documentation for Memory Management and PYTORCH_CUDA_ALLOC_CONF"),
     "5.96 GiB", "23.69 GiB", "5.25 GiB"),
    (("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.25 GiB of "
     "which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.21 GiB memory in "
     "use. Of the allocated memory 70.12 GiB is allocated by PyTorch, with 4.50 GiB allocated in "
     "private pools (e.g., CUDA Graphs), and 1.31 GiB is reserved by PyTorch but unallocated. If "
     "reserved but unallocated memory is large try setting "
     "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
     "for Memory Management  (https://docs.pytorch.org/docs/stable/notes/cuda.html"
     "#optimizing-memory-usage-with-pytorch-cuda-alloc-conf)"),
     "2.00 GiB", "79.25 GiB", "1.02 GiB"),
    (("HIP out of memory. Tried to allocate 432.00 MiB. GPU 0 has a total capacity of 15.92 GiB of "
     "which 7.12 GiB is free. Of the allocated memory 8.08 GiB is allocated by PyTorch, and "
     "321.96 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
     "large try setting PYTORCH_HIP_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  "
     "See documentation for Memory Management  "
     "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"),
     "432.00 MiB", "15.92 GiB", "7.12 GiB"),
]  # fmt: skip


@pytest.mark.parametrize(("message", "requested", "total", "free"), WORDINGS)
def test_every_wording_torch_printed_gives_its_figures(message, requested, total, free):
    from errkb.units import parse_size

    fig = oom.figures_of(_match(message).captures, message)
    assert fig is not None
    assert (parse_size(requested), parse_size(total), parse_size(free)) == (
        fig.requested,
        fig.total,
        fig.free,
    )
    assert oom.situation(fig) in oom.SITUATIONS
