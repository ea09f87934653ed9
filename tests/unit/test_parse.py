from __future__ import annotations

import builtins
import json
import subprocess
import sys
import traceback

import pytest
from helpers import DATA
from hypothesis import given
from hypothesis import strategies as st

from errkb.parse import (
    MAX_LINES,
    ParsedException,
    class_at,
    log_prefix,
    parse_lines,
    parse_text,
    stated_releases,
)


def _format(exc: BaseException) -> str:
    return "".join(traceback.format_exception(exc))


def _raise(exc: BaseException) -> None:
    raise exc


def test_bare_message_has_no_class():
    """A message alone is one exception of unknown class."""
    [p] = parse_text("No available memory for the cache blocks.")
    assert (None, "No available memory for the cache blocks.") == (p.class_name, p.message)


def test_class_colon_message_line():
    """'ValueError: ...' gives the class and the message."""
    [p] = parse_text("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.")
    assert ("torch.OutOfMemoryError", "CUDA out of memory. Tried to allocate 2.00 GiB.") == (
        p.class_name,
        p.message,
    )


def test_log_line_with_an_exception_in_it():
    """A log prefix before 'SomethingError: msg' is skipped."""
    [p] = parse_text(
        "ERROR 11-30 06:00:01 [core.py:700] RuntimeError: Engine core initialization failed."
    )
    assert ("RuntimeError", "Engine core initialization failed.") == (p.class_name, p.message)


def test_chained_traceback_sections_in_print_order():
    """'raise ... from' gives two exceptions, the cause first, each with its frames."""
    try:
        try:
            _raise(KeyError("inner"))
        except KeyError as e:
            raise ValueError("outer\nsecond line") from e
    except ValueError as exc:
        text = _format(exc)
    found = parse_text(text)
    assert [("KeyError", "'inner'"), ("ValueError", "outer\nsecond line")] == [
        (p.class_name, p.message) for p in found
    ]
    assert found[0].files[-1].endswith("test_parse.py")
    assert "_raise" == found[0].frames[-1].function


def test_implicit_context_sections():
    """'During handling of the above exception' splits sections too."""
    try:
        try:
            _raise(OSError("disk"))
        except OSError:
            _raise(RuntimeError("then this"))
    except RuntimeError as exc:
        text = _format(exc)
    assert ["OSError", "RuntimeError"] == [p.class_name for p in parse_text(text)]


@pytest.mark.skipif(sys.version_info < (3, 11), reason="exception groups are Python 3.11+")
def test_exception_group_members_nested():
    """Members of nested exception groups are read from behind their margins."""
    group = builtins.ExceptionGroup
    try:
        try:
            _raise(ValueError("a"))
        except ValueError as v:
            raise group("grp", [v, group("sub", [TypeError("b c")])]) from None
    except group as exc:
        text = _format(exc)
    names = [(p.class_name, p.message) for p in parse_text(text)]
    assert ("ValueError", "a") in names
    assert ("TypeError", "b c") in names
    assert ("ExceptionGroup", "grp (2 sub-exceptions)") == names[0]


def test_ansi_colours_in_pasted_text_are_ignored():
    """Colour codes from a terminal copy do not end up in the message."""
    [p] = parse_text("\x1b[31mValueError\x1b[0m: boom")
    assert ("ValueError", "boom") == (p.class_name, p.message)


@given(st.text(max_size=300))
def test_parse_text_never_raises_and_finds_something(text):
    """Any text gives at least one exception to match."""
    assert len(parse_text(text)) >= 1


@given(st.text(max_size=300))
def test_parse_lines_never_raises_and_gives_single_lines(text):
    """Any text gives at most MAX_LINES lines, each read alone: no message spans two lines."""
    found = parse_lines(text)
    assert (True, []) == (
        len(found) <= MAX_LINES,
        [p.message for p in found if "\n" in p.message],
    )


_WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789 .,()'", min_size=1, max_size=12)


@given(
    st.lists(_WORDS, min_size=20, max_size=60).map(" ".join).filter(lambda m: m.strip() == m),
    st.integers(min_value=40, max_value=120),
)
def test_any_message_cut_at_a_fixed_width_is_read_back_whole(message, width):
    """A traceback's last line cut every ``width`` columns, two full lines at least, is read
    back as the one line it was."""
    line = "ValueError: " + message
    if len(line) < 2 * width + 1:
        line += " " + "x" * (2 * width + 1 - len(line))
    cut = "\n".join(line[i : i + width] for i in range(0, len(line), width))
    [p] = parse_text(
        f'Traceback (most recent call last):\n  File "t.py", line 1, in <module>\n{cut}'
    )
    assert ("ValueError", line.removeprefix("ValueError: ")) == (p.class_name, p.message)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("ValueError: boom", ("ValueError", "boom")),
        ("[core.py:700] torch.OutOfMemoryError: CUDA out", ("torch.OutOfMemoryError", "CUDA out")),
        ("ERROR:root:KeyError: 'x'", ("KeyError", "'x'")),
        ("(EngineCore pid=1) RuntimeError: a: b", ("RuntimeError", "a: b")),
        ("INFO all good: yes", (None, "INFO all good: yes")),
        ("xValueError:no space", (None, "xValueError:no space")),
    ],
)
def test_class_at_reads_the_first_class_in_a_line(line, expected):
    """class_at: the first 'SomethingError: ' after a log prefix, and the rest of the line."""
    assert expected == class_at(line)


