"""What the tests share: messages, the data folder, and child processes run the same way.

Tests import these with ``from helpers import ...`` (pytest puts ``tests/`` on ``sys.path``:
``pythonpath`` in pyproject.toml); fixtures live in ``conftest.py``.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

from errkb.testing import record_dict

DATA = Path(__file__).parent / "data"

#: The old vLLM engine's KV-cache message, with the seed's example numbers.
SEED_MESSAGE = (
    "The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    "stored in KV cache (12288). Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine."
)
NO_BLOCKS_MESSAGE = (
    "No available memory for the cache blocks. Try increasing `gpu_memory_utilization` when "
    "initializing the engine."
)

#: vLLM's real "Failed to import from vllm._C" log record (records/mined/vllm.jsonl), its sites
#: shortened: up to 0.9.2 in vllm/_custom_ops.py, from 0.11.2 in vllm/platforms/rocm.py.
VLLM_C_RECORD = record_dict(
    id="mined-vllm-7f6e36e941e1",
    slug="failed-to-import-from-vllm-c-with-e-e941e1",
    repo="vllm-project/vllm",
    errorMessage="Failed to import from vllm._C with {e}",
    messagePattern=r"Failed to import from vllm\._C with (?P<e>.+)",
    severity="warning",
    filePath="vllm/platforms/rocm.py",
    lineNumber=58,
    githubUrl="https://github.com/vllm-project/vllm/blob/v0.33.0/vllm/platforms/rocm.py#L58",
    documentation="Logged at module level in vllm/platforms/rocm.py.",
    tags=["mined", "log", "python"],
    versions={
        "distribution": "vllm",
        "first": "0.5.5",
        "checked": "0.33.0",
        "sites": {
            "0.5.5": "vllm/_custom_ops.py:17",
            "0.7.3": ":21",
            "0.9.2": ":20",
            "0.11.2": "vllm/platforms/rocm.py:39",
            "0.33.0": ":58",
        },
    },
)
VLLM_C_MESSAGE = (
    "Failed to import from vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")"
)
#: A Llama-3-8B-shaped config.json: 32 layers, 8 KV heads of 128, bf16 (131072 bytes a token).
LLAMA = {
    "model_type": "llama",
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 131072,
}

#: A Gemma-3-27B shape: 62 layers, every 6th global, the others sliding over 1024 tokens.
GEMMA3 = {
    "model_type": "gemma3_text",
    "num_hidden_layers": 62,
    "num_attention_heads": 32,
    "num_key_value_heads": 16,
    "head_dim": 128,
    "hidden_size": 5376,
    "sliding_window": 1024,
    "sliding_window_pattern": 6,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 131072,
}

#: A DeepSeek-V3 shape: 61 layers of MLA, latent 512 + rope 64.
DEEPSEEK_V3 = {
    "model_type": "deepseek_v3",
    "num_hidden_layers": 61,
    "num_attention_heads": 128,
    "num_key_value_heads": 128,
    "hidden_size": 7168,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 128,
    "torch_dtype": "bfloat16",
    "max_position_embeddings": 163840,
}

#: A child's ``sitecustomize``: errkb's hook installed as its autostart does, with the GPU the
#: stand-in engine sees injected (FAKE_GPU_TOTAL_BYTES, FAKE_GPU_FREE_BYTES); the diagnosis is
#: also written out as JSON to DIAGNOSIS_JSON, for tests that apply its fix and run again.
HOOK_WITH_FAKE_GPU = """
import json, os, sys
import errkb
from errkb import Options
from errkb.testing import FakeGpu, FakeMeasurements

total = int(os.environ["FAKE_GPU_TOTAL_BYTES"])
free = int(os.environ.get("FAKE_GPU_FREE_BYTES", total))
# What torch's allocator holds now and held at its peak, where a test says (else unmeasured).
held = {k: int(os.environ[v]) for k, v in (("reserved_bytes", "FAKE_GPU_RESERVED_BYTES"),
        ("peak_reserved_bytes", "FAKE_GPU_PEAK_RESERVED_BYTES")) if v in os.environ}
gpu = FakeGpu(total_bytes=total, free_bytes=free, **held)
# A generous bound: these tests check what the fix is, not how fast it comes on a busy machine.
options = Options(probes=False, timeout=60, measurements=FakeMeasurements(gpus=[gpu]))
errkb.install(options)
_hook = sys.excepthook


def _hook_and_keep(etype, value, tb):
    _hook(etype, value, tb)
    with open(os.environ["DIAGNOSIS_JSON"], "w") as out:
        json.dump(errkb.diagnose(value, options=options).to_dict(), out)


