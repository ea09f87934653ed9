"""Ranking on real errors (issue 24): twins, two raise sites of one message, site patterns.

The texts are real: messages and tracebacks copied from public issue threads (URL kept), or
raised here by the released code itself (a release's own function run from its sdist or wheel
in ``.mine-cache/``, at its own file and lines; skipped where the archive is not there).
"""

from __future__ import annotations

import ast
import logging
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from errkb.diagnosis import diagnose, explain
from errkb.options import Options
from errkb.render import render_plain

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".mine-cache"
OPTIONS = Options(probes=False)

# https://github.com/xusenlinzy/api-for-open-llm/issues/225 (vllm 0.2.7, message only).
VLLM_027_MESSAGE = (
    "The model's max seq len (8192) is larger than the maximum number of tokens that can be "
    "stored in KV cache (4512). Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine."
)


def _ids(diagnosis) -> list[str]:
    assert diagnosis is not None
    return [f.match.record.id for f in diagnosis.findings]


def _raised_by_release(archive: str, member: str, function: str, tmp_path: Path) -> BaseException:
    """The error a release's own ``function`` raises, run from its file at its own lines.

    The function's source is read from the release's archive and compiled alone with the file
    name it has in an installed copy, so the traceback's frame is the release's raise site. It
    is called on a stand-in engine whose workers report 176 GPU blocks of 16 tokens (2,816
    tokens) for a 4,096-token model: the case both vLLM 0.2.7 and ChatTTS's copy refuse.
    """
    path = CACHE / archive
    if not path.exists():
        pytest.skip(f"{archive} is not in .mine-cache/ (pip download --no-deps it there)")
    with tarfile.open(path) as tar:
        extracted = tar.extractfile(member)
        assert extracted is not None
        source = extracted.read().decode()
    site = tmp_path / "site-packages" / member.partition("/")[2]
    site.parent.mkdir(parents=True)
    site.write_text(source)
    tree = ast.parse(source)
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    namespace: dict[str, object] = {"logger": logging.getLogger("release")}
    exec(compile(ast.Module(body=[node], type_ignores=[]), str(site), "exec"), namespace)
    engine = SimpleNamespace(
        _run_workers=lambda *args, **kwargs: [(176, 512)],
        cache_config=SimpleNamespace(
            block_size=16, gpu_memory_utilization=0.9, swap_space_bytes=4 << 30
        ),
        model_config=SimpleNamespace(max_model_len=4096),
    )
    try:
        namespace[function](engine)  # type: ignore[operator]
    except ValueError as exc:
        return exc
    raise AssertionError(f"{archive}: {function} did not raise")


def test_twin_without_evidence_names_vllm_first_and_chattts_second():
    """vLLM's message with nothing of ChatTTS around it: vLLM's record, ChatTTS's copy next."""
    ids = _ids(explain(VLLM_027_MESSAGE, options=OPTIONS))
    assert ["vllm-kv-cache-max-seq-len", "chattts-kv-cache-max-seq-len"] == ids[:2]


def test_twin_raised_by_chattts_copy_names_chattts_first(tmp_path):
    """Raised by ChatTTS 0.2.5's vendored engine (its frame in the traceback): ChatTTS's record."""
    exc = _raised_by_release(
        "chattts-0.2.5.tar.gz",
        "chattts-0.2.5/ChatTTS/model/velocity/llm_engine.py",
        "_init_cache",
        tmp_path,
    )
    ids = _ids(diagnose(exc, options=OPTIONS))
    assert ["chattts-kv-cache-max-seq-len", "vllm-kv-cache-max-seq-len"] == ids[:2]


def test_twin_raised_by_vllm_0_2_7_names_vllm_first(tmp_path):
    """Raised by vLLM 0.2.7's own engine (llm_engine.py, a site its versions list): vLLM's."""
    exc = _raised_by_release(
        "vllm-0.2.7.tar.gz", "vllm-0.2.7/vllm/engine/llm_engine.py", "_init_cache", tmp_path
    )
    diagnosis = diagnose(exc, options=OPTIONS)
    assert ["vllm-kv-cache-max-seq-len", "chattts-kv-cache-max-seq-len"] == _ids(diagnosis)[:2]
    assert 9.0 == diagnosis.findings[0].match.site


# https://github.com/ashishpatel26/LLM-Finetuning/issues/4 (peft's inject_adapter, IPython).
PEFT_INJECT_MESSAGE = (
    "ValueError: Target modules {'Wqkv', 'out_proj'} not found in the base model. "
    "Please check the target modules and try again."
)
PEFT_SET_TRAINABLE = """\
from transformers import LlamaConfig, LlamaForCausalLM
from peft import LoraConfig, get_peft_model
config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                     num_attention_heads=2, num_key_value_heads=2)
model = LlamaForCausalLM(config)
get_peft_model(model, LoraConfig(target_modules=["q_proj"],
                                 trainable_token_indices={"embed_tokenz": [0, 1]}))
"""