def test_bare_log_line_in_the_default_logging_format():
    """'LEVEL:logger:Class: message' (logging's default format) gives the class, as scan reads it."""
    [p] = parse_text("ERROR:vllm.engine:ValueError: No available memory for the cache blocks.")
    assert ("ValueError", "No available memory for the cache blocks.") == (p.class_name, p.message)


# Pasted shapes: each test reads files of tests/data/pasted (printed by the real tools; see its
# README), never a copy typed here.

_PASTED = DATA / "pasted"
_KV_CACHE = (
    "The model's max seq len (32768) is larger than the maximum number of tokens that can be "
    "stored in KV cache (21344). Try increasing `gpu_memory_utilization`"
)
_MAT1 = "mat1 and mat2 shapes cannot be multiplied (2x512 and 256x10)"
_NO_BLOCKS = "No available memory for the cache blocks. Try increasing"
_CONFIG = "Unrecognized model in checkpoints/my-model. Should have a `model_type` key"
_OOM = "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity"


def _pasted(name: str) -> list[ParsedException]:
    """The exceptions of a corpus file, read as bytes so its CRs and escapes stay as printed."""
    return parse_text((_PASTED / name).read_bytes().decode("utf-8"))


def _shape(shape: str) -> list[str]:
    entries = json.loads((_PASTED / "manifest.json").read_text(encoding="utf-8"))
    return [e["file"] for e in entries if e["shape"] == shape]


def test_the_corpus_lists_every_shape_tested_here():
    """Each shape tested below has files in the corpus (a renamed shape fails here)."""
    shapes = {
        "rich-traceback",
        "ipython",
        "pytest",
        "github-quote",
        "log-prefix",
        "escape-remnants",
        "windows-paths",
        "trailing-log",
        "short-class-name",
    }
    assert shapes == {s for s in shapes if _shape(s)}


@pytest.mark.parametrize("name", _shape("rich-traceback"))
def test_rich_box_gives_frames_and_the_unwrapped_message(name):
    """rich: frames from the box headers (wrapped ones too), the message joined where rich
    wrapped it at the terminal width, colour codes inside numbers gone."""
    cls, start, raised_in = (
        ("ValueError", _KV_CACHE, "worker.py")
        if "kv-cache" in name
        else ("RuntimeError", _MAT1, "linear.py")
    )
    *_, p = _pasted(name)
    assert cls == p.class_name
    assert p.message.startswith(start)
    assert "\n" not in p.message
    assert p.files[-1].endswith(raised_in)
    assert all(f.line > 0 for f in p.frames)


@pytest.mark.parametrize("name", _shape("ipython"))
def test_ipython_traceback_gives_bare_class_frames_and_chain(name):
    """IPython: the class as IPython prints it, "Cell In[n]" and "File path:line" frames, and
    a second section after "During handling ..." chained to the first."""
    found = _pasted(name)
    expected = {
        "oom": [("OutOfMemoryError", _OOM)],
        "cell5": [("ValueError", _KV_CACHE)],
        "chained": [("KeyError", "'llama5'"), ("ValueError", "The checkpoint you are trying")],
        "hub": [
            ("OfflineModeIsEnabled", "Cannot reach https://huggingface.co/meta-llama"),
            ("LocalEntryNotFoundError", "An error happened while trying to locate the file"),
        ],
    }[name.split("-")[1]]
    assert [c for c, _ in expected] == [p.class_name for p in found]
    assert all(p.message.startswith(start) for (_, start), p in zip(expected, found))
    assert [False] + [True] * (len(found) - 1) == [p.chained for p in found]
    assert found[-1].frames[-1].line > 0
    if "chained" in name:  # the message's own blank line is kept, and its last line
        assert "out of date.\n\nYou can update Transformers" in found[-1].message
        assert found[-1].message.endswith(
            "`pip install git+https://github.com/huggingface/transformers.git`"
        )


