"""A computed fix that runs: errkb's example fix, put into the user's file, starts the engine.

Each test writes a user script (or a ``vllm serve`` command) that fails in the stand-in engine
(``tests/data/engine``: vLLM's messages and arithmetic, nothing of errkb's), runs it in a child
process with errkb's hook installed and the same GPU injected into errkb and the engine, takes
the diagnosis' ``example_fix``, splices ``after`` into the file in place of ``before`` at
``location``, checks that the file parses and that nothing outside the edit changed, and runs it
again: the engine must start.

The GPU: 80 GiB, of which the profiling run found 70 GiB in use (weights and activations). The
model: Llama-3-8B-shaped (32 layers, 8 KV heads of 128, bf16), so a block of 16 tokens takes
16 x 2 x 32 x 8 x 128 x 2 = 2 MiB. At the default utilization 0.9 the cache gets 72 - 70 = 2 GiB,
1024 blocks, 16384 tokens; 32768 need 2 GiB more: 0.9 + 2/80 = 0.925, so 0.93. With 74 GiB in
use at 0.94, 1.2 GiB remain (614 blocks, 9824 tokens), and 131072 tokens would need a
utilization above 1: the length is what changes, to 9824.
"""

from __future__ import annotations

import ast
import json
import os
import shlex
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from helpers import (
    DATA,
    DEEPSEEK_V3,
    GEMMA3,
    HOOK_WITH_FAKE_GPU,
    LLAMA,
    _child_env,
    run_cli,
    run_python,
    splice,
)

GIB = 1 << 30
ENGINE = DATA / "engine"

#: The hook, installed in every child by a ``sitecustomize`` module, as errkb's own autostart
#: does, with the GPU the engine sees injected; its diagnosis is also written out as JSON.
SITECUSTOMIZE = HOOK_WITH_FAKE_GPU

#: 80 GiB, 70 GiB used by the model: the default 0.9 leaves 2 GiB, 16384 tokens.
ROOMY = {"FAKE_GPU_TOTAL_BYTES": str(80 * GIB), "FAKE_PEAK_BYTES": str(70 * GIB)}
#: 74 GiB used: at 0.94, 9824 tokens fit, and 131072 cannot at any utilization.
TIGHT = {"FAKE_GPU_TOTAL_BYTES": str(80 * GIB), "FAKE_PEAK_BYTES": str(74 * GIB)}


class Harness:
    """One user's project: the engine installed in a site-packages folder, a model, scripts."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.site = root / "venv" / "lib" / "python3" / "site-packages"
        for package in ("vllm", "chatlib"):
            shutil.copytree(ENGINE / package, self.site / package)
        self.bin = root / "venv" / "bin"
        self.bin.mkdir(parents=True)
        shutil.copy(ENGINE / "bin" / "vllm", self.bin / "vllm")
        self.model = root / "llama"
        self.model.mkdir()
        (self.model / "config.json").write_text(json.dumps(LLAMA))
        self.diagnosis_file = root / "diagnosis.json"
        self.hook = root / "hook"
        self.hook.mkdir()
        (self.hook / "sitecustomize.py").write_text(SITECUSTOMIZE)

    def script(self, source: str, name: str = "serve.py") -> Path:
        """Write a user script; ``MODEL`` in it becomes the model folder's path, quoted."""
        path = self.root / name
        path.write_text(source.replace("MODEL", json.dumps(str(self.model))))
        return path

    def run(self, *args: str, env: dict[str, str], hook: bool = True):
        """Run ``python ARGS`` (a script and its arguments, or ``-m module ...``) under the hook
        (or, ``hook=False``, as a user without errkb runs it)."""
        self.diagnosis_file.unlink(missing_ok=True)
        paths = [str(self.site), *(str(Path(p).resolve()) for p in sys.path if p)]
        if hook:
            paths.insert(0, str(self.hook))
        child = {**env, "PYTHONPATH": os.pathsep.join(paths), "NO_COLOR": "1"}
        child["DIAGNOSIS_JSON"] = str(self.diagnosis_file)
        return subprocess.run(
            [sys.executable, *args],
            capture_output=True,
            env=_child_env(child),
            cwd=self.root,
            timeout=120,
            check=False,
        )

    def fails(self, *args: str, env: dict[str, str]) -> dict:
        """Run, expect the engine to refuse to start, and give the diagnosis' example fix."""
        proc = self.run(*args, env=env)
        assert 1 == proc.returncode, proc.stderr.decode()
        assert b"engine started" not in proc.stdout
        diagnosis = json.loads(self.diagnosis_file.read_text())
        fix = diagnosis["example_fix"]
        assert fix is not None, proc.stderr.decode()
        return fix

    def starts(self, *args: str, env: dict[str, str]) -> None:
        """Run, and expect the engine to start."""
        proc = self.run(*args, env=env)
        assert 0 == proc.returncode, proc.stderr.decode()
        assert b"engine started" in proc.stdout


@pytest.fixture
def harness(tmp_path) -> Harness:
    return Harness(tmp_path)


def fix_and_rerun(harness: Harness, path: Path, env: dict[str, str]) -> dict:
    """The whole check for a script: it fails, the fix is spliced in, and it starts."""
    fix = harness.fails(str(path), env=env)
    splice(path, fix)
    harness.starts(str(path), env=env)
    return fix


def test_import_errkb_and_install_leave_libcst_unloaded():
    """LibCST loads only when a fix is rewritten, never at import errkb or install()."""
    proc = run_python("import sys, errkb; errkb.install(); print('libcst' in sys.modules)")
    assert (0, b"False") == (proc.returncode, proc.stdout.strip())


