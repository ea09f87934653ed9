"""errkb.advisors._callsite: finding the engine call in the frames, and writing settings into it.

Each rewrite is checked the way a user would use it: ``after`` is put in place of ``before`` at
the rewrite's line, the file still parses, nothing outside the edit changed, and running the
file again passes the new settings to the engine (a recording stand-in here; the child-process
harness with vLLM's arithmetic is tests/integration/test_fix_runs.py).
"""

from __future__ import annotations

import ast
import textwrap

from errkb.advisors._callsite import CallSite, rewrite_command
from errkb.advisors.kv_cache._engine_calls import (
    engine_file,
    find_engine_call,
    rewrite_settings,
    wrap_library_call,
)
from errkb.findings import FrameInfo


def _frame(path, line: int, library: bool = False) -> FrameInfo:
    return FrameInfo(file=str(path), line=line, function="<module>", library=library)


def _write(tmp_path, source: str, name: str = "serve.py"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def _apply_and_run(path, rewrite) -> dict[str, object]:
    """Splice ``rewrite`` into the file, check the rest is untouched, run it; LLM's keywords."""
    assert str(path) == rewrite.file
    lines = path.read_text().split("\n")
    start, count = rewrite.line - 1, len(rewrite.before.split("\n"))
    assert rewrite.before.split("\n") == lines[start : start + count]
    new = "\n".join([*lines[:start], rewrite.after, *lines[start + count :]])
    ast.parse(new)
    seen: dict[str, object] = {}

    def LLM(*args: object, **kwargs: object) -> None:
        seen.update(kwargs)

    exec(compile(new, str(path), "exec"), {"LLM": LLM})  # the test's own stand-in, not a record
    return seen


def test_find_engine_call_reads_the_call_under_the_frame(tmp_path):
    """The frame's line inside LLM(...) gives the whole call and its keywords."""
    path = _write(tmp_path, 'llm = LLM(\n    model="m",\n    max_model_len=32768,\n)\n')
    site = find_engine_call([_frame(path, 3)])
    assert site is not None
    assert (1, 4, 0) == (site.line, site.end_line, site.index)
    assert ("model", "max_model_len") == site.keywords


def test_find_engine_call_skips_frames_without_one(tmp_path):
    """A frame whose line holds no engine call gives nothing."""
    path = _write(tmp_path, "x = 1\n")
    assert find_engine_call([_frame(path, 1)]) is None


def test_find_engine_call_marks_vllms_own_files(tmp_path):
    """A call in a vllm package's file is the engine's own; the user frame before it is kept."""
    package = tmp_path / "site-packages" / "vllm" / "entrypoints"
    package.mkdir(parents=True)
    server = _write(package, "engine = AsyncLLMEngine.from_engine_args(args)\n", "api_server.py")
    script = _write(tmp_path, "main()\n", "bin_vllm.py")
    site = find_engine_call([_frame(script, 1), _frame(server, 1, library=True)])
    assert site is not None
    assert (True, True, 1) == (site.engine, site.library, site.index)
    assert str(script) == site.user_frame.file


def test_engine_file_needs_a_vllm_package(tmp_path):
    """A user's folder named vllm is not vLLM; an installed or package vllm folder is."""
    (tmp_path / "vllm").mkdir()
    assert not engine_file(str(tmp_path / "vllm" / "serve.py"))
    assert engine_file("/venv/lib/python3.11/site-packages/vllm/worker/worker.py")
    (tmp_path / "vllm" / "__init__.py").write_text("")
    assert engine_file(str(tmp_path / "vllm" / "worker.py"))


def test_rewrite_replaces_an_existing_keyword_and_the_call_runs(tmp_path):
    """An existing max_model_len gets the new value; comments and other arguments stay."""
    path = _write(
        tmp_path, 'llm = LLM(\n    model="m",  # the model\n    max_model_len=32768,\n)\n'
    )
    rewrite = rewrite_settings([_frame(path, 2)], 0, {"max_model_len": 12288})
    assert 'model="m",  # the model' in rewrite.after
    assert {"model": "m", "max_model_len": 12288} == _apply_and_run(path, rewrite)


def test_rewrite_adds_a_missing_keyword_to_a_one_line_call(tmp_path):
    """A keyword the call lacks is added before the closing parenthesis."""
    path = _write(tmp_path, 'llm = LLM(model="m")\n')
    rewrite = rewrite_settings([_frame(path, 1)], 0, {"gpu_memory_utilization": 0.95})
    assert 'llm = LLM(model="m", gpu_memory_utilization=0.95)' == rewrite.after
    assert {"model": "m", "gpu_memory_utilization": 0.95} == _apply_and_run(path, rewrite)


def test_rewrite_adds_keywords_on_their_own_lines_in_a_multi_line_call(tmp_path):
    """One argument a line: the new keyword goes on a line of its own, indented alike."""
    path = _write(tmp_path, 'llm = LLM(\n    model="m",\n    dtype="bfloat16",\n)\n')
    rewrite = rewrite_settings([_frame(path, 2)], 0, {"max_model_len": 12288})
    assert '    dtype="bfloat16",\n    max_model_len=12288,\n)' in rewrite.after
    seen = _apply_and_run(path, rewrite)
    assert {"model": "m", "dtype": "bfloat16", "max_model_len": 12288} == seen


def test_rewrite_adds_two_settings_in_order(tmp_path):
    """Two settings the call lacks: each on its own line, the last without a comma as before."""
    path = _write(tmp_path, 'llm = LLM(\n    model="m"\n)\n')
    settings = {"kv_cache_dtype": "fp8", "max_model_len": 24576}
    rewrite = rewrite_settings([_frame(path, 2)], 0, settings)
    assert (
        'llm = LLM(\n    model="m",\n    kv_cache_dtype="fp8",\n    max_model_len=24576\n)'
        == rewrite.after
    )
    assert {"model": "m", **settings} == _apply_and_run(path, rewrite)


def test_rewrite_keeps_the_indentation_of_a_call_inside_a_function(tmp_path):
    """An indented call comes back indented, and the function still runs."""
    path = _write(tmp_path, 'def main():\n    return LLM(model="m")\nmain()\n')
    rewrite = rewrite_settings([_frame(path, 2)], 0, {"max_model_len": 4096})
    assert '    return LLM(model="m", max_model_len=4096)' == rewrite.after
    assert {"model": "m", "max_model_len": 4096} == _apply_and_run(path, rewrite)


def test_rewrite_of_a_call_without_arguments(tmp_path):
    """LLM() gets its keyword inside the empty parentheses."""
    path = _write(tmp_path, "llm = LLM()\n")
    rewrite = rewrite_settings([_frame(path, 1)], 0, {"max_model_len": 4096})
    assert "llm = LLM(max_model_len=4096)" == rewrite.after


def test_positional_parameter_is_followed_to_the_callers_argument(tmp_path):
    """def build(path, max_len): LLM(max_model_len=max_len), called build("m", 131072)."""
    source = """\
        def build(path, max_len):
            return LLM(model=path, max_model_len=max_len)


        build("m", 131072)
        """
    path = _write(tmp_path, source)
    frames = [_frame(path, 5), _frame(path, 2)]
    rewrite = rewrite_settings(frames, 1, {"max_model_len": 9824})
    assert (5, 'build("m", 9824)') == (rewrite.line, rewrite.after)
    assert {"model": "m", "max_model_len": 9824} == _apply_and_run(path, rewrite)


def test_parameter_left_at_its_default_gets_the_callers_keyword(tmp_path):
    """A parameter the caller does not pass: the caller passes it now."""
    source = """\
        def build(path, max_len=131072):
            return LLM(model=path, max_model_len=max_len)


        build("m")
        """
    path = _write(tmp_path, source)
    rewrite = rewrite_settings([_frame(path, 5), _frame(path, 2)], 1, {"max_model_len": 9824})
    assert 'build("m", max_len=9824)' == rewrite.after
    assert {"model": "m", "max_model_len": 9824} == _apply_and_run(path, rewrite)


def test_computed_value_above_the_call_is_replaced_at_the_call(tmp_path):
    """MAX = int(os.environ...) is not a literal to change: the call's keyword is."""
    source = """\
        import os
        MAX = int(os.environ.get("MAX_LEN", "131072"))
        llm = LLM(model="m", max_model_len=MAX)
        """
    path = _write(tmp_path, source)
    rewrite = rewrite_settings([_frame(path, 3)], 0, {"max_model_len": 9824})
    assert 'llm = LLM(model="m", max_model_len=9824)' == rewrite.after


def test_dict_literal_without_the_key_gets_the_keyword_on_the_call(tmp_path):
    """kwargs = {...} without max_model_len: the call passes it beside **kwargs."""
    path = _write(tmp_path, 'kwargs = {"model": "m"}\nllm = LLM(**kwargs)\n')
    rewrite = rewrite_settings([_frame(path, 2)], 0, {"max_model_len": 4096})
    assert "llm = LLM(**kwargs, max_model_len=4096)" == rewrite.after
    assert {"model": "m", "max_model_len": 4096} == _apply_and_run(path, rewrite)


def test_edits_in_two_statements_are_one_region(tmp_path):
    """One setting in the dict above, one added to the call: one edit from the dict to the call."""
    source = 'kwargs = {"model": "m", "max_model_len": 32768}\nx = 1\nllm = LLM(**kwargs)\n'
    path = _write(tmp_path, source)
    settings = {"max_model_len": 24576, "kv_cache_dtype": "fp8"}
    rewrite = rewrite_settings([_frame(path, 3)], 0, settings)
    assert (1, source.rstrip("\n")) == (rewrite.line, rewrite.before)
    assert {"model": "m", **settings} == _apply_and_run(path, rewrite)


def test_vllm_config_is_followed_to_its_engine_args(tmp_path):
    """from_vllm_config(vllm_config), vllm_config = engine_args.create_engine_config(): EngineArgs."""
    source = """\
        engine_args = EngineArgs(model="m")
        vllm_config = engine_args.create_engine_config()
        engine = LLMEngine.from_vllm_config(vllm_config)
        """
    path = _write(tmp_path, source)
    rewrite = rewrite_settings([_frame(path, 3)], 0, {"max_model_len": 4096})
    assert (1, 'engine_args = EngineArgs(model="m", max_model_len=4096)') == (
        rewrite.line,
        rewrite.after,
    )


def test_engine_args_made_by_a_function_are_not_guessed(tmp_path):
    """EngineArgs.from_cli_args(args): where its values come from is not in the code."""
    source = (
        "engine_args = EngineArgs.from_cli_args(args)\nLLMEngine.from_engine_args(engine_args)\n"
    )
    path = _write(tmp_path, source)
    assert rewrite_settings([_frame(path, 2)], 0, {"max_model_len": 4096}) is None


def test_engine_class_built_directly_is_not_rewritten(tmp_path):
    """LLMEngine(configs...) takes no settings by keyword: no rewrite rather than a wrong one."""
    path = _write(tmp_path, "engine = LLMEngine(model_config, cache_config)\n")
    assert rewrite_settings([_frame(path, 1)], 0, {"max_model_len": 4096}) is None


def test_file_that_does_not_parse_gives_no_rewrite(tmp_path):
    """Source LibCST cannot read gives None, not an exception."""
    path = _write(tmp_path, "llm = LLM(model='m'\n")
    assert rewrite_settings([_frame(path, 1)], 0, {"max_model_len": 4096}) is None


def test_rewrite_command_replaces_and_adds_flags():
    """--max-model-len N and --flag=N get the new value; a flag not given is added at the end."""
    argv = ["/venv/bin/vllm", "serve", "m", "--max-model-len", "131072", "--dtype=half"]
    before, after = rewrite_command(argv, {"max_model_len": 9824, "gpu_memory_utilization": 0.95})
    assert "vllm serve m --max-model-len 131072 --dtype=half" == before
    assert "vllm serve m --max-model-len 9824 --dtype=half --gpu-memory-utilization 0.95" == after
    _, after = rewrite_command(
        ["vllm", "serve", "m", "--max-model-len=131072"], {"max_model_len": 1}
    )
    assert "vllm serve m --max-model-len=1" == after


def test_library_call_that_cannot_be_resolved_gives_no_wrapper(tmp_path):
    """A library file outside any site-packages has no import name: no wrapper, no guess."""
    library = _write(tmp_path, "def load():\n    return LLM(model='m')\n", "lib.py")
    user = _write(tmp_path, "load()\n", "app.py")
    site = CallSite(
        file=str(library),
        line=2,
        end_line=2,
        text="    return LLM(model='m')",
        keywords=("model",),
        has_double_star=False,
        library=True,
        user_frame=_frame(user, 1),
    )
    assert wrap_library_call(site, {"max_model_len": 4096}) is None


def test_rewrite_call_follows_a_familys_own_accepting_call(tmp_path):
    """The general rewriter knows no library: a family's Accepting (Trainer passes its
    TrainingArguments as args=) sends the keyword into the assignment that makes them."""
    from errkb.advisors._callsite import Accepting, Passing, rewrite_call

    path = _write(
        tmp_path,
        """\
        args = TrainingArguments(output_dir="out", per_device_train_batch_size=16)
        trainer = Trainer(model=None, args=args)
        """,
    )
    accepting = Accepting(
        calls=frozenset({"TrainingArguments"}), passing={"Trainer": Passing(argument="args")}
    )
    rewrite = rewrite_call(
        [_frame(path, 2)],
        0,
        2,
        frozenset({"Trainer"}),
        {"per_device_train_batch_size": 4},
        accepting,
    )
    assert rewrite is not None
    assert (1, 'args = TrainingArguments(output_dir="out", per_device_train_batch_size=4)') == (
        rewrite.line,
        rewrite.after,
    )
    # Without it, the keyword goes onto the call itself.
    plain = rewrite_call([_frame(path, 2)], 0, 2, frozenset({"Trainer"}), {"max_steps": 10})
    assert plain is not None
    assert "trainer = Trainer(model=None, args=args, max_steps=10)" == plain.after


def test_a_true_setting_is_the_bare_flag_on_a_command_line():
    """vLLM's --enforce-eager is a switch: '--enforce-eager True' would be a stray argument."""
    from errkb.advisors._callsite import rewrite_command

    argv = ["/usr/bin/vllm", "serve", "m", "--enable-chunked-prefill", "False", "--port", "1"]
    before, after = rewrite_command(argv, {"enforce_eager": True, "enable_chunked_prefill": True})
    assert "vllm serve m --enable-chunked-prefill False --port 1" == before
    assert "vllm serve m --enable-chunked-prefill --port 1 --enforce-eager" == after
    _, after = rewrite_command(
        ["vllm", "serve", "m", "--enforce-eager=true"], {"enforce_eager": True}
    )
    assert "vllm serve m --enforce-eager" == after
