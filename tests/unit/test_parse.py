from __future__ import annotations

import builtins
import sys
import traceback

import pytest
from hypothesis import given
from hypothesis import strategies as st

from errkb.parse import class_at, parse_text


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