# --- Calls as people write them ---------------------------------------------------------------


def test_multi_line_call_without_trailing_comma(harness):
    """LLM(\\n    model=...,\\n    max_model_len=32768\\n): a comma after the old last argument, none doubled."""
    path = harness.script(
        textwrap.dedent(
            """\
            from vllm import LLM

            llm = LLM(
                model=MODEL,
                max_model_len=32768
            )
            """
        )
    )
    fix = fix_and_rerun(harness, path, ROOMY)
    assert f"{path}:3" == fix["location"]
    assert fix["after"].endswith("    max_model_len=32768,\n    gpu_memory_utilization=0.93\n)")


def test_modal_from_engine_args_goes_into_the_engine_args(harness):
    """Modal's layout: the keyword goes into AsyncEngineArgs(...), never onto from_engine_args."""
    path = harness.script(
        textwrap.dedent(
            """\
            from vllm import AsyncEngineArgs, AsyncLLMEngine
            from vllm.usage.usage_lib import UsageContext

            engine_args = AsyncEngineArgs(
                model=MODEL,
                max_model_len=32768,
                enforce_eager=True
            )
            engine = AsyncLLMEngine.from_engine_args(
                engine_args,
                usage_context=UsageContext.OPENAI_API_SERVER
            )
            """
        )
    )
    fix = fix_and_rerun(harness, path, ROOMY)
    assert f"{path}:4" == fix["location"]
    assert fix["after"].startswith("engine_args = AsyncEngineArgs(")
    assert "    enforce_eager=True,\n    gpu_memory_utilization=0.93\n)" in fix["after"]
    assert "usage_context=UsageContext.OPENAI_API_SERVER\n)" in path.read_text()


def test_one_line_call_with_trailing_comma(harness):
    """LLM(model=..., max_model_len=32768,): the keyword before the trailing comma, one comma each."""
    path = harness.script("from vllm import LLM\n\nllm = LLM(model=MODEL, max_model_len=32768,)\n")
    fix = fix_and_rerun(harness, path, ROOMY)
    assert fix["after"].endswith(", max_model_len=32768, gpu_memory_utilization=0.93,)")


def test_comment_after_the_last_argument_stays_on_its_line(harness):
    """A comment after the last argument stays beside it; the new keyword gets a line of its own."""
    path = harness.script(
        textwrap.dedent(
            """\
            from vllm import LLM

            llm = LLM(  # the 8B model
                model=MODEL,
                max_model_len=32768  # the context we need
            )
            """
        )
    )
    fix = fix_and_rerun(harness, path, ROOMY)
    assert fix["after"].endswith(
        "    max_model_len=32768,  # the context we need\n    gpu_memory_utilization=0.93\n)"
    )


def test_nested_engine_args_get_the_keyword(harness):
    """LLMEngine.from_engine_args(EngineArgs(...)): the inner call takes the keyword."""
    path = harness.script(
        textwrap.dedent(
            """\
            from vllm import EngineArgs, LLMEngine

            engine = LLMEngine.from_engine_args(EngineArgs(model=MODEL, max_model_len=32768))
            """
        )
    )
    fix = fix_and_rerun(harness, path, ROOMY)
    assert "max_model_len=32768, gpu_memory_utilization=0.93))" in fix["after"]


def test_split_engine_args_assignment_gets_the_keyword(harness):
    """engine_args = EngineArgs(...) above from_engine_args(engine_args): the assignment changes."""
    path = harness.script(
        textwrap.dedent(
            """\
            from vllm import EngineArgs, LLMEngine


            def main():
                engine_args = EngineArgs(model=MODEL, max_model_len=32768)
                print("building the engine")
                return LLMEngine.from_engine_args(engine_args)


            main()
            """
        )
    )
    fix = fix_and_rerun(harness, path, ROOMY)
    assert f"{path}:5" == fix["location"]
    assert fix["after"].endswith("max_model_len=32768, gpu_memory_utilization=0.93)")
    assert fix["before"].startswith("    engine_args = EngineArgs(")


def test_async_engine_nested_multi_line(harness):
    """AsyncLLMEngine.from_engine_args(AsyncEngineArgs(...)) over several lines."""
    path = harness.script(
        textwrap.dedent(
            """\
            from vllm import AsyncEngineArgs, AsyncLLMEngine

            engine = AsyncLLMEngine.from_engine_args(
                AsyncEngineArgs(
                    model=MODEL,
                    max_model_len=32768,
                ),
            )
            """
        )
    )
    fix = fix_and_rerun(harness, path, ROOMY)
    assert (
        "        max_model_len=32768,\n        gpu_memory_utilization=0.93,\n    )," in fix["after"]
    )


def test_kwargs_dict_literal_changes_where_the_value_is_written(harness):
    """LLM(**kwargs) with kwargs a dict above: its "max_model_len" entry changes, no second value."""
    path = harness.script(
        textwrap.dedent(
            """\
            from vllm import LLM

            kwargs = {
                "model": MODEL,
                "max_model_len": 131072,
                "gpu_memory_utilization": 0.94,
            }
            llm = LLM(**kwargs)
            """
        )
    )
    fix = fix_and_rerun(harness, path, TIGHT)
    assert f"{path}:3" == fix["location"]
    assert '    "max_model_len": 9824,' in fix["after"]
    assert "llm = LLM(**kwargs)" in path.read_text()