def test_one_message_two_sites_without_frames_names_the_one_with_a_solution():
    """peft's words with no frames: the hand-written inject_adapter record, which says what to
    do; the mined _set_trainable site is listed under it, not above."""
    diagnosis = explain(PEFT_INJECT_MESSAGE, options=OPTIONS)
    assert "peft-target-modules-not-found" == _ids(diagnosis)[0]
    assert any("peft/utils/other.py" in place for place in diagnosis.findings[0].match.also)


def test_one_message_two_sites_with_frames_names_the_raise_site(tmp_path):
    """The same words raised by peft 0.21.2's _set_trainable (a token index of a layer the model
    lacks), printed by the real library in a child process: the frames name other.py, so its
    mined record ranks above the hand-written inject_adapter one."""
    wheel = CACHE / "peft-0.21.2-py3-none-any.whl"
    if not wheel.exists():
        pytest.skip("peft-0.21.2-py3-none-any.whl is not in .mine-cache/")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(tmp_path / "peft")
    script = tmp_path / "lora.py"
    script.write_text(PEFT_SET_TRAINABLE)
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(tmp_path / "peft"), "PATH": "/usr/bin:/bin"},
        check=False,
        timeout=300,
    )
    assert "Target modules {'embed_tokenz'} not found" in done.stderr
    ids = _ids(explain(done.stderr, options=OPTIONS))
    assert ["mined-peft-32d55c23ab04", "peft-target-modules-not-found"] == ids[:2]


# https://github.com/2noise/ChatTTS/issues/68 (ChatTTS 0.0.x): the reporter's closing backtick
# after the last line is left out.
CHATTTS_BARE_ASSERT = """\
INFO:ChatTTS.core:use cuda:0
WARNING:ChatTTS.core:vocos not initialized.
WARNING:ChatTTS.core:gpt not initialized.
WARNING:ChatTTS.core:tokenizer not initialized.
WARNING:ChatTTS.core:dvae not initialized.
WARNING:ChatTTS.core:vocos not initialized.
WARNING:ChatTTS.core:gpt not initialized.
WARNING:ChatTTS.core:tokenizer not initialized.
WARNING:ChatTTS.core:decoder not initialized.
Traceback (most recent call last):
  File "/home/jiemar/code/ChatTTS/../chatTTS.py", line 13, in <module>
    wavs = chat.infer(texts, use_decoder=True)
  File "/home/jiemar/.local/lib/python3.10/site-packages/ChatTTS/core.py", line 95, in infer
    assert self.check_model(use_decoder=use_decoder)
AssertionError
"""
# https://github.com/vllm-project/llm-compressor/issues/959 (a vLLM model's load_weights).
VLLM_WEIGHT_KEYERROR = """\
ERROR 12-05 20:24:46 engine.py:366]   File "/data/projects/hcece/miniconda3/envs/vllm_wjy_python3.10/lib/python3.10/site-packages/vllm/model_executor/models/utils.py", line 175, in _load_module
ERROR 12-05 20:24:46 engine.py:366]     module_load_weights(weights)
ERROR 12-05 20:24:46 engine.py:366]   File "/data/projects/hcece/miniconda3/envs/vllm_wjy_python3.10/lib/python3.10/site-packages/vllm/model_executor/models/qwen2.py", line 371, in load_weights
ERROR 12-05 20:24:46 engine.py:366]     param = params_dict[name]
ERROR 12-05 20:24:46 engine.py:366] KeyError: 'layers.0.mlp.down_proj.weight_scale'
"""


def test_bare_assertion_at_chattts_model_check_matches_by_its_raise_site():
    """ChatTTS's infer() check has no message: its raise site names the record, as such."""
    diagnosis = explain(CHATTTS_BARE_ASSERT, options=OPTIONS)
    assert ["chattts-infer-models-not-loaded"] == _ids(diagnosis)
    assert diagnosis is not None
    assert diagnosis.findings[0].match.by_site


def test_keyerror_in_a_vllm_weight_loader_matches_by_its_raise_site():
    """A KeyError holding one tensor's name, raised in a vLLM model's load_weights."""
    diagnosis = explain(VLLM_WEIGHT_KEYERROR, options=OPTIONS)
    assert ["vllm-checkpoint-weight-not-in-model"] == _ids(diagnosis)
    assert diagnosis is not None
    assert diagnosis.findings[0].match.by_site


def test_explain_says_a_site_match_is_not_a_message_match():
    """The text output says only where the error was raised matched, not its message."""
    diagnosis = explain(CHATTTS_BARE_ASSERT, options=OPTIONS)
    assert diagnosis is not None
    text = " ".join(render_plain(diagnosis, width=400).split())
    assert "Matched: where AssertionError was raised (infer in " in text
    assert "ChatTTS/core.py), not its message" in text


def test_the_same_bare_assertion_elsewhere_matches_nothing():
    """A bare AssertionError of any other code, printed by Python itself, names no record."""
    done = subprocess.run(
        [sys.executable, "-c", "assert 1 == 2"], capture_output=True, text=True, check=False
    )
    assert done.stderr.rstrip().endswith("AssertionError")
    assert explain(done.stderr, options=OPTIONS) is None