@pytest.mark.parametrize("name", _shape("pytest"))
def test_pytest_e_lines_give_the_message_and_location_frames(name):
    """pytest: the "E" lines are the message (without the "E" and the source's ">" lines), the
    location lines the frames; --tb=native is a CPython traceback."""
    cls, start, end, raised_in = (
        ("ValueError", _KV_CACHE, "when initializing the engine.", "worker.py")
        if "kv-cache" in name
        else ("RuntimeError", _MAT1, _MAT1, "linear.py")
    )
    [p] = _pasted(name)
    assert cls == p.class_name
    assert p.message.startswith(start)
    assert p.message.endswith(end)
    assert p.files[-1].endswith(raised_in)


def test_pytest_short_summary_line_alone_is_a_cut_message():
    """A pasted "FAILED t.py::test - ValueError: ...nu..." line: the class, and the message
    pytest cut, without its "..."."""
    summary = next(
        line
        for line in (_PASTED / "pytest-kv-cache-color-no.txt")
        .read_text(encoding="utf-8")
        .splitlines()
        if line.startswith("FAILED ")
    )
    [p] = parse_text(summary)
    assert "ValueError" == p.class_name
    assert p.message.startswith("The model's max seq len (32768) is larger than the maximum")
    assert not p.message.endswith("...")


@pytest.mark.parametrize("name", _shape("github-quote"))
def test_github_quote_reply_gives_the_quoted_traceback_without_prose(name):
    """A quote reply: "> " taken off, the fence and the prose around the quote left out."""
    [p] = _pasted(name)
    assert "ValueError" == p.class_name
    assert p.message.startswith(_CONFIG if "config" in name else _KV_CACHE)
    assert "```" not in p.message
    assert p.message.endswith(".")  # nothing of the reply below the quote


@pytest.mark.parametrize("name", _shape("log-prefix"))
def test_log_prefixes_before_every_line_are_taken_off(name):
    """vLLM's headers, process tags, Ray's, torchrun's "[default0]:", logging's time stamp:
    the traceback under them is read, no later log line is glued to its message."""
    found = _pasted(name)
    if "engine-core" in name:  # the engine's logged traceback, its process's, the front end's
        assert ["ValueError", "ValueError", "RuntimeError"] == [p.class_name for p in found]
        assert all(p.message.endswith("initializing the engine.") for p in found[:2])
        assert found[0].message.startswith(_NO_BLOCKS)
        assert found[2].message.startswith("Engine core initialization failed.")
    elif "ray" in name:
        [p] = found
        assert ("ValueError", True) == (p.class_name, p.message.startswith(_KV_CACHE))
        assert p.message.endswith("when initializing the engine.")
    elif "torchrun" in name:  # the worker's error first, then torchrun's own report
        assert ["RuntimeError", "ChildFailedError"] == [
            p.class_name.rpartition(".")[2] for p in found
        ]
        assert _MAT1 == found[0].message
        assert found[0].files[-1].endswith("linear.py")
    else:
        [p] = found
        assert ("ValueError", True) == (p.class_name, p.message.startswith(_CONFIG))
        assert "Falling back" not in p.message


@pytest.mark.parametrize("name", _shape("escape-remnants"))
def test_escape_remnants_are_taken_off(name):
    """ "^[[31m" (a terminal's caret notation) and rsyslog's "#033[0m" and "#015" are not read
    as text."""
    found = _pasted(name)
    expected = {
        "escapes-caret-rich-kv-cache.txt": ("ValueError", _KV_CACHE),
        "escapes-caret-ipython-oom.txt": ("OutOfMemoryError", _OOM),
        "escapes-syslog-vllm-engine-core.txt": ("ValueError", _NO_BLOCKS),
    }[name]
    assert expected[0] == found[0].class_name
    assert found[0].message.startswith(expected[1])
    assert not any("[0m" in p.message or "#0" in p.message for p in found)


@pytest.mark.parametrize("name", _shape("windows-paths"))
def test_windows_paths_in_frames(name):
    """File "C:\\Users\\...\\x.py", line 12, in f: the whole path is the frame's file."""
    *_, p = _pasted(name)
    assert p.files[0].startswith("C:\\Users\\me\\proj\\")
    assert p.class_name in {"ValueError", "RuntimeError"}
    assert p.message.startswith((_CONFIG, _MAT1, _KV_CACHE))


@pytest.mark.parametrize("name", _shape("trailing-log"))
def test_text_after_the_traceback_is_not_part_of_the_message(name):
    """Log lines and pytest's summary printed after the traceback end the message."""
    [p] = _pasted(name)
    if "server" in name:
        assert ("ValueError", True) == (p.class_name, p.message.startswith(_KV_CACHE))
        assert p.message.endswith("when initializing the engine.")
    else:
        assert ("RuntimeError", _MAT1) == (p.class_name, p.message)