sys.excepthook = _hook_and_keep
"""

#: A vLLM serve log's ordinary line; ``{n}`` is the line's number.
NOISE = "INFO 11-30 06:00:01 [engine.py:{n}] Avg prompt throughput: 1.5 tokens/s, Running: 3 reqs"


def serve_log(n: int = 50) -> str:
    """A serve log of ``n`` lines: noise, the seed error twice (lines 10, 30), no-blocks once (20)."""
    lines = [NOISE.format(n=i) for i in range(n)]
    lines[9] = f"ERROR 11-30 [core.py:1] ValueError: {SEED_MESSAGE}"
    lines[19] = f"ValueError: {NO_BLOCKS_MESSAGE}"
    lines[29] = f"(EngineCore pid=12) ValueError: {SEED_MESSAGE.replace('32768', '65536')}"
    return "\n".join(lines) + "\n"


def gear_records(n: int) -> list[dict]:
    """``n`` record dicts acme-gear-0.. (``gear{i}x slipped at N rpm``), for packs."""
    return [
        record_dict(
            id=f"acme-gear-{i}",
            slug=f"gear-{i}",
            title=f"Gear {i} slipped",
            severity="error",
            repo="acme/gears",
            errorClass="RuntimeError",
            filePath="gears/drive.py",
            tags=["gears", f"g{i % 3}"],
            messagePattern=rf"gear{i}x slipped at (?P<rpm>\d+) rpm",
            errorMessage=f"gear{i}x slipped at {{rpm}} rpm",
            solutions=[f"Tighten gear {i}.", "Check the belt."],
            documentation="Ünïcode text — kept as it was." * (i % 4),
        )
        for i in range(n)
    ]


def write_pack(path, records, extra_lines=()):
    """Write records (and raw extra lines) to a .jsonl pack at ``path``; returns ``path``."""
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def record_pack(tmp_path, good_record):
    """tmp_path/pack.jsonl holding three copies of ``good_record``: acme-0, acme-1, acme-2."""
    pack = tmp_path / "pack.jsonl"
    lines = [dict(good_record, id=f"acme-{i}", slug=f"s{i}") for i in range(3)]
    pack.write_text("\n".join(json.dumps(r) for r in lines) + "\n", encoding="utf-8")
    return pack


def _child_env(env: dict[str, str] | None) -> dict[str, str]:
    """The environment of a child: ours, less errkb's settings and colour switches."""
    full_env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ERRKB_", "FORCE_COLOR", "NO_COLOR")) or k == "ERRKB_CACHE_DIR"
    }
    full_env.update(env or {})
    return full_env


def top_match(exc: BaseException):
    """The best match errkb finds for a real exception (failing, with its text, if none)."""
    import errkb

    matches = errkb.lookup(str(exc), type(exc))
    assert matches, str(exc)
    return matches[0]


def run_python(
    code: str, *args: str, env: dict[str, str] | None = None, timeout: float = 120, **kw
):
    """Run ``code`` in a fresh interpreter; returns the CompletedProcess with bytes output."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        env=_child_env(env),
        timeout=timeout,
        check=False,
        **kw,
    )


def run_cli(
    *args: str, env: dict[str, str] | None = None, stdin: bytes | None = None, timeout: float = 120
):
    """Run ``python -m errkb ARGS`` in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "errkb", *args],
        capture_output=True,
        env=_child_env(env),
        input=stdin,
        timeout=timeout,
        check=False,
    )


def hand_written_folders() -> list[Path]:
    """The folders of the shipped hand-written records: every library's, not records/mined/.

    The mined packs hold tens of thousands of records; tests that go over every shipped record
    one by one mean the hand-written ones (tests/integration/test_mined_packs.py has the packs).
    """
    from errkb.registry import builtin_records_dir

    return sorted(p for p in builtin_records_dir().iterdir() if p.is_dir() and p.name != "mined")


def write_tree(folder: Path, files: dict[str, str]) -> Path:
    """Write ``{relative path: text}`` under ``folder`` (each text dedented); returns ``folder``."""
    import textwrap

    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip(), encoding="utf-8")
    return folder


def write_wheel(folder: Path, dist: str, version: str, files: dict[str, str]) -> Path:
    """A pure-Python wheel of ``files`` in ``folder`` (enough for pip to resolve and install)."""
    import textwrap
    import zipfile

    stem = dist.replace("-", "_")  # a wheel's file name escapes '-' in the name
    info = f"{stem}-{version}.dist-info"
    body = {name: textwrap.dedent(text).lstrip() for name, text in files.items()}
    body[f"{info}/METADATA"] = f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
    body[f"{info}/WHEEL"] = (
        "Wheel-Version: 1.0\nGenerator: errkb-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    body[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*body, f"{info}/RECORD"])
    wheel = folder / f"{stem}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in body.items():
            archive.writestr(name, text)
    return wheel


def splice(path: Path, fix: dict) -> str:
    """Put ``fix["after"]`` in place of ``fix["before"]`` at ``fix["location"]``; the new text.

    Fails unless the location is this file, ``before`` is what the file holds there, and the
    new file parses; the bytes before and after the edit are the file's own.
    """
    assert fix["location"] is not None, fix
    file, _, line = fix["location"].rpartition(":")
    assert str(path) == file
    old = path.read_bytes()
    lines = old.split(b"\n")
    start = int(line) - 1
    before = fix["before"].encode().split(b"\n")
    assert before == lines[start : start + len(before)], "before is not what the file holds"
    new_lines = [*lines[:start], *fix["after"].encode().split(b"\n"), *lines[start + len(before) :]]
    new = b"\n".join(new_lines)
    head, tail = b"\n".join(lines[:start]), b"\n".join(lines[start + len(before) :])
    assert new.startswith(head)
    assert new.endswith(tail)
    ast.parse(new)
    path.write_bytes(new)
    return new.decode()


#: torch 2.1's out-of-memory message with two other processes on the card, from a public report.
TORCH_OOM_OTHERS = (
    "CUDA out of memory. Tried to allocate 130.00 MiB. GPU 0 has a total capacity of 94.96 GiB "
    "of which 59.69 MiB is free. Process 502587 has 1.78 GiB memory in use. Process 745081 has "
    "86.44 GiB memory in use. Including non-PyTorch memory, this process has 6.62 GiB memory in "
    "use. Of the allocated memory 5.97 GiB is allocated by PyTorch, and 116.33 MiB is reserved "
    "by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation "
    "for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)
