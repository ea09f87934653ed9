"""Errors of version skew that ChatTTS users report, raised for real by the installed ChatTTS 0.2.5.

Runs in ``nox -s chattts`` (ChatTTS 0.2.5 and vLLM 0.2.7 as published, CPU torch). Each case
runs in a child process, so that what it does to ``sys.modules`` stays there, and asks errkb
about the exception the child caught, traceback included.

* The vendored engine against a newer vLLM: vLLM 0.5.5 and later ship ``vllm/block.py`` without
  ``LogicalTokenBlock`` (checked in the 0.5.5, 0.6.0 and 0.6.3 wheels). The child loads the
  installed 0.2.7 ``vllm/block.py`` with that one class left out, in place of ``vllm.block``, and
  imports ``ChatTTS.model.velocity`` as ``Chat.load(use_vllm=True)`` does; Python's import
  machinery raises the ImportError from ChatTTS/model/velocity/sequence.py:7.
* Code written for ChatTTS's May-June 2024 API calls ``chat.load_models()`` on the real
  ``ChatTTS.Chat`` of 0.2.5. ChatTTS/__init__.py imports the audio stack (vocos,
  vector_quantize_pytorch, torchaudio, numba, pybase16384), which this venv does not install and
  which neither ``Chat()`` nor the attribute lookup uses; the child registers empty modules
  under those names before the import.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
ROOT = HERE.parent.parent

#: Prints, as JSON, the caught exception and errkb's best finding for it.
REPORT = """
import json
import errkb


def report(exc):
    diagnosis = errkb.diagnose(exc)
    top = diagnosis.findings[0].record.id if diagnosis and diagnosis.findings else None
    print(json.dumps({"class": type(exc).__name__, "message": str(exc), "top": top}))
"""

NEWER_VLLM = """
import ast
import sys
import types

import machine

machine._register_vllm_c()
machine._register_chattts()
import vllm.block

path = vllm.block.__file__
tree = ast.parse(open(path).read())
tree.body = [
    node
    for node in tree.body
    if not (isinstance(node, ast.ClassDef) and node.name == "LogicalTokenBlock")
]
newer = types.ModuleType("vllm.block")
newer.__file__ = path
exec(compile(tree, path, "exec"), newer.__dict__)
sys.modules["vllm.block"] = newer
try:
    import ChatTTS.model.velocity  # what Chat.load(use_vllm=True) imports
except ImportError as exc:
    report(exc)
"""

OLD_API = """
import importlib.machinery
import sys
import types

for name in ("vocos", "vocos.pretrained", "vector_quantize_pytorch", "torchaudio", "numba",
             "pybase16384"):
    module = types.ModuleType(name)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules[name] = module
sys.modules["vocos"].Vocos = object
sys.modules["vocos.pretrained"].instantiate_class = None
sys.modules["vector_quantize_pytorch"].GroupedResidualFSQ = object
sys.modules["numba"].jit = lambda *args, **kwargs: (lambda function: function)

import ChatTTS

chat = ChatTTS.Chat()
try:
    chat.load_models(source="local", local_path="models", compile=False)
except AttributeError as exc:
    report(exc)
"""


def _run(tmp_path: Path, body: str) -> dict[str, str]:
    script = tmp_path / "child.py"
    script.write_text(REPORT + body)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ERRKB_")}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(ROOT)])
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert lines, f"the child caught nothing: {done.stderr[-3000:]}"
    result: dict[str, str] = json.loads(lines[-1])
    return result


def test_vendored_engine_against_a_vllm_without_logical_token_block(tmp_path: Path) -> None:
    """The message users of vLLM 0.5.5-0.6.3 report finds the ChatTTS engine record."""
    found = _run(tmp_path, NEWER_VLLM)
    assert found["class"] == "ImportError"
    assert found["message"].startswith("cannot import name 'LogicalTokenBlock' from 'vllm.block'")
    assert found["top"] == "chattts-vendored-vllm-newer-vllm"


def test_load_models_on_chattts_0_2_5(tmp_path: Path) -> None:
    """The May-June 2024 loader on the real 0.2.5 Chat finds the rename record."""
    found = _run(tmp_path, OLD_API)
    assert found == {
        "class": "AttributeError",
        "message": "'Chat' object has no attribute 'load_models'",
        "top": "chattts-load-models-renamed",
    }