@pytest.mark.parametrize("name", _shape("short-class-name"))
def test_short_pastes_give_the_class_as_printed(name):
    """A last line with IPython's bare class name, or a message alone."""
    [p] = _pasted(name)
    expected = {
        "short-oom-ipython-last-line.txt": ("OutOfMemoryError", _OOM),
        "short-oom-ipython-minimal.txt": ("OutOfMemoryError", _OOM),
        "short-hub-ipython-last-line.txt": ("LocalEntryNotFoundError", "An error happened"),
        "short-oom-first-sentences.txt": (None, "CUDA out of memory. Tried to allocate 2.00 GiB."),
    }[name]
    assert expected[0] == p.class_name
    assert p.message.startswith(expected[1])


# How a message ends, and where a class is read.


def test_class_at_the_start_of_a_line_inside_a_message_is_message_text():
    """NCCL's "ncclSystemError: ..." under "NCCL error in: ..." is part of the message."""
    text = (
        "NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1269, unhandled "
        "system error, NCCL version 2.14.3\nncclSystemError: System call (e.g. socket, malloc) "
        "or external library call failed or device error. \nLast error:\nsocket failed"
    )
    [p] = parse_text(text)
    assert (None, text) == (p.class_name, p.message)


def test_class_after_other_words_is_read_when_nothing_else_names_one():
    """ "ray::f() (pid=1, ip=...) ValueError: msg": no line starts with a class, so this one."""
    [p] = parse_text(
        "ray::RayWorkerWrapper.execute_method() (pid=4121, ip=10.0.0.5) ValueError: boom"
    )
    assert ("ValueError", "boom") == (p.class_name, p.message)


def test_class_line_after_a_blank_line_starts_its_own_exception():
    """Prose, a blank line, then "Class: message": the class is read, the prose left out."""
    [p] = parse_text("I get this when loading:\n\nOSError: We couldn't connect to 'https://x'")
    assert ("OSError", "We couldn't connect to 'https://x'") == (p.class_name, p.message)


def test_message_with_blank_lines_ends_at_the_next_log_record():
    """huggingface_hub's message has a blank line in it; the log line below is not part of it."""
    message = (
        "401 Client Error.\n\nRepository Not Found for url: https://huggingface.co/api/models/x."
        "\nPlease make sure you specified the correct `repo_id` and `repo_type`."
    )
    text = (
        "Traceback (most recent call last):\n"
        '  File "/app/load.py", line 3, in <module>\n'
        "    hf_hub_download('x', 'config.json')\n"
        f"huggingface_hub.errors.RepositoryNotFoundError: {message}\n"
        "2026-11-30 14:02:11,123 INFO app: shutting down\n"
    )
    [p] = parse_text(text)
    assert ("huggingface_hub.errors.RepositoryNotFoundError", message) == (p.class_name, p.message)


def test_a_logger_that_repeats_its_header_ends_the_message_at_a_line_without_it():
    """vLLM repeats its header on each line of a record; a line of the same process without
    it ("Process EngineCore_0:") is another record."""
    prefix = "(EngineCore_0 pid=1) ERROR 11-30 14:02:11 [core.py:41] "
    text = (
        f"{prefix}Traceback (most recent call last):\n"
        f'{prefix}  File "/x/core.py", line 5, in run\n'
        f"{prefix}ValueError: boom\n"
        f"{prefix}second line\n"
        "(EngineCore_0 pid=1) Process EngineCore_0:\n"
    )
    [p] = parse_text(text)
    assert ("ValueError", "boom\nsecond line") == (p.class_name, p.message)


def test_interleaved_processes_are_read_apart():
    """Lines of two Ray workers, interleaved: each worker's traceback is whole."""
    lines = [
        [
            f"(RayWorkerWrapper pid={n}) Traceback (most recent call last):",
            f'(RayWorkerWrapper pid={n})   File "/w{n}.py", line {n}, in f',
            f"(RayWorkerWrapper pid={n}) ValueError: worker {n}",
        ]
        for n in (1, 2)
    ]
    text = "\n".join(line for pair in zip(*lines) for line in pair)
    found = parse_text(text)
    assert [("ValueError", "worker 1", ("/w1.py",)), ("ValueError", "worker 2", ("/w2.py",))] == [
        (p.class_name, p.message, p.files) for p in found
    ]


def test_a_lone_source_marker_is_not_a_quote():
    """pytest's "> " before one source line is not a quote: it stays in the text."""
    [p] = parse_text("x = 1\n>       f()\nboom")
    assert (None, "x = 1\n>       f()\nboom") == (p.class_name, p.message)


_PREFIXES = (
    "ERROR 11-30 14:02:11 [core.py:41] ",
    "(EngineCore_0 pid=123) ",
    "(RayWorkerWrapper pid=4567, ip=10.0.0.5) ERROR 11-30 14:02:11 [worker_base.py:17] ",
    "[rank0]: ",
    "[default0]:",
    "> ",
    "Nov 30 14:02:11 gpu-node-1 vllm[122]: ",
    "vllm-1  | ",
)


