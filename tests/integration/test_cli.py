from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import DATA, NO_BLOCKS_MESSAGE, SEED_MESSAGE, run_cli

from errkb.advisors import BUILTIN

SHARED_SEED = Path(__file__).resolve().parents[3] / "shared" / "seed-record.json"


def _json(proc) -> dict:
    return json.loads(proc.stdout.decode())


def test_explain_seed_message_puts_our_record_on_top():
    """The seed's message with 32768 and 12288: exit 0, the vLLM KV-cache record first."""
    proc = run_cli("explain", "--json", SEED_MESSAGE)
    assert 0 == proc.returncode, proc.stderr
    top = _json(proc)["matches"][0]
    assert "vllm-kv-cache-max-seq-len" == top["id"]
    assert {"max_model_len": 32768, "max_seq_len": 12288} == top["captures"]


def test_explain_json_carries_the_documented_fields():
    """--json: schema, matches (id, slug, score, captures), solutions (text, settings), example_fix."""
    data = _json(run_cli("explain", "--json", f"ValueError: {NO_BLOCKS_MESSAGE}"))
    assert "errkb.diagnosis/1" == data["schema"]
    match = data["matches"][0]
    assert {"id", "slug", "score", "captures"} <= set(match)
    assert all({"text", "settings"} <= set(s) for s in data["solutions"])
    assert data["solutions"]
    assert data["example_fix"] is None or {"before", "after", "location"} <= set(
        data["example_fix"]
    )
    assert "ValueError" == data["exceptions"][0]["class"]


def test_explain_no_match_exits_1():
    """A message nothing knows: exit 1, nothing on stdout, one line on stderr."""
    proc = run_cli("explain", "the frobnicator is out of beans")
    assert (1, b"") == (proc.returncode, proc.stdout)
    assert b"no known error matches" in proc.stderr


def test_explain_no_match_json_is_still_an_object():
    """--json with no match prints the schema with an empty matches list, exit 1."""
    proc = run_cli("explain", "--json", "the frobnicator is out of beans")
    assert 1 == proc.returncode
    assert [] == _json(proc)["matches"]


def test_explain_reads_a_pasted_traceback_from_stdin():
    """'-' reads stdin; the chained traceback's exception lines are found."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "/srv/app.py", line 3, in <module>\n'
        "    engine = LLM(model=path)\n"
        '  File "/venv/lib/python3.11/site-packages/vllm/engine/llm_engine.py", line 290, in _init_cache\n'
        "    raise ValueError(\n"
        f"ValueError: {SEED_MESSAGE}\n\n"
        "The above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/srv/app.py", line 9, in <module>\n'
        "RuntimeError: engine failed to start\n"
    )
    proc = run_cli("explain", "--json", "-", stdin=text.encode())
    assert 0 == proc.returncode, proc.stderr
    data = _json(proc)
    assert ["ValueError", "RuntimeError"] == [e["class"] for e in data["exceptions"]]
    assert "vllm-kv-cache-max-seq-len" == data["matches"][0]["id"]
    assert 0 == data["matches"][0]["exception"]


def test_explain_with_nothing_to_read_is_usage_error():
    """Empty standard input: exit 2."""
    assert 2 == run_cli("explain", "-", stdin=b"").returncode


def test_unknown_command_is_usage_error():
    """argparse errors exit 2."""
    assert 2 == run_cli("frobnicate").returncode


def test_explain_text_output_is_plain_when_piped():
    """Piped output has no escape sequences; NO_COLOR keeps it so even with FORCE_COLOR absent."""
    proc = run_cli("explain", SEED_MESSAGE, env={"NO_COLOR": "1"})
    assert 0 == proc.returncode
    assert b"\x1b" not in proc.stdout
    assert b"\nFix: " in proc.stdout


def test_force_color_gives_rich_output():
    """FORCE_COLOR renders with colour even into a pipe."""
    proc = run_cli("explain", SEED_MESSAGE, env={"FORCE_COLOR": "1"})
    assert b"\x1b[" in proc.stdout


def test_records_flag_adds_a_dataset_file():
    """--records loads a file in the dataset's wrapped format and matches its message."""
    message = "The engine's cache (100) is too small for max len (200)."
    proc = run_cli("explain", "--records", str(DATA / "dataset-wrapped.json"), "--json", message)
    assert 0 == proc.returncode, proc.stderr
    assert "0123456789abcdef" in [m["id"] for m in _json(proc)["matches"]]
    assert {"1": 100, "2": 200} == _json(proc)["matches"][0]["captures"]


def test_errkb_records_env_adds_paths():
    """ERRKB_RECORDS works like --records."""
    message = "The engine's cache (100) is too small for max len (200)."
    proc = run_cli(
        "explain", "--json", message, env={"ERRKB_RECORDS": str(DATA / "dataset-wrapped.json")}
    )
    assert "0123456789abcdef" == _json(proc)["matches"][0]["id"]