def test_kwargs_set_by_item_above_the_call(harness):
    """kwargs = dict(...) then kwargs["max_model_len"] = 131072: the item assignment changes."""
    path = harness.script(
        textwrap.dedent(
            """\
            from vllm import LLM

            kwargs = dict(model=MODEL, gpu_memory_utilization=0.94)
            kwargs["max_model_len"] = 131072
            llm = LLM(**kwargs)
            """
        )
    )
    fix = fix_and_rerun(harness, path, TIGHT)
    assert 'kwargs["max_model_len"] = 9824' == fix["after"]


def test_wrapper_with_double_star_changes_the_callers_keyword(harness):
    """build(path, **kw) called as build(..., max_model_len=131072): the caller's keyword changes."""
    path = harness.script(
        textwrap.dedent(
            """\
            from vllm import LLM


            def build(path, **kw):
                return LLM(model=path, **kw)


            llm = build(MODEL, gpu_memory_utilization=0.94, max_model_len=131072)
            """
        )
    )
    fix = fix_and_rerun(harness, path, TIGHT)
    assert f"{path}:8" == fix["location"]
    assert fix["after"].endswith("gpu_memory_utilization=0.94, max_model_len=9824)")
    assert "    return LLM(model=path, **kw)" in path.read_text()


def test_value_named_above_the_call_changes_where_it_is_assigned(harness):
    """max_len = 131072 ... LLM(max_model_len=max_len): the assignment changes."""
    path = harness.script(
        textwrap.dedent(
            """\
            from vllm import LLM

            MAX_LEN = 131072  # the longest prompt we serve
            llm = LLM(model=MODEL, max_model_len=MAX_LEN, gpu_memory_utilization=0.94)
            """
        )
    )
    fix = fix_and_rerun(harness, path, TIGHT)
    assert "MAX_LEN = 9824  # the longest prompt we serve" == fix["after"]


def test_unseen_double_star_mapping_gets_the_value_merged_in(harness):
    """LLM(**settings) with settings read from a file: {**settings, key: value} wins either way."""
    harness.root.joinpath("settings.json").write_text(
        json.dumps({"model": str(harness.model), "max_model_len": 32768})
    )
    path = harness.script(
        textwrap.dedent(
            """\
            import json
            from pathlib import Path

            from vllm import LLM

            settings = json.loads((Path(__file__).parent / "settings.json").read_text())
            llm = LLM(**settings)
            """
        )
    )
    fix = fix_and_rerun(harness, path, ROOMY)
    assert 'llm = LLM(**{**settings, "gpu_memory_utilization": 0.93})' == fix["after"]


def test_tab_indented_file(harness):
    """A file indented with tabs gets a rewrite, indented with tabs."""
    path = harness.script(
        "from vllm import LLM\n\n\ndef main():\n\tllm = LLM(\n\t\tmodel=MODEL,\n"
        "\t\tmax_model_len=32768,\n\t)\n\treturn llm\n\n\nmain()\n"
    )
    fix = fix_and_rerun(harness, path, ROOMY)
    assert "\t\tmax_model_len=32768,\n\t\tgpu_memory_utilization=0.93,\n\t)" in fix["after"]


def test_triple_quoted_string_in_an_indented_call_keeps_its_content(harness):
    """A multi-line string inside the call comes back byte for byte: the value is unchanged."""
    source = textwrap.dedent(
        '''\
        from vllm import LLM


        def main():
            return LLM(
                model=MODEL,
                served_model_name="""llama
          served with a long context
        """,
                max_model_len=32768,
            )


        main()
        '''
    )
    path = harness.script(source)

    def name(text: str) -> str:
        keywords = [n for n in ast.walk(ast.parse(text)) if isinstance(n, ast.keyword)]
        return next(k.value.value for k in keywords if k.arg == "served_model_name")

    original = name(path.read_text())
    fix_and_rerun(harness, path, ROOMY)
    assert original == name(path.read_text())


def test_v1_engine_multi_line_call(harness):
    """V1 (0.9.1 wording): 4 GiB needed, 2 GiB available: 0.93 gives the cache 4.4 GiB."""
    path = harness.script(
        "from vllm import LLM\n\nllm = LLM(\n    model=MODEL,\n    max_model_len=32768\n)\n"
    )
    fix = fix_and_rerun(harness, path, {**ROOMY, "VLLM_USE_V1": "1"})
    assert fix["after"].endswith("    max_model_len=32768,\n    gpu_memory_utilization=0.93\n)")


@pytest.mark.parametrize("version", ["0.7.3", "0.8.3", "0.8.4"])
def test_v1_engine_older_wordings(harness, version):
    """V1's earlier messages ("GB", no estimate, the cut-off estimate) give a fix that runs too."""
    path = harness.script("from vllm import LLM\n\nllm = LLM(model=MODEL, max_model_len=32768)\n")
    env = {**ROOMY, "VLLM_USE_V1": "1", "FAKE_VLLM_VERSION": version}
    fix = fix_and_rerun(harness, path, env)
    assert fix["after"].endswith("max_model_len=32768, gpu_memory_utilization=0.93)")


# --- Where the engine is not built by the user's own call -------------------------------------