@given(
    prefix=st.sampled_from(_PREFIXES),
    message=st.text(
        st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=60
    ).filter(lambda m: m.strip() == m and m[:1].isalnum()),
)
def test_a_prefix_on_every_line_does_not_change_what_is_read(prefix, message):
    """The same traceback, with a log or quote prefix before each line, reads the same."""
    text = (
        "Traceback (most recent call last):\n"
        '  File "/app/serve.py", line 3, in <module>\n'
        "    main()\n"
        f"ValueError: {message}"
    )
    plain = parse_text(text)
    prefixed = parse_text("\n".join(prefix + line for line in text.split("\n")))
    assert [(p.class_name, p.message, p.frames) for p in plain] == [
        (p.class_name, p.message, p.frames) for p in prefixed
    ]


def test_class_line_under_a_repeated_log_header_is_read():
    """vLLM's header repeated on each line: a line under it that starts with a class is read."""
    prefix = "ERROR 11-30 14:02:11 [core.py:41] "
    [p] = parse_text(f"{prefix}EngineCore failed to start.\n{prefix}ValueError: boom")
    assert ("ValueError", "boom") == (p.class_name, p.message)


def test_colour_codes_whose_esc_was_lost_are_taken_off():
    """A copy that kept "[31m" and "[0m" but not the ESC before them reads as plain text."""
    [p] = parse_text("[1;36m(EngineCore_0 pid=1)[0m [31mValueError[0m: boom")
    assert ("ValueError", "boom") == (p.class_name, p.message)


def test_escapes_written_out_are_taken_off():
    """Escapes written out as text (a JSON log: "\\u001b[31m") are taken off too."""
    [p] = parse_text("\\u001b[31mValueError\\u001b[0m: boom")
    assert ("ValueError", "boom") == (p.class_name, p.message)


def test_a_traceback_copied_from_its_first_frame_is_read():
    """A paste that starts at the first 'File ...' line, without the 'Traceback' line."""
    text = '  File "/app/serve.py", line 3, in <module>\n    main()\nValueError: boom\n'
    [p] = parse_text(text)
    assert ("ValueError", "boom", ("/app/serve.py",)) == (p.class_name, p.message, p.files)


def test_an_ide_footer_after_a_blank_line_is_not_message():
    """PyCharm's 'Process finished with exit code 1' below the traceback is left out."""
    text = (
        'Traceback (most recent call last):\n  File "/app/x.py", line 1, in <module>\n'
        "ValueError: boom\n\nProcess finished with exit code 1\n"
    )
    [p] = parse_text(text)
    assert ("ValueError", "boom") == (p.class_name, p.message)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "INFO 07-01 12:00:00 [api_server.py:1287] vLLM API server version 0.9.2",
            {"vllm": "0.9.2"},
        ),
        (
            (
                "INFO 07-01 12:00:00 [llm_engine.py:230] Initializing a V1 LLM engine (v0.9.2) with "
                "config: model='m'"
            ),
            {"vllm": "0.9.2"},
        ),
        (
            (
                '  File "/opt/conda/lib/python3.10/site-packages/vllm-0.9.2-py3.10-linux-x86_64.egg/'
                'vllm/engine.py", line 3, in f'
            ),
            {"vllm": "0.9.2"},
        ),
        (
            "transformers==4.45.2\nhuggingface_hub==0.25.1",
            {"huggingface-hub": "0.25.1", "transformers": "4.45.2"},
        ),
        (
            "- `transformers` version: 4.45.2\n- PyTorch version: 2.4.0+cu121",
            {"torch": "2.4.0+cu121", "transformers": "4.45.2"},
        ),
        ("ValueError: nothing here about releases", {}),
    ],
)
def test_stated_releases(text, expected):
    """Banners, pins, installed paths and environment reports state the release that ran."""
    assert expected == stated_releases(text)


def test_a_release_stated_twice_differently_is_left_out():
    """Two different releases of one distribution: which one ran cannot be told."""
    assert {} == stated_releases("vllm==0.9.2\nvLLM API server version 0.10.0")
    assert {"torch": "2.4.0"} == stated_releases("torch==2.4.0\nPyTorch version: 2.4.0+cu121")


# Real reports (tests/data/reports/corpus.jsonl, each with its issue's URL): what a paste around
# the exception line holds must not change the exception read (issue 24, the parser).


def _report(entry_id: str) -> str:
    """The text of a corpus entry: a user's paste from a public issue tracker."""
    with (DATA / "reports" / "corpus.jsonl").open(encoding="utf-8") as f:
        entries = (json.loads(line) for line in f if line.strip())
        return next(str(e["text"]) for e in entries if e["id"] == entry_id)