@pytest.mark.skipif(
    not SHARED_SEED.exists(), reason="../shared/seed-record.json is not beside this checkout"
)
def test_shared_seed_validates_and_matches_its_own_message():
    """The dataset's seed record validates unchanged and is among the matches of its message."""
    assert 0 == run_cli("validate", str(SHARED_SEED)).returncode
    proc = run_cli("explain", "--records", str(SHARED_SEED), "--json", SEED_MESSAGE)
    assert "e4f0c0f49470db50" in [m["id"] for m in _json(proc)["matches"]]


def test_validate_reports_one_line_per_problem_and_exits_1(write_records, good_record):
    """A folder with broken records: a line per problem, exit 1; the good record still loads."""
    folder = write_records(
        {
            "acme/good.json": good_record,
            "acme/bad-type.json": dict(good_record, id="acme-bad-type", lineNumber="x"),
            "acme/bad-regex.json": dict(
                good_record, id="acme-bad-regex", messagePattern="(unclosed"
            ),
            "acme/not-json.json": "{",
        }
    )
    proc = run_cli("validate", str(folder))
    assert 1 == proc.returncode
    lines = proc.stdout.decode().splitlines()
    assert 3 == len(lines)
    assert any(
        'record "acme-bad-type": field "lineNumber": expected an integer' in x for x in lines
    )
    assert any(
        'record "acme-bad-regex": field "messagePattern": invalid regex (missing ) at position' in x
        for x in lines
    )
    assert b"2 records loaded, 3 problems" in proc.stderr


def test_validate_rejects_an_advisor_that_does_not_exist(write_records, good_record):
    """A record naming "kv_cahce" is a problem, exit 1 (it used to pass): advisors are checked."""
    folder = write_records({"a/typo.json": dict(good_record, advisors=["kv_cahce"])})
    proc = run_cli("validate", str(folder))
    assert 1 == proc.returncode
    known = ", ".join(sorted(BUILTIN))  # every built-in advisor, whichever there are
    assert f"no advisor named 'kv_cahce' (known: {known})" in proc.stdout.decode()


def test_validate_good_folder_exits_0(write_records, good_record):
    """No problem: exit 0."""
    assert 0 == run_cli("validate", str(write_records({"a/good.json": good_record}))).returncode


def test_show_by_id_and_slug():
    """show finds a record by id and by slug; an unknown key exits 1."""
    by_id = run_cli("show", "--json", "vllm-no-cache-blocks")
    assert 0 == by_id.returncode
    record = _json(by_id)
    assert 0 == run_cli("show", record["slug"]).returncode
    assert 1 == run_cli("show", "no-such-record").returncode


def test_list_by_tag():
    """list --tag keeps the records carrying the tag."""
    proc = run_cli("list", "--json", "--tag", "kv-cache")
    ids = [json.loads(line)["id"] for line in proc.stdout.decode().splitlines()]
    assert "vllm-kv-cache-max-seq-len" in ids
    assert all("kv-cache" in json.loads(line)["tags"] for line in proc.stdout.decode().splitlines())


def test_python_dash_m_errkb_version():
    """python -m errkb works and prints the version."""
    proc = run_cli("--version")
    assert proc.stdout.decode().startswith("errkb ")


def test_explain_no_match_json_is_the_empty_object_byte_for_byte():
    """--json with no match prints errkb.findings.empty_dict() as json.dumps(indent=2) does."""
    from errkb.findings import empty_dict

    proc = run_cli("explain", "--json", "the frobnicator is out of beans")
    assert json.dumps(empty_dict(), indent=2) + "\n" == proc.stdout.decode()


@pytest.mark.parametrize(
    "argv",
    [
        ("list", "--color"),
        ("show", "--width", "80", "vllm-no-cache-blocks"),
        ("scan", "--no-color", "-"),
        ("probe", "--width", "80"),
        ("probe", "--records", "x"),
        ("validate", "--records", "x", "records"),
    ],
)
def test_a_flag_the_command_does_not_use_is_a_usage_error(argv):
    """--color/--width belong to explain only, --records to the commands that load records."""
    proc = run_cli(*argv, stdin=b"")
    assert 2 == proc.returncode
    assert b"unrecognized arguments" in proc.stderr


def test_gpu_memory_error_names_the_flag_once():
    """The size parser names no flag; the CLI puts --gpu-memory in front of its message."""
    from errkb.exceptions import UsageError
    from errkb.units import parse_size

    with pytest.raises(UsageError) as info:
        parse_size("lots")
    assert "expected a size such as 24GiB or 80GB, got 'lots'" == str(info.value)
    proc = run_cli("explain", SEED_MESSAGE, "--gpu-memory", "lots")
    assert (2, b"") == (proc.returncode, proc.stdout)
    assert (
        "errkb: --gpu-memory: expected a size such as 24GiB or 80GB, got 'lots'\n"
        == proc.stderr.decode()
    )