def test_vllm_serve_command_line(harness):
    """vllm serve MODEL --max-model-len 131072: the fix is the command line, not vLLM's files."""
    vllm = str(harness.bin / "vllm")
    args = ["serve", str(harness.model), "--max-model-len", "131072"]
    args += ["--gpu-memory-utilization", "0.94"]
    before = {p: p.read_bytes() for p in harness.site.rglob("*.py")}
    fix = harness.fails(vllm, *args, env=TIGHT)
    assert fix["location"] is None
    assert shlex.join(["vllm", *args]) == fix["before"]
    expected = ["vllm", *args]
    expected[expected.index("131072")] = "9824"
    assert shlex.join(expected) == fix["after"]
    assert before == {p: p.read_bytes() for p in harness.site.rglob("*.py")}
    command = shlex.split(fix["after"])
    harness.starts(vllm, *command[1:], env=TIGHT)


def test_api_server_module_command_line(harness):
    """python -m vllm.entrypoints.openai.api_server ...: the same command, the flag added."""
    module = "vllm.entrypoints.openai.api_server"
    fix = harness.fails(
        "-m", module, "--model", str(harness.model), "--max-model-len", "32768", env=ROOMY
    )
    assert fix["after"].startswith(f"python -m {module} --model ")
    assert fix["after"].endswith("--max-model-len 32768 --gpu-memory-utilization 0.93")
    command = shlex.split(fix["after"])
    assert ["python", "-m", module] == command[:3]
    harness.starts("-m", *command[2:], env=ROOMY)


def test_engine_built_inside_a_library_is_reached_from_the_users_file(harness):
    """chatlib builds LLM(...) itself: lines before the user's call give it 0.93; chatlib is untouched."""
    path = harness.script(
        textwrap.dedent(
            """\
            import chatlib


            def main():
                chat = chatlib.Chat()
                chat.load(MODEL)


            main()
            """
        )
    )
    library = {p: p.read_bytes() for p in (harness.site / "chatlib").rglob("*.py")}
    fix = fix_and_rerun(harness, path, ROOMY)
    assert f"{path}:6" == fix["location"]
    assert "installed library" in fix["note"]
    assert fix["after"].startswith("    import chatlib.model.velocity as _engine_home")
    assert '"gpu_memory_utilization": 0.93' in fix["after"]
    assert fix["after"].endswith(
        "\n    chat.load(MODEL)".replace("MODEL", json.dumps(str(harness.model)))
    )
    assert library == {p: p.read_bytes() for p in (harness.site / "chatlib").rglob("*.py")}


def test_no_cache_blocks_at_all(harness):
    """73 GiB of weights, 72 GiB allowed: blocks clamped at zero; the weights the worker loaded
    give (4 GiB for 32768 tokens + 73 GiB) / 80 GiB = 0.9625, so 0.97, which starts."""
    path = harness.script("from vllm import LLM\n\nllm = LLM(model=MODEL, max_model_len=32768)\n")
    env = {**ROOMY, "FAKE_PEAK_BYTES": str(73 * GIB), "FAKE_WEIGHTS_BYTES": str(73 * GIB)}
    fix = fix_and_rerun(harness, path, env)
    assert fix["after"].endswith("max_model_len=32768, gpu_memory_utilization=0.97)")


# --- A pasted log -----------------------------------------------------------------------------

API_SERVER = "vllm.entrypoints.openai.api_server"


def pasted_log(harness: Harness, command: list[str], env: dict[str, str]) -> bytes:
    """What a user pastes: the command line they typed, then what it printed (no errkb there).

    ``command`` is ``["python", "-m", API_SERVER, ...]``; the stand-in's console script runs the
    same entry point.
    """
    proc = harness.run(*command[1:], env=env, hook=False)
    assert 1 == proc.returncode, proc.stderr.decode()
    return f"(venv) $ {shlex.join(command)}\n".encode() + proc.stdout + proc.stderr


def explain_paste(text: bytes, *flags: str) -> dict:
    """``errkb explain --json [FLAGS] -`` of a pasted text, measuring nothing."""
    proc = run_cli("explain", "--json", "--no-probes", *flags, "-", stdin=text)
    assert 0 == proc.returncode, proc.stderr.decode()
    return json.loads(proc.stdout)


def test_pasted_command_line_is_the_fix(harness):
    """A paste with the api_server command above the error: the fix is that command with
    --max-model-len 9824 (what the message says fits), and it starts."""
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "131072", "--gpu-memory-utilization", "0.94"]
    diagnosis = explain_paste(pasted_log(harness, command, TIGHT))
    fix = diagnosis["example_fix"]
    assert shlex.join(command) == fix["before"]
    expected = [*command]
    expected[expected.index("131072")] = "9824"
    assert shlex.join(expected) == fix["after"]
    assert "pasted" in fix["note"]
    harness.starts(*shlex.split(fix["after"])[1:], env=TIGHT)


def test_pasted_vllm_serve_line_gets_the_computed_length(harness):
    """``vllm serve MODEL --max-model-len 131072`` pasted above the error (its traceback's files
    not on this machine): the same line with the computed length, which starts."""
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "131072", "--gpu-memory-utilization", "0.94"]
    log = pasted_log(harness, command, TIGHT).decode()
    typed = shlex.join(["vllm", "serve", "/models/llama", *command[5:]])
    # The traceback as printed on the machine where it ran: its files are not here.
    log = log.replace(f"(venv) $ {shlex.join(command)}", f"$ {typed} 2>&1 | tee serve.log")
    log = log.replace(str(harness.site), "/srv/venv/lib/python3.11/site-packages")
    fix = explain_paste(log.encode())["example_fix"]
    assert typed == fix["before"]
    assert typed.replace("131072", "9824") == fix["after"]
    after = shlex.split(fix["after"])
    after[2] = str(harness.model)
    harness.starts(str(harness.bin / "vllm"), *after[1:], env=TIGHT)