@pytest.mark.parametrize(
    ("entry_id", "expected"),
    [
        # A source line above it, no Traceback header (vllm-project/vllm#5086).
        ("vllm-3", ("ImportError", "cannot import name 'LLM' from 'vllm' (unknown location)")),
        # Python's caret line above it (vllm-project/vllm#23321).
        ("vllm-33", ("AttributeError", "'PosixPath' object has no attribute 'startswith'")),
        # Prose in another script above it (2noise/ChatTTS#820).
        ("ChatTTS-23", ("ModuleNotFoundError", "No module named 'tools.audio'")),
        # Numbered items, the last one the error (vllm-project/vllm#1367).
        ("vllm-2", ("ImportError", "cannot import name 'activation_ops' from 'vllm'")),
        # A call at the start of a source line, "f(g)", is not a wrapper's class
        # (ray-project/ray#50163, whose exception line is cut).
        ("ray-23", ("AttributeError", "module \u2018ray._private\u2019 has n")),
    ],
)
def test_an_exception_line_below_other_lines_keeps_its_class(entry_id, expected):
    """A "Class: message" line below a source line, a caret line or prose opens its exception:
    the line above is not glued into the message and the class is kept."""
    p = parse_text(_report(entry_id))[-1]
    assert expected == (p.class_name, p.message)


@pytest.mark.parametrize(
    ("entry_id", "expected"),
    [
        # Bold (vllm-project/vllm#31789).
        ("vllm-18", ("ModuleNotFoundError", "No module named 'vllm._C'")),
        # A code span on its own line (huggingface/accelerate#403).
        ("accelerate-14", ("ModuleNotFoundError", "No module named 'datasets'")),
        # A code span inside a sentence (safetensors/safetensors#485).
        ("safetensors-4", ("OSError", "No such device (os error 19)")),
        # After words of another script, no space (2noise/ChatTTS#56).
        ("ChatTTS-28", ("IndexError", "list index out of range")),
        # A JSON string: torch's elastic error file (pytorch/pytorch#65041).
        ("torch-1", ("RuntimeError", "rasing error since --throw was specified")),
        # Quoted in prose (google/sentencepiece#517).
        (
            "sentencepiece-13",
            (
                "RuntimeError",
                "Internal: /sentencepiece/src/trainer_interface.cc(407) [!sentences_.empty()]",
            ),
        ),
    ],
)
def test_markdown_marks_and_prose_around_the_exception_are_not_its_message(entry_id, expected):
    """GitHub's Markdown around an exception line (bold, code spans), a JSON string or the
    prose it sits in are taken off: the class is read and the message ends where they close."""
    p = parse_text(_report(entry_id))[-1]
    assert expected == (p.class_name, p.message)


@pytest.mark.parametrize(
    ("entry_id", "expected"),
    [
        # PowerShell's prompt (2noise/ChatTTS#902).
        ("ChatTTS-8", ("ModuleNotFoundError", "No module named 'ChatTTS.tools'")),
        # The interpreter's prompt (triton-lang/triton#159, pytorch/audio#3821).
        ("triton-19", ("ModuleNotFoundError", "No module named 'triton.language'")),
        ("torchaudio-17", ("SyntaxError", "invalid decimal literal")),
        # multiprocessing's "Process SpawnProcess-1:" (vllm-project/vllm#19050).
        ("vllm-45", ("RuntimeError", "size mismatch, got input (512), mat (512x512), vec (0)")),
        # threading's "Exception in thread ...:" (ray-project/ray#20520).
        ("ray-20", ("NameError", "name 'run' is not defined")),
        # A failing sys.excepthook's "Original exception was:" (ray-project/ray#12643).
        ("ray-1", ("AttributeError", "'NoneType' object has no attribute 'add_worker_info'")),
        # Python 2's note of an error in a finaliser (pytorch/pytorch#6932).
        (
            "torch-44",
            ("RuntimeError", "reciprocal is not implemented for type torch.cuda.LongTensor"),
        ),
    ],
)
def test_a_prompt_or_another_report_right_after_the_exception_is_not_its_message(
    entry_id, expected
):
    """What resumes after an error with no blank line (a prompt, CPython's line above its next
    report) ends the message: the exception is read as printed."""
    found = [(p.class_name, p.message) for p in parse_text(_report(entry_id))]
    assert expected in found


def test_a_progress_bar_after_the_exception_is_not_its_message():
    """tqdm's bar printed below the exception line (huggingface/accelerate#2046) ends it."""
    p = parse_text(_report("accelerate-8"))[-1]
    assert ("TypeError", "Linear.forward() got an unexpected keyword argument 'scale'") == (
        p.class_name,
        p.message,
    )