def test_probe_missing_model_names_the_flag(tmp_path):
    """A --model that is not here: exit 2, the flag, the path and 'never the hub'."""
    missing = tmp_path / "meta-llama"
    proc = run_cli("probe", "--model", str(missing))
    assert 2 == proc.returncode
    assert (
        f"errkb: --model {missing}: no such local file or folder (errkb reads local configs "
        "only, never the hub)\n" == proc.stderr.decode()
    )


def test_probe_model_arithmetic(tmp_path):
    """probe --model: bytes per token of K and V, and the longest context that fits, in blocks."""
    config = {
        "model_type": "llama",
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "hidden_size": 64,
        "torch_dtype": "bfloat16",
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "model.safetensors").write_bytes(bytes(1 << 20))
    proc = run_cli("probe", "--json", "--model", str(tmp_path), "--gpu-memory", "1GiB")
    assert 0 == proc.returncode, proc.stderr
    model = _json(proc)["model"]
    # 2 (K and V) x 2 layers x 2 KV heads x 16 head size x 2 bytes (bfloat16).
    assert (256, 2, 1 << 20) == (
        model["kv_bytes_per_token"],
        model["kv_cache_dtype_bytes"],
        model["weights_bytes"],
    )
    # (0.9 x 1 GiB - 1 MiB of weights) in whole blocks of 16 tokens of 256 bytes.
    assert (int(0.9 * (1 << 30)) - (1 << 20)) // (16 * 256) * 16 == model["max_model_len_that_fits"]


def test_version_imports_neither_rich_nor_the_records():
    """errkb --version loads no command module, no rich, no record."""
    import subprocess
    import sys

    code = (
        "import sys, json\n"
        "from errkb.cli import main\n"
        "try:\n    main(['--version'])\nexcept SystemExit:\n    pass\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, timeout=60)
    loaded = json.loads(proc.stdout.decode().splitlines()[-1])
    assert [] == [
        m
        for m in loaded
        if m.split(".")[0] == "rich"
        or m in ("errkb.registry", "errkb.records", "errkb.cli.explain", "errkb.cli.scan")
    ]


def test_explain_long_shows_the_prose_the_short_form_leaves_out():
    """--long adds what happened, likely situations, history, upstream and the other matches."""
    short = run_cli("explain", "--no-probes", "--no-color", SEED_MESSAGE).stdout.decode()
    proc = run_cli("explain", "--long", "--no-probes", "--no-color", SEED_MESSAGE)
    assert 0 == proc.returncode
    long = proc.stdout.decode()
    for heading in ("What happened", "Likely situations", "History", "Upstream", "Also matched"):
        assert f"\n{heading}\n" in long, heading
        assert f"\n{heading}\n" not in short, heading


def test_show_prints_the_long_form_of_a_record():
    """errkb show: the record's solutions, example, documentation, history and upstream."""
    proc = run_cli("show", "vllm-kv-cache-max-seq-len", env={"NO_COLOR": "1"})
    assert 0 == proc.returncode
    out = proc.stdout.decode()
    assert "errkb: vLLM (V0 engine): max_model_len does not fit in the GPU KV cache" in out
    for heading in ("Matches", "Solutions", "Example fix", "What happened", "History", "Upstream"):
        assert f"\n{heading}\n" in out, heading
    assert "  1. Cap the context: pass max_model_len" in out


def test_list_fits_a_terminal_and_pipes_whole_lines():
    """On a terminal each line fits its width (long ids and titles end in an ellipsis, the
    severity column aligned); piped, the same records come whole."""
    import os
    import pty
    import subprocess
    import sys

    from helpers import _child_env

    piped = run_cli("list").stdout.decode().splitlines()
    assert any(len(line) > 60 for line in piped)
    main, child = pty.openpty()
    env = _child_env({"COLUMNS": "60", "LINES": "24", "NO_COLOR": "1"})
    proc = subprocess.Popen(
        [sys.executable, "-m", "errkb", "list"], stdout=child, stderr=child, env=env
    )
    os.close(child)
    out = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    assert 0 == proc.wait(timeout=120)
    os.close(main)
    shown = out.decode().replace("\r\n", "\n").splitlines()
    assert len(shown) == len(piped)
    assert all(len(line) <= 60 for line in shown)
    assert any(line.endswith("\u2026") for line in shown)
    severities = {line.split()[1] for line in shown}
    assert severities <= {"critical", "error", "warning", "info"}
    columns = {line.index(line.split()[1], len(line.split()[0])) for line in shown}
    assert len(columns) == 1  # the severity column starts at one place on every line
    for cut, whole in zip(shown, piped, strict=True):  # the same records, in the same order
        assert whole.split()[0].startswith(cut.split()[0].removesuffix("\u2026"))