def test_dtype_flag_makes_a_float32_cache_four_bytes_a_value(harness):
    """--dtype float32 with an 'auto' cache: 4 bytes a value (256 KiB a token). At 0.9 the cache
    holds 8192 tokens; the 8192 more of 16384 take 2 GiB: 0.9 + 2/80 = 0.925, 0.93, which starts
    (16 bits would say 0.92, which leaves 14736 tokens)."""
    command = ["python", "-m", API_SERVER, "--model", str(harness.model), "--dtype", "float32"]
    command += ["--max-model-len", "16384"]
    paste = pasted_log(harness, command, ROOMY)
    flags = ("--model", str(harness.model), "--gpu-memory", "80GiB", "--dtype", "float32")
    diagnosis = explain_paste(paste, *flags)
    facts = {f["name"]: f for f in diagnosis["facts"]}
    assert (4, "flag") == (
        facts["kv_cache_dtype_bytes"]["value"],
        facts["kv_cache_dtype_bytes"]["source"],
    )
    assert 262144 == facts["kv_bytes_per_token"]["value"]
    fix = diagnosis["example_fix"]
    assert shlex.join([*command, "--gpu-memory-utilization", "0.93"]) == fix["after"]
    harness.starts(*shlex.split(fix["after"])[1:], env=ROOMY)


# --- Number cases (issue 14): each expected value worked from vLLM's source ------------------


def model_folder(harness: Harness, name: str, config: dict) -> str:
    """A second model folder beside the Llama one; its path, quoted for a script."""
    folder = harness.root / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    return json.dumps(str(folder))


def test_v1_sliding_window_gemma3_gets_0_93(harness):
    """Gemma-3-27B shape, V1 0.9.1, 12.00 GiB available at 0.9 on 80 GiB: 10 full layers x 8192
    blocks x 128 KiB = 10 GiB, 52 sliding layers x (cdiv(1023 + 8192, 16) + 1 = 577) blocks x
    128 KiB = 3.66 GiB (kv_cache_interface.py:138-154@v0.9.1); 0.9 + 1.66 / 80 = 0.9208, 0.93,
    which gives 14.4 GiB and starts (as if every layer were full, 62 GiB: infeasible)."""
    gemma = model_folder(harness, "gemma", GEMMA3)
    path = harness.script(
        "from vllm import LLM\n\n"
        f"llm = LLM(model={gemma}, max_model_len=131072, max_num_batched_tokens=8192)\n"
    )
    env = {**ROOMY, "FAKE_PEAK_BYTES": str(60 * GIB), "VLLM_USE_V1": "1"}
    proc = harness.run(str(path), env=env)
    assert b"(13.66 GiB KV cache is needed" in proc.stderr
    assert b"available KV cache memory (12.00 GiB)" in proc.stderr
    fix = fix_and_rerun(harness, path, env)
    assert fix["after"].endswith("max_num_batched_tokens=8192, gpu_memory_utilization=0.93)")


def test_v1_rounded_sizes_give_a_length_vllm_accepts(harness):
    """Llama-3-8B shape, V1 0.8.4-0.9.0 wording (no estimate), "16.00 GiB" needed, "9.47 GiB"
    available (10,164,040,105 bytes: 4846 blocks of 2 MiB). 0.99 would be needed, more than the
    73 GiB free at start allows, so the length changes: 77536, which the engine accepts (77568
    needs 10,166,992,896 bytes). From the run's frames and from a pasted log alike."""
    peak = int(80 * GIB * 0.9) - 10_164_040_105
    env = {
        **ROOMY,
        "FAKE_PEAK_BYTES": str(peak),
        "FAKE_GPU_FREE_BYTES": str(73 * GIB),
        "VLLM_USE_V1": "1",
        "FAKE_VLLM_VERSION": "0.9.0",
    }
    path = harness.script("from vllm import LLM\n\nllm = LLM(model=MODEL, max_model_len=131072)\n")
    proc = harness.run(str(path), env=env)
    assert b"(16.00 GiB KV cache is needed" in proc.stderr
    assert b"memory (9.47 GiB). Based on the available memory,  Try" in proc.stderr
    fix = fix_and_rerun(harness, path, env)
    assert fix["after"].endswith(", max_model_len=77536)")
    # The message alone: the least 9.47 GiB can be gives the same length.
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "131072"]
    diagnosis = explain_paste(
        pasted_log(harness, command, env), "--model", str(harness.model), "--gpu-memory", "80GiB"
    )
    lengths = [
        s["settings"]["max_model_len"]
        for s in diagnosis["solutions"]
        if "max_model_len" in s["settings"]
    ]
    assert [77536] == lengths
    command[command.index("131072")] = "77536"
    harness.starts(*command[1:], env=env)


@pytest.mark.parametrize("version", ["0.20.0", "0.22.0"])
def test_v1_default_utilization_092_from_0_20(harness, version):
    """From 0.20.0 the default is 0.92 (config/cache.py:66@v0.20.0): 80 x 0.92 - 70 = 3.6 GiB for
    the 4 GiB that 32768 tokens need; 0.92 + 0.4 / 80 = 0.925, 0.93, which starts."""
    env = {**ROOMY, "VLLM_USE_V1": "1", "FAKE_VLLM_VERSION": version}
    path = harness.script("from vllm import LLM\n\nllm = LLM(model=MODEL, max_model_len=32768)\n")
    fix = fix_and_rerun(harness, path, env)
    assert fix["after"].endswith("max_model_len=32768, gpu_memory_utilization=0.93)")