@pytest.mark.parametrize(
    ("entry_id", "expected"),
    [
        # Frames that lost their indent (vllm-project/vllm#9398).
        ("vllm-5", ("TypeError", "vllm/entrypoints/llm.py")),
        # A fence glued before the header (huggingface/transformers#9939).
        ("transformers-9", ("ImportError", "<stdin>")),
        # Frames and exception line indented below a header that is not (pytorch/pytorch#3389).
        ("torch-17", ("ModuleNotFoundError", "<stdin>")),
    ],
)
def test_a_traceback_pasted_out_of_shape_gives_its_class_and_frames(entry_id, expected):
    """A traceback whose indents a paste changed, or whose header follows a fence on its line,
    is still read as one: the exception keeps its class and its last frame."""
    p = parse_text(_report(entry_id))[-1]
    assert expected == (p.class_name, p.files[-1][-len(expected[1]) :])


def test_pips_rule_after_a_blank_line_ends_the_message_of_the_traceback_it_indented():
    """pip's "Complete output from command ..." indents a setup script's traceback; the
    indented rule and pip's own line below it are not the message (pytorch/pytorch#707)."""
    p = parse_text(_report("torch-21"))[-1]
    assert ("ImportError", "No module named 'tools.setup_helpers'") == (p.class_name, p.message)


def test_pips_rule_right_below_the_exception_ends_its_message():
    """pip's line of dashes right below an indented traceback, with no blank line, then pip's
    "ERROR: Command errored out ..." is not the message (google/sentencepiece#436)."""
    p = parse_text(_report("sentencepiece-16"))[-1]
    assert ("FileNotFoundError", "[Errno 2] No such file or directory: '..\\\\VERSION'") == (
        p.class_name,
        p.message,
    )


def test_a_rule_between_lines_of_a_message_is_kept():
    """A line of dashes that the message goes on after is the message's own text: torchrun's
    summary keeps its rules and its root cause (a real ChildFailedError's message)."""
    message = (
        "\n=====================================================\nkill.py FAILED\n"
        "-----------------------------------------------------\nFailures:\n"
        "  <NO_OTHER_FAILURES>\n-----------------------------------------------------\n"
        "Root Cause (first observed failure):\n[0]:\n  error_file: <N/A>\n"
        "  traceback : Signal 9 (SIGKILL) received by PID 4481\n"
        "====================================================="
    )
    found = parse_text(
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: " + message
    )
    assert [
        (None, "Signal 9 (SIGKILL) received by PID 4481"),
        ("torch.distributed.elastic.multiprocessing.errors.ChildFailedError", message.strip()),
    ] == [(p.class_name, p.message) for p in found]


def test_a_traceback_collapsed_onto_one_line_is_read_with_its_frames():
    """A whole traceback whose line breaks a paste lost, inside a fence and after Ray's
    "Error: " (ray-project/ray#20572), is read as CPython printed it: frames and class."""
    p = parse_text(_report("ray-16"))[-1]
    assert (
        "KeyError",
        "'ip'",
        [
            ("ray/dashboard/utils.py", 131, "_handler_route"),
            ("ray/dashboard/modules/node/node_head.py", 214, "get_errors"),
        ],
    ) == (
        p.class_name,
        p.message,
        [(f.file.partition("site-packages/")[2], f.line, f.function) for f in p.frames],
    )


def test_vllm_log_header_before_0_6_4_is_taken_off():
    """vLLM's older header ("ERROR 04-22 21:49:37 async_llm_engine.py:43] ", no brackets
    around the source) is a log header, under docker compose's prefix (vllm-project/vllm#4275)."""
    p = parse_text(_report("vllm-35"))[-1]
    assert ("NameError", "name 'vllm_ops' is not defined", "torch/nn/modules/module.py") == (
        p.class_name,
        p.message,
        p.files[0][-len("torch/nn/modules/module.py") :],
    )


def _stderr(tmp_path, program: str) -> str:
    """What CPython prints to stderr running ``program`` (a real logger, a real traceback)."""
    script = tmp_path / "run.py"
    script.write_text(program, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, check=False
    )
    return done.stderr


_WARN_THEN_RAISE = (
    "import logging\n"
    "logging.warning('bf16 is not supported on this GPU, using fp16')\n"
    "raise RuntimeError('FlashAttention only supports Ampere GPUs or newer.')\n"
)


def test_a_log_record_above_an_exception_line_is_not_glued_into_it(tmp_path):
    """A logger's warning printed above the exception, pasted with the exception line only (the
    traceback between them left out), is its own record: the class and message are kept."""
    printed = _stderr(tmp_path, _WARN_THEN_RAISE).splitlines()
    pasted = "\n".join([printed[0], printed[-1]])
    p = parse_text(pasted)[-1]
    assert ("RuntimeError", "FlashAttention only supports Ampere GPUs or newer.") == (
        p.class_name,
        p.message,
    )


