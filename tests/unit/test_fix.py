"""errkb.advisors._fix: which example fix a computed solution gets, when no user call is seen.

A pasted message has no frames to rewrite: the record's example is shown with the computed
values put in wherever it writes them, or it says which it does not show. A pasted traceback
that ends in vLLM's own server gives the flags, never an edit of vLLM's files.
"""

from __future__ import annotations

import json
from pathlib import Path

import errkb
from errkb import Options
from errkb.testing import FakeGpu, FakeMeasurements, registry_from_dicts
from errkb.units import GIB

RECORD = Path(__file__).resolve().parents[2] / "records" / "vllm" / "kv-cache-max-seq-len.json"
MESSAGE = (
    "The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    "stored in KV cache (12288). Try increasing `gpu_memory_utilization` or decreasing "
    "`max_model_len` when initializing the engine."
)
GPU = FakeMeasurements(gpus=[FakeGpu(total_bytes=80 * GIB, free_bytes=80 * GIB)])


def _fix(example: str, text: str = f"ValueError: {MESSAGE}", **given) -> dict:
    """The example fix errkb gives for ``text`` when the record's example is ``example``."""
    record = dict(json.loads(RECORD.read_text(encoding="utf-8")), exampleFix=example)
    d = errkb.explain(
        text,
        options=Options(given=given, measurements=GPU),
        registry=registry_from_dicts([record]),
    )
    return d.to_dict()["example_fix"]


def test_cli_flags_get_the_computed_values():
    """--max-model-len=20480 gets the length that fits; --gpu-memory-utilization 0.9 this run's 0.5."""
    fix = _fix(
        "# before\nvllm serve m\n\n# after\n"
        "vllm serve m --gpu-memory-utilization 0.9 --max-model-len=20480\n",
        gpu_memory_utilization=0.5,
    )
    assert "vllm serve m --gpu-memory-utilization 0.5 --max-model-len=12288" == fix["after"]
    assert "the record's example, with the computed values put in" == fix["note"]


def test_setdefault_and_dict_entries_get_the_computed_values():
    """setdefault("max_model_len", 2048) and {"max_model_len": 2048} are places a value is written."""
    fix = _fix(
        '# after\nkwargs.setdefault("max_model_len", 2048)\nother = {"max_model_len": 2048}\n'
    )
    assert (
        'kwargs.setdefault("max_model_len", 12288)\nother = {"max_model_len": 12288}'
        == (fix["after"])
    )


def test_after_marker_with_a_remark_is_a_marker():
    """'# after (the error said ...)' splits the example; its record numbers are not shown."""
    fix = _fix(
        "# before\nvllm serve m\n\n# after (the error said: the estimate is 23072)\n"
        "vllm serve m --max-model-len 20480\n"
    )
    assert "vllm serve m" == fix["before"]
    assert "vllm serve m --max-model-len 12288" == fix["after"]


def test_command_line_example_takes_the_flags_it_lacks():
    """A setting the example does not show is added to its vllm serve line."""
    fix = _fix("# after\nvllm serve m --port 8001\n")
    assert "vllm serve m --port 8001 --max-model-len 12288" == fix["after"]
    assert "the record's example, with the computed values put in" == fix["note"]


def test_example_that_cannot_show_a_setting_says_so():
    """No place for max_model_len in the example: it is not claimed to be filled in."""
    fix = _fix("# after\nchat.load(compile=False)\n")
    assert "chat.load(compile=False)" == fix["after"]
    assert "does not show max_model_len=12288" in fix["note"]


def test_pasted_traceback_through_vllms_server_gives_the_flags(tmp_path):
    """A pasted traceback ending in vLLM's api_server: the flags, and no file of vLLM's to edit."""
    server = tmp_path / "site-packages" / "vllm" / "entrypoints" / "openai" / "api_server.py"
    server.parent.mkdir(parents=True)
    server.write_text(
        "def build(engine_args):\n"
        "    return AsyncLLMEngine.from_engine_args(engine_args, usage_context=None)\n"
    )
    text = (
        "Traceback (most recent call last):\n"
        f'  File "{server}", line 2, in build\n'
        "    return AsyncLLMEngine.from_engine_args(engine_args, usage_context=None)\n"
        f"ValueError: {MESSAGE}\n"
    )
    fix = _fix("# after\nvllm serve m\n", text)
    assert (None, None, "--max-model-len 12288") == (fix["before"], fix["location"], fix["after"])
    assert "vLLM's own code built the engine" in fix["note"]


def test_library_engine_that_cannot_be_reached_gets_the_settings_and_says_why(tmp_path):
    """vllm.LLM(...) inside an installed library: no wrapper to write, so the settings and where."""
    core = tmp_path / "site-packages" / "chat2" / "core.py"
    core.parent.mkdir(parents=True)
    core.write_text("import vllm\n\n\ndef load():\n    return vllm.LLM(model='m')\n")
    app = tmp_path / "app.py"
    app.write_text("from chat2.core import load\n\nload()\n")
    text = (
        "Traceback (most recent call last):\n"
        f'  File "{app}", line 3, in <module>\n'
        "    load()\n"
        f'  File "{core}", line 5, in load\n'
        "    return vllm.LLM(model='m')\n"
        f"ValueError: {MESSAGE}\n"
    )
    fix = _fix("# after\nLLM(model='m', max_model_len=20480)\n", text)
    assert (None, None, "max_model_len=12288") == (fix["before"], fix["location"], fix["after"])
    assert "inside an installed library" in fix["note"]
    assert f"your code reached it from {app}:3" in fix["note"]


def test_the_records_example_changes_only_what_the_fix_changes():
    """Issue 22, item 4: the record's example shows this run's values before, and after them
    only the fix's settings differ (its own 0.6 -> 0.9 utilization is not a change the fix
    makes when the fix lowers max_model_len)."""
    import re

    from helpers import SEED_MESSAGE

    d = errkb.explain(SEED_MESSAGE, options=Options(probes=False)).to_dict()
    example = d["example_fix"]
    assert example["note"].startswith("the record's example")

    def keywords(code):
        return dict(re.findall(r"(\w+)=([\w.\"'-]+)", code))

    before, after = keywords(example["before"]), keywords(example["after"])
    changed = {k for k in after if before.get(k) != after[k]}
    solution = next(s for s in d["solutions"] if s["settings"])
    assert changed == set(solution["settings"]) == {"max_model_len"}
    assert after["max_model_len"] == "12288"