def test_pasted_0_22_wording_starts_from_the_092_default(harness):
    """A pasted 0.22 log ("the model's", the CPU backend): the run used 0.92, never "0.9 to
    0.91"; the fix, --gpu-memory-utilization 0.93, starts."""
    env = {**ROOMY, "VLLM_USE_V1": "1", "FAKE_VLLM_VERSION": "0.22.0"}
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "32768"]
    paste = pasted_log(harness, command, env)
    assert b"(which also controls CPU memory on the CPU backend)" in paste
    diagnosis = explain_paste(paste, "--model", str(harness.model), "--gpu-memory", "80GiB")
    texts = [s["text"] for s in diagnosis["solutions"] if "gpu_memory_utilization" in s["settings"]]
    assert any("from 0.92 to 0.93" in t for t in texts), texts
    fix = diagnosis["example_fix"]
    assert shlex.join([*command, "--gpu-memory-utilization", "0.93"]) == fix["after"]
    harness.starts(*shlex.split(fix["after"])[1:], env=env)


def test_pipeline_parallel_caches_one_stage(harness):
    """pipeline_parallel_size=2: 16 of 32 layers a GPU, 1 MiB a block. 2 GiB at 0.9 hold 32768
    tokens; 65536 need 2 GiB more: 0.925, 0.93, which starts (all 32 layers would say 0.95)."""
    path = harness.script(
        "from vllm import LLM\n\n"
        "llm = LLM(model=MODEL, max_model_len=65536, pipeline_parallel_size=2)\n"
    )
    fix = fix_and_rerun(harness, path, ROOMY)
    assert fix["after"].endswith("pipeline_parallel_size=2, gpu_memory_utilization=0.93)")


def test_explicit_float32_dtype_caches_four_bytes_a_value(harness):
    """dtype="float32": 4 MiB a block. 2 GiB at 0.9 hold 8192 tokens; 16384 need 2 GiB more:
    0.93, which starts (2 bytes a value would say 0.92, which leaves 14736 tokens)."""
    path = harness.script(
        'from vllm import LLM\n\nllm = LLM(model=MODEL, dtype="float32", max_model_len=16384)\n'
    )
    fix = fix_and_rerun(harness, path, ROOMY)
    assert fix["after"].endswith("max_model_len=16384, gpu_memory_utilization=0.93)")


def test_mla_fp8_ds_mla_page_replicated_under_tensor_parallelism(harness):
    """DeepSeek-V3 shape, kv_cache_dtype="fp8_ds_mla", tensor_parallel_size=2, V1 0.22: 656 bytes
    a token a layer on every GPU (kv_cache_interface.py:331-338@v0.20.0), 163840 tokens x 61
    layers = 6.11 GiB against 5 GiB at 0.92: 0.92 + 1.106 / 80 = 0.9338, 0.94, which starts."""
    deepseek = model_folder(harness, "deepseek", DEEPSEEK_V3)
    path = harness.script(
        "from vllm import LLM\n\n"
        f'llm = LLM(model={deepseek}, max_model_len=163840, kv_cache_dtype="fp8_ds_mla", '
        "tensor_parallel_size=2)\n"
    )
    peak = int(80 * GIB * 0.92) - 5 * GIB
    env = {
        **ROOMY,
        "FAKE_PEAK_BYTES": str(peak),
        "VLLM_USE_V1": "1",
        "FAKE_VLLM_VERSION": "0.22.0",
    }
    fix = fix_and_rerun(harness, path, env)
    assert fix["after"].endswith("tensor_parallel_size=2, gpu_memory_utilization=0.94)")


def test_swapped_numbers_get_a_note_and_no_fix(harness):
    """A pasted V0 message with its numbers swapped ("max seq len (16384) ... KV cache (32768)"):
    the figures contradict each other, so nothing is worked out from them (no setting, no rewrite
    of the pasted command), and a note says why."""
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "32768"]
    paste = pasted_log(harness, command, ROOMY).decode()
    error = "max seq len (32768) is larger than the maximum number of tokens that can be stored in KV cache (16384)"
    assert error in paste
    swapped = error.replace("32768", "X").replace("16384", "32768").replace("X", "16384")
    diagnosis = explain_paste(paste.replace(error, swapped).encode())
    assert [] == [s for s in diagnosis["solutions"] if s["settings"]]
    # Nothing computed and nothing shown to copy: not even the record's own illustration,
    # whose figures could read as advice for these contradicting numbers.
    assert diagnosis["example_fix"] is None
    assert any("contradict each other" in n for n in diagnosis["notes"]), diagnosis["notes"]


# --- Zero blocks (issue 22): the utilization that starts the engine in one step -------------

#: ChatTTS's GPT as its config describes it (ChatTTS/config/config.py:51-57@0.2.5): 20 layers,
#: 12 heads of 64, float16, so a block of 16 tokens takes 983040 bytes; 4096 positions.
CHATTTS_GPT = {
    "model_type": "llama",
    "num_hidden_layers": 20,
    "num_attention_heads": 12,
    "hidden_size": 768,
    "torch_dtype": "float16",
    "max_position_embeddings": 4096,
}