def test_parse_lines_reads_error_like_lines_alone_and_leaves_source_out(tmp_path):
    """Each line of a paste is read alone: log records telling of a failure and exception lines
    are kept, in print order; source lines, frames and carets are left out."""
    program = (
        "import logging\n"
        "logging.error('model load failed')\n"
        "values = {}\n"
        "values['x'] = int('seven')\n"
    )
    assert [
        (None, "model load failed"),
        ("ValueError", "invalid literal for int() with base 10: 'seven'"),
    ] == [(p.class_name, p.message) for p in parse_lines(_stderr(tmp_path, program))]


def _fold(text: str, width: int) -> str:
    """``text`` as coreutils' ``fold`` cuts it: at ``width`` columns, inside words and figures."""
    return subprocess.run(
        ["fold", "-w", str(width)], input=text, capture_output=True, text=True, check=True
    ).stdout


@pytest.mark.parametrize("width", [57, 80, 120])
def test_a_message_cut_at_a_fixed_width_is_joined_back_as_it_was(width):
    """A traceback's last line cut every N columns (``fold``, a fixed-width log), words split
    ("allo\\ncate"): the message is read back whole, exactly as printed."""
    try:
        _raise(ValueError("x" * 30 + " is not a valid repository id; " * 12))
    except ValueError as exc:
        printed = _format(exc)
    header, _, last = printed.rstrip("\n").rpartition("\n")
    [p] = parse_text(header + "\n" + _fold(last, width))
    assert ("ValueError", last.removeprefix("ValueError: ")) == (p.class_name, p.message)


def test_lines_of_different_widths_are_not_joined():
    """A message of several lines of their own (huggingface_hub's) keeps its line breaks."""
    text = "OSError: first line of the message here\nsecond, a longer line of the message\nend"
    [p] = parse_text(text)
    assert "first line of the message here\nsecond, a longer line of the message\nend" == p.message


# Ray's wrapper: from a user's paste, https://github.com/Mini-o3/Mini-o3/issues/21 (its first
# RayTaskError, with the frames of the task below it, cut after two of them).
_RAY_TASK_ERROR = """\
  File "/opt/miniconda3/envs/minio3/lib/python3.11/site-packages/ray/_private/worker.py", line 1026, in get_objects
    raise value.as_instanceof_cause()
ray.exceptions.RayTaskError(ValueError): ray::main_task() (pid=1355866, ip=172.17.0.2)
  File "/hpc2hdd/home/yfan546/workplace/mllm_playground/mllm_2/r1/Third_repo/Mini-o3/verl/trainer/main_ppo.py", line 171, in main_task
    trainer.fit()
  File "/hpc2hdd/home/yfan546/workplace/mllm_playground/mllm_2/r1/Third_repo/Mini-o3/verl/trainer/ppo/ray_trainer.py", line 1367, in fit
    gen_batch_output = self.async_rollout_manager.generate_sequences(gen_batch)
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (_RAY_TASK_ERROR, "ray::main_task() (pid=1355866, ip=172.17.0.2)"),
        # Ray's wording before it named the wrapped class (ray-project/ray#5136).
        (_report("ray-3"), "ray_WrappedFunc:train() (pid=25574, host=sam-ThinkPad-E470)"),
    ],
)
def test_rays_wrapper_ends_where_its_tasks_frames_begin(text, expected):
    """Ray's RayTaskError (with the wrapped class in brackets or not): its message is its own
    line; the task's frames below it start the traceback of the error it wraps."""
    p = parse_text(text)[0]
    assert ("ray.exceptions.RayTaskError", expected) == (p.class_name, p.message)


@pytest.mark.parametrize(
    ("line", "prefix"),
    [
        ("ERROR 11-30 14:02:11 [core.py:41] CUDA error: x", "ERROR 11-30 14:02:11 [core.py:41] "),
        (
            "(EngineCore_0 pid=123) ERROR 11-30 14:02:11 [core.py:41] Engine core died",
            "(EngineCore_0 pid=123) ERROR 11-30 14:02:11 [core.py:41] ",
        ),
        (
            "ERROR 04-22 21:49:37 async_llm_engine.py:43] boom",
            "ERROR 04-22 21:49:37 async_llm_engine.py:43] ",
        ),
        ("Nov 30 14:02:11 node-7 vllm[122]: CUDA error: x", "Nov 30 14:02:11 node-7 vllm[122]: "),
        ("[rank0]: CUDA error: x", "[rank0]: "),
        ("2026-11-30 14:02:11,123 ERROR app: boom", "2026-11-30 14:02:11,123 ERROR app: "),
        ("ERROR:root:boom", "ERROR:root:"),
        ("CUDA error: x", ""),
        # Text may start like a quote or a compose service: read alone, it is text.
        ("> quoted ERROR 11-30 14:02:11 [core.py:41] x", ""),
        ("vllm-1  | ERROR 11-30 14:02:11 [core.py:41] x", ""),
    ],
)
def test_log_prefix_is_what_a_tool_and_a_logger_wrote_before_the_message(line, prefix):
    assert log_prefix(line) == prefix
