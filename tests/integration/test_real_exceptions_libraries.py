"""Errors that libraries next to the stack raise, raised for real where they install on CPU.

sentencepiece and torch raise their own errors here (a model file that is a Git LFS pointer, a
trainer given no sentences, a loss given a Long target, DistributedDataParallel on a one-process
gloo group); huggingface_hub's short download is raised in test_real_exceptions_hf.py. Errors of
releases or libraries that do not run here (DeepSpeed's ZeRO-3, Ray, tokenizers before 0.23.1,
sentencepiece's older builds) are checked on the texts users pasted, each with its report's URL.
"""

from __future__ import annotations

import io

import pytest
from helpers import run_python, top_match

import errkb

spm = pytest.importorskip("sentencepiece")

_SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a tokenizer splits text into pieces it has learned",
    "sentencepiece trains on raw sentences without pre tokenization",
] * 20


def _train(**options) -> bytes:
    """A SentencePiece model trained on a few sentences, as bytes (or the trainer's error)."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(options.pop("sentences", _SENTENCES)),
        model_writer=model,
        minloglevel=2,
        **options,
    )
    return model.getvalue()


def _explained(text: str, record_id: str) -> None:
    """``text`` (a pasted report) is explained by ``record_id`` first."""
    diagnosis = errkb.explain(text, options=errkb.Options(probes=False))
    assert diagnosis.findings, text
    assert diagnosis.top.record.id == record_id, (text, diagnosis.top.record.id)


# --------------------------------------------------------------------------------------------
# sentencepiece
# --------------------------------------------------------------------------------------------


def test_sentencepiece_git_lfs_pointer_as_model_file(tmp_path):
    """A Git LFS pointer loaded as tokenizer.model is recognised, with its path."""
    pointer = tmp_path / "tokenizer.model"
    pointer.write_text(
        "version https://git-lfs.github.com/spec/v1\n"
        "oid sha256:9e556afd44213b6bd1be2b850ebbbd98f5481437a8021afaf58ee7fb1818d347\n"
        "size 499723\n"
    )
    with pytest.raises(RuntimeError) as info:
        spm.SentencePieceProcessor(model_file=str(pointer))
    top = top_match(info.value)
    assert top.record.id == "sentencepiece-model-file-not-parsed"
    assert top.captures["path"] == str(pointer)


def test_sentencepiece_html_page_as_model_proto():
    """Bytes that are not a ModelProto (the check's own wording, with its line) are recognised."""
    with pytest.raises(RuntimeError) as info:
        spm.SentencePieceProcessor(
            model_proto=b"<!DOCTYPE html><html><body>Not Found</body></html>"
        )
    assert "ParseFromArray" in str(info.value)
    assert top_match(info.value).record.id == "sentencepiece-model-file-not-parsed"


@pytest.mark.parametrize(
    ("url", "text"),
    [
        (
            "https://github.com/google/sentencepiece/issues/296",
            (
                "RuntimeError: Internal: /Users/travis/build/google/sentencepiece/src/"
                "sentencepiece_processor.cc(73) [model_proto->ParseFromArray(serialized.data(), "
                "serialized.size())]"
            ),
        ),
        (
            "https://github.com/google/sentencepiece/issues/604",
            (
                "RuntimeError: Internal: C:\\projects\\sentencepiece\\src\\"
                "sentencepiece_processor.cc(824) [model_proto->ParseFromArray(serialized.data(), "
                "serialized.size())]"
            ),
        ),
        # The title keeps the line alone; its author's COCO-LM report
        # (https://github.com/microsoft/COCO-LM/issues/5) shows the check at line 890.
        (
            "https://github.com/google/sentencepiece/issues/736",
            "RuntimeError: Internal: src/sentencepiece_processor.cc(890)",
        ),
        (
            "https://github.com/google/sentencepiece/issues/909",
            (
                "RuntimeError: Internal: src/sentencepiece_processor.cc(1101) "
                "[model_proto->ParseFromArray(serialized.data(),"
            ),
        ),
        (
            "https://github.com/google/sentencepiece/issues/1054",
            "RuntimeError: Internal: could not parse ModelProto from ./tokenizer.model",
        ),
    ],
)
def test_sentencepiece_model_parse_wordings_of_older_releases(url, text):
    """Each build's path and line, and a title cut after the line, name the same record."""
    _explained(text, "sentencepiece-model-file-not-parsed")


def test_sentencepiece_other_checks_at_other_lines_are_not_the_parse_error():
    """A bare ``sentencepiece_processor.cc(N)`` names the parse check only at its known lines."""
    for text in (
        "RuntimeError: Internal: src/sentencepiece_processor.cc(512)",
        "RuntimeError: Internal: src/sentencepiece_processor.cc(890) [model_->IsUnknown(unk_id_)]",
    ):
        matches = errkb.lookup(text.partition(": ")[2], RuntimeError)
        assert "sentencepiece-model-file-not-parsed" not in {m.record.id for m in matches}


def test_sentencepiece_piece_id_out_of_range():
    """Both raise sites (one id, a list of ids) are recognised."""
    sp = spm.SentencePieceProcessor(model_proto=_train(vocab_size=40, hard_vocab_limit=False))
    too_big = sp.get_piece_size()
    for call in (lambda: sp.id_to_piece(too_big), lambda: sp.decode_ids([1, too_big])):
        with pytest.raises(IndexError) as info:
            call()
        assert top_match(info.value).record.id == "sentencepiece-piece-id-out-of-range"


def test_sentencepiece_trainer_without_sentences():
    with pytest.raises(RuntimeError) as info:
        _train(sentences=[], vocab_size=40)
    assert top_match(info.value).record.id == "sentencepiece-trainer-no-sentences"


def test_sentencepiece_trainer_vocab_size_too_high():
    """The limit the message states is captured for the solution."""
    with pytest.raises(RuntimeError) as info:
        _train(vocab_size=5000)
    top = top_match(info.value)
    assert top.record.id == "sentencepiece-trainer-vocab-size-too-high"
    assert 0 < top.captures["max_vocab_size"] < 5000


# --------------------------------------------------------------------------------------------
# torch
# --------------------------------------------------------------------------------------------


def test_torch_found_dtype_long_target_in_bce():
    torch = pytest.importorskip("torch")
    with pytest.raises(RuntimeError) as info:
        torch.nn.functional.binary_cross_entropy(torch.rand(3), torch.tensor([1, 0, 1]))
    top = top_match(info.value)
    assert top.record.id == "torch-found-dtype-but-expected"
    assert (top.captures["found_dtype"], top.captures["expected_dtype"]) == ("Long", "Float")


@pytest.mark.parametrize(
    ("call", "record_id"),
    [
        (lambda t: t.nn.Embedding(10, 4)(t.tensor([10])), "torch-index-out-of-range-in-self"),
        (
            lambda t: t.nn.Linear(2, 2, device="meta").to("cpu"),
            "torch-cannot-copy-out-of-meta-tensor",
        ),
        (lambda t: t.zeros(1, 4).narrow(0, 0, 2), "torch-narrow-start-plus-length-exceeds-size"),
    ],
    ids=["embedding-id-too-large", "meta-module-to-cpu", "narrow-past-the-end"],
)
def test_torch_eager_checks(call, record_id):
    torch = pytest.importorskip("torch")
    with pytest.raises(Exception) as info:
        call(torch)
    assert top_match(info.value).record.id == record_id


_DDP_TWICE = """
import os, torch, torch.distributed as dist
from torch.utils.checkpoint import checkpoint
os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=os.environ["PORT"])
dist.init_process_group("gloo", rank=0, world_size=1)
class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
    def forward(self, x):
        return checkpoint(self.a, checkpoint(self.a, x, use_reentrant=True), use_reentrant=True)
model = torch.nn.parallel.DistributedDataParallel(M(), find_unused_parameters=True)
try:
    model(torch.randn(2, 4, requires_grad=True)).sum().backward()
except RuntimeError as e:
    print(str(e))
dist.destroy_process_group()
"""


def test_torch_ddp_parameter_marked_ready_twice():
    """Reentrant checkpointing of one module twice under DDP (a real one-process gloo group)."""
    pytest.importorskip("torch")
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = run_python(_DDP_TWICE, env={"PORT": str(port)})
    message = done.stdout.decode()
    assert "mark a variable ready only once" in message, done.stderr.decode()[-2000:]
    matches = errkb.lookup(message.strip(), RuntimeError)
    assert matches[0].record.id == "torch-ddp-variable-marked-ready-twice"


class _Failing:
    """A map-style Dataset whose items raise ``error`` (in the DataLoader's worker process)."""

    def __init__(self, error: str):
        self.error = error

    def __len__(self):
        return 2

    def __getitem__(self, index):
        import torch

        if self.error == "shapes":
            return torch.zeros(2, 3) @ torch.zeros(4, 5)
        return {}["no-such-key"]


@pytest.mark.parametrize(
    ("error", "ranked"),
    [
        # The wrapped error has a record: it comes first, the wrapper after it.
        (
            "shapes",
            ["torch-mat1-mat2-shapes-cannot-be-multiplied", "torch-caught-in-worker-or-replica"],
        ),
        # It has none: the wrapper's record says where to read it.
        ("key", ["torch-caught-in-worker-or-replica"]),
    ],
)
def test_torch_dataloader_worker_wrapper(error, ranked):
    """A worker's error re-raised by the DataLoader, as caught and as pasted."""
    import traceback

    torch = pytest.importorskip("torch")
    loader = torch.utils.data.DataLoader(_Failing(error), num_workers=1)
    with pytest.raises(Exception) as info:
        next(iter(loader))
    assert str(info.value).startswith("Caught ")
    diagnosis = errkb.diagnose(info.value, options=errkb.Options(probes=False))
    assert [f.record.id for f in diagnosis.findings][: len(ranked)] == ranked
    pasted = "".join(traceback.format_exception(info.value))
    _explained(pasted, ranked[0])


# --------------------------------------------------------------------------------------------
# Libraries or releases that do not run here: the texts users pasted
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "text", "record_id"),
    [
        (
            "https://github.com/deepspeedai/DeepSpeed/issues/3156",
            (
                "RuntimeError: still have inflight params [<bound method "
                "Init._convert_to_deepspeed_param.<locals>.ds_summary of Parameter containing:"
            ),
            "deepspeed-zero3-still-have-inflight-params",
        ),
        (
            "https://github.com/zhuoyan-xu/AdaLLaVA/issues/3",
            (
                '    raise RuntimeError(f"still have inflight params "\n'
                "RuntimeError: still have inflight params [{'id': 586, 'status': 'AVAILABLE', "
                "'numel': 65536, 'ds_numel': 65536, 'shape': (16, 4096), 'ds_shape': (16, 4096), "
                "'requires_grad': True, 'grad_shape': None, 'persist': False, "
                "'active_sub_modules': set(), 'ds_tensor.shape': torch.Size([8192])}]"
            ),
            "deepspeed-zero3-still-have-inflight-params",
        ),
        (
            "https://github.com/huggingface/tokenizers/issues/537",
            "RuntimeError: Already borrowed",
            "tokenizers-already-borrowed",
        ),
        (
            "https://github.com/huggingface/huggingface_hub/issues/2520",
            "OSError: Consistency check failed",
            "huggingface-hub-download-consistency-check-failed",
        ),
        (
            "https://github.com/pytorch/pytorch/issues/45373",
            (
                '  File "/home/mahmood/.local/lib/python3.7/site-packages/torch/nn/functional.py", '
                "line 2527, in binary_cross_entropy\n"
                "    input, target, weight, reduction_enum)\n"
                "RuntimeError: Found dtype Long but expected Float"
            ),
            "torch-found-dtype-but-expected",
        ),
        (
            "https://github.com/huggingface/transformers/issues/26203",
            "RuntimeError: Caught RuntimeError in replica 0 on device 0",
            "torch-caught-in-worker-or-replica",
        ),
        (
            "https://github.com/huggingface/transformers/issues/15867",
            "IndexError: index out of range in self",
            "torch-index-out-of-range-in-self",
        ),
        (
            "https://github.com/huggingface/transformers/issues/27166",
            "NotImplementedError: Cannot copy out of meta tensor; no data!",
            "torch-cannot-copy-out-of-meta-tensor",
        ),
        (
            "https://github.com/deepspeedai/DeepSpeed/issues/2002",
            "RuntimeError: start (0) + length () exceeds dimension size (1).",
            "torch-narrow-start-plus-length-exceeds-size",
        ),
        (
            "https://github.com/triton-lang/triton/issues/1302",
            "RuntimeError: Triton Error [CUDA]: an illegal memory access was encountered",
            "triton-cuda-illegal-memory-access",
        ),
        (
            "https://github.com/pytorch/audio/issues/1502",
            "RuntimeError: Error loading audio file: failed to open file.",
            "torchaudio-sox-failed-to-open-file",
        ),
        (
            "https://github.com/ray-project/ray/issues/11991",
            "RuntimeError: The actor with name ImplicitFunc failed to be imported",
            "ray-actor-failed-to-import",
        ),
        (
            "https://github.com/ray-project/tutorial/issues/171",
            (
                "    raise value.as_instanceof_cause()\n"
                "ray.exceptions.RayTaskError(TuneError): ray_WrappedTrackFunc:train() (pid=1561, "
                "ip=172.28.0.2)\n"
                '  File "/usr/local/lib/python3.6/dist-packages/ray/tune/trainable.py", '
                "line 176, in train\n"
                "    result = self._train()"
            ),
            "ray-task-error-wrapper",
        ),
        # The task's own error has no record: the wrapper's says where to read it.
        (
            "https://github.com/intel/analytics-zoo/issues/498",
            (
                "RayTaskError(AssertionError): ray::IDLE (pid=188804, ip=192.168.1.1)\n"
                '  File "python/ray/_raylet.pyx", line 414, in ray._raylet.execute_task\n'
                '  File "python/ray/_raylet.pyx", line 417, in ray._raylet.execute_task\n'
                '  File "python/ray/_raylet.pyx", line 440, in ray._raylet.execute_task\n'
                '  File "/hadoop/yarn/local/usercache/hdfs/appcache/application_1608014057528_0031/'
                "container_e15_1608014057528_0031_01_000005/python_env/lib/python3.6/site-packages/"
                'ray/signature.py", line 139, in recover_args\n'
                '    "Flattened arguments need to be even-numbered. See `flatten_args`.")\n'
                "AssertionError: Flattened arguments need to be even-numbered. See `flatten_args`."
            ),
            "ray-task-error-wrapper",
        ),
        (
            "https://github.com/google/sentencepiece/issues/726",
            "AttributeError: 'SentencePieceProcessor' object has no attribute 'Encode'",
            "sentencepiece-processor-encode-added-0-1-91",
        ),
        (
            "https://github.com/huggingface/accelerate/issues/3536",
            "RuntimeError: Expected to mark a variable ready only once.",
            "torch-ddp-variable-marked-ready-twice",
        ),
    ],
)
def test_reported_texts(url, text, record_id):
    _explained(text, record_id)


def test_xformers_dtype_mismatch_names_the_three_dtypes():
    """xformers' check, as pasted in https://github.com/cubiq/ComfyUI_InstantID/issues/202."""
    text = (
        '  File "F:\\AI\\ComfyUI-aki-v1.3\\python\\lib\\site-packages\\xformers\\ops\\fmha\\'
        'common.py", line 121, in validate_inputs\n'
        "    raise ValueError(\n"
        "ValueError: Query/Key/Value should either all have the same dtype, or (in the quantized "
        "case) Key/Value should have dtype torch.int32\n"
        "  query.dtype: torch.float16\n"
        "  key.dtype  : torch.float32\n"
        "  value.dtype: torch.float32\n"
    )
    diagnosis = errkb.explain(text, options=errkb.Options(probes=False))
    top = diagnosis.findings[0]
    assert top.record.id == "xformers-qkv-dtype-mismatch"
    dtypes = {k: top.match.captures[k] for k in ("query_dtype", "key_dtype", "value_dtype")}
    assert dtypes == {
        "query_dtype": "torch.float16",
        "key_dtype": "torch.float32",
        "value_dtype": "torch.float32",
    }