def test_zero_blocks_under_the_hook_take_the_gpus_peak(harness):
    """The issue's case: an 8 GiB GPU with 7.3 GiB in use after profiling (1 GiB of weights, so
    the weights bound says little). "At least 0.93" leaves 152 blocks, 2432 tokens, and fails;
    the peak the probe measures (6.8 GiB in use at the failure, plus the 0.5 GiB torch's cache
    gave back) gives 0.9 + (256 blocks + 0.1 GiB) / 8 GiB = 0.9418, so 0.95, which starts."""
    gpt = model_folder(harness, "gpt", CHATTTS_GPT)
    path = harness.script(f"from vllm import LLM\n\nllm = LLM(model={gpt})\n")
    peak, weights = int(7.3 * GIB), GIB
    env = {
        "FAKE_GPU_TOTAL_BYTES": str(8 * GIB),
        "FAKE_PEAK_BYTES": str(peak),
        "FAKE_WEIGHTS_BYTES": str(weights),
        # At the failure torch's cache has given back the profile's 0.5 GiB of activations.
        "FAKE_GPU_FREE_BYTES": str(8 * GIB - (peak - GIB // 2)),
        "FAKE_GPU_RESERVED_BYTES": str(weights),
        "FAKE_GPU_PEAK_RESERVED_BYTES": str(weights + GIB // 2),
    }
    before = path.read_text()
    path.write_text(before.replace(")\n", ", gpu_memory_utilization=0.93)\n"))
    proc = harness.run(str(path), env=env, hook=False)
    assert b"stored in KV cache (2432)" in proc.stderr, proc.stderr.decode()
    path.write_text(before)
    fix = fix_and_rerun(harness, path, env)
    assert fix["after"].endswith(f"LLM(model={gpt}, gpu_memory_utilization=0.95)")


def test_zero_blocks_in_a_pasted_v0_log_take_its_profile_line(harness):
    """vLLM 0.6.6's worker logs its profile: 60 GiB of weights, 1.3 non-torch, 11 of activations,
    "the rest of the memory reserved for KV Cache is -0.30GiB" at 0.90 of 80.00 GiB. From the
    paste alone (no --gpu-memory): 0.9 + (2 GiB for 16384 tokens + 0.305 GiB) / 79.995 GiB =
    0.9288, so 0.93, which starts."""
    env = {
        **ROOMY,
        "FAKE_PEAK_BYTES": str(int(72.3 * GIB)),
        "FAKE_WEIGHTS_BYTES": str(60 * GIB),
        "FAKE_NON_TORCH_BYTES": str(int(1.3 * GIB)),
        "FAKE_VLLM_VERSION": "0.6.6",
    }
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "16384"]
    paste = pasted_log(harness, command, env)
    assert b"the rest of the memory reserved for KV Cache is -0.30GiB." in paste
    assert b"No available memory for the cache blocks" in paste
    diagnosis = explain_paste(paste, "--model", str(harness.model))
    facts = {f["name"]: f for f in diagnosis["facts"]}
    assert ("message", 0.93) == (
        facts["gpu_memory_total"]["source"],
        facts["gpu_memory_utilization_needed"]["value"],
    )
    fix = diagnosis["example_fix"]
    assert shlex.join([*command, "--gpu-memory-utilization", "0.93"]) == fix["after"]
    harness.starts(*shlex.split(fix["after"])[1:], env=env)


def test_zero_blocks_in_a_pasted_v1_log_take_its_available_memory(harness):
    """V1 0.9.1 logs "Available KV cache memory: -0.30 GiB" before it raises; with the GPU's
    80 GiB given and the command's 0.9: 0.9 + (2 GiB + 0.305 GiB) / 80 GiB = 0.9288, 0.93."""
    env = {**ROOMY, "FAKE_PEAK_BYTES": str(int(72.3 * GIB)), "VLLM_USE_V1": "1"}
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "16384", "--gpu-memory-utilization", "0.9"]
    paste = pasted_log(harness, command, env)
    assert b"Available KV cache memory: -0.30 GiB" in paste
    diagnosis = explain_paste(paste, "--model", str(harness.model), "--gpu-memory", "80GiB")
    fix = diagnosis["example_fix"]
    expected = [*command]
    expected[-1] = "0.93"
    assert shlex.join(expected) == fix["after"]
    harness.starts(*shlex.split(fix["after"])[1:], env=env)


def test_zero_blocks_past_a_usable_utilization_change_the_length_too(harness):
    """72.3 GiB profiled at 0.9 of 80 GiB and 131072 tokens asked (16 GiB of cache): the whole
    length needs 0.9 + 16.305 / 79.995 = 1.11, above 1; at 0.95 the cache gets 3.695 GiB, 1891
    blocks, 30256 tokens: both settings at once, which start."""
    env = {
        **ROOMY,
        "FAKE_PEAK_BYTES": str(int(72.3 * GIB)),
        "FAKE_WEIGHTS_BYTES": str(60 * GIB),
        "FAKE_VLLM_VERSION": "0.6.6",
    }
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "131072"]
    diagnosis = explain_paste(pasted_log(harness, command, env), "--model", str(harness.model))
    first = diagnosis["solutions"][0]
    assert {"gpu_memory_utilization": 0.95, "max_model_len": 30256} == first["settings"]
    after = shlex.split(diagnosis["example_fix"]["after"])
    assert ["--max-model-len", "30256", "--gpu-memory-utilization", "0.95"] == after[-4:]
    harness.starts(*after[1:], env=env)


# --- A smaller profiling batch (issue 22): max_num_batched_tokens and chunked prefill --------


def profiled(weights_gib: int, activation_per_token: int, **more: str) -> dict[str, str]:
    """An 80 GiB GPU whose profile is the weights, 1 GiB non-torch, and activations that grow
    with the profiling run's batch (the stand-in's FAKE_ACTIVATION_BYTES_PER_TOKEN)."""
    return {
        "FAKE_GPU_TOTAL_BYTES": str(80 * GIB),
        "FAKE_WEIGHTS_BYTES": str(weights_gib * GIB),
        "FAKE_NON_TORCH_BYTES": str(GIB),
        "FAKE_ACTIVATION_BYTES_PER_TOKEN": str(activation_per_token),
        **more,
    }


def batched_solution(diagnosis: dict) -> dict:
    """The solution that lowers max_num_batched_tokens."""
    found = [s for s in diagnosis["solutions"] if "max_num_batched_tokens" in s["settings"]]
    assert 1 == len(found), diagnosis["solutions"]
    return found[0]


def test_v0_profile_batch_of_the_whole_length_gets_chunked_prefill_and_a_smaller_batch(harness):
    """vLLM 0.6.6 without chunked prefill profiles max(max_model_len, 2048) = 16384 tokens: 4 GiB
    of activations (256 KiB a token) beside 66 GiB of weights and 1 GiB non-torch leave 1 GiB of
    the 72 GiB (0.9 of 80), 8192 tokens. The log's 4.00 GiB (at least 3.995) must free the 1 GiB
    the cache lacks: 16384 x (1 - 1 / 3.995) = 12282, down to 11776, with chunked prefill on,
    which V0 needs below max_model_len. Re-run so (2.875 GiB of activations), it starts at 0.9."""
    env = profiled(66, 256 * 1024, FAKE_VLLM_VERSION="0.6.6")
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "16384"]
    paste = pasted_log(harness, command, env)
    assert b"PyTorch activation peak memory takes 4.00GiB" in paste
    assert b"stored in KV cache (8192)" in paste
    diagnosis = explain_paste(paste, "--model", str(harness.model))
    solution = batched_solution(diagnosis)
    assert {"enable_chunked_prefill": True, "max_num_batched_tokens": 11776} == solution["settings"]
    assert solution["estimate"]
    # The run as the fix says, the user's own settings kept: the same command with the flags.
    from errkb.advisors._callsite import rewrite_command

    _, after = rewrite_command(["python", *command[1:]], solution["settings"])
    assert after.endswith("--enable-chunked-prefill --max-num-batched-tokens 11776")
    harness.starts(*shlex.split(after)[1:], env=env)


def test_v1_debug_profile_line_gives_a_smaller_batch(harness):
    """V1 0.9.1 at VLLM_LOGGING_LEVEL=DEBUG logs 'torch peak memory increase: 8.00GiB' for a batch
    of 16384 tokens (512 KiB a token); 60 GiB of weights and 1 GiB non-torch leave 3 GiB of 72
    for the 4 GiB that 32768 tokens need. At least 7.995 GiB must free 1.005 GiB: 16384 x
    (1 - 1.005 / 7.995) = 14324, down to 13824, which starts (6.75 GiB of activations)."""
    env = profiled(60, 512 * 1024, VLLM_USE_V1="1", VLLM_LOGGING_LEVEL="DEBUG")
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "32768", "--max-num-batched-tokens", "16384"]
    paste = pasted_log(harness, command, env)
    assert b"torch peak memory increase: 8.00GiB" in paste
    assert b"(4.00 GiB KV cache is needed" in paste
    diagnosis = explain_paste(paste, "--model", str(harness.model), "--gpu-memory", "80GiB")
    solution = batched_solution(diagnosis)
    assert {"max_num_batched_tokens": 13824} == solution["settings"]
    expected = [*command]
    expected[expected.index("16384")] = "13824"
    harness.starts(*expected[1:], env=env)


def test_v0_above_32k_turns_chunked_prefill_on_by_itself(harness):
    """vLLM 0.6.6 at 65536 tokens turns chunked prefill on by itself and profiles 2048 tokens
    (arg_utils.py:1081-1108@v0.6.6, config.py:1344@v0.6.5): 0.5 GiB of activations, far less than
    the 3.5 GiB the cache lacks, so no smaller batch is proposed and the advice says why; the
    example fix, the utilization, still starts."""
    env = profiled(66, 256 * 1024, FAKE_VLLM_VERSION="0.6.6")
    command = ["python", "-m", API_SERVER, "--model", str(harness.model)]
    command += ["--max-model-len", "65536"]
    paste = pasted_log(harness, command, env)
    assert b"Chunked prefill is enabled by default for models with max_model_len > 32K" in paste
    assert b"Chunked prefill is enabled with max_num_batched_tokens=2048." in paste
    diagnosis = explain_paste(paste, "--model", str(harness.model), "--gpu-memory", "80GiB")
    facts = {f["name"]: f for f in diagnosis["facts"]}
    assert (2048, "message", True) == (
        facts["max_num_batched_tokens"]["value"],
        facts["max_num_batched_tokens"]["source"],
        facts["chunked_prefill"]["value"],
    )
    said = [s["text"] for s in diagnosis["solutions"] if "vLLM's profiling run" in s["text"]]
    assert 1 == len(said), diagnosis["solutions"]
    assert "cannot make up for it alone" in said[0]
    assert "(2048 tokens here)" in said[0]
    harness.starts(*shlex.split(diagnosis["example_fix"]["after"])[1:], env=env)
