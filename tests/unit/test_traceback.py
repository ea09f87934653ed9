"""errkb._traceback: the order of chains and groups, frames, and reads that never raise."""

from __future__ import annotations

import sys

import pytest

from errkb._traceback import (
    MAX_EXCEPTIONS,
    class_name,
    frame_sites,
    safe_getattr,
    safe_text,
    walk_chain,
)


def _raise_chain() -> BaseException:
    try:
        try:
            raise KeyError("root")
        except KeyError as inner:
            raise ValueError("middle") from inner
    except ValueError:
        try:
            raise RuntimeError("top")  # context: the ValueError
        except RuntimeError as top:
            return top
    raise AssertionError("unreachable")


def test_walk_chain_puts_causes_and_contexts_first_as_python_prints_them():
    """A cause, then the context it led to, then the exception itself: Python's print order."""
    chain = walk_chain(_raise_chain())
    assert ["root", "middle", "top"] == [e.args[0] for e in chain]


def test_walk_chain_skips_a_suppressed_context():
    """`raise ... from None` hides the context, and so does the walk."""
    with pytest.raises(ValueError, match="shown") as info:
        try:
            raise KeyError("hidden")
        except KeyError:
            raise ValueError("shown") from None
    assert ["shown"] == [e.args[0] for e in walk_chain(info.value)]


def test_walk_chain_cuts_cycles():
    """An exception that is its own context's context is visited once."""
    a, b = ValueError("a"), ValueError("b")
    a.__context__, b.__context__ = b, a
    assert {"a", "b"} == {e.args[0] for e in walk_chain(a)}
    assert 2 == len(walk_chain(a))


def test_walk_chain_lists_group_members_after_their_group():
    """An exception group comes first, then each member in order."""
    if sys.version_info < (3, 11):
        pytest.skip("exception groups are new in Python 3.11")
    group = ExceptionGroup("several", [ValueError("one"), TypeError("two")])  # noqa: F821
    assert ["several", "one", "two"] == [
        e.args[0] if not isinstance(e, BaseExceptionGroup) else e.message  # noqa: F821
        for e in walk_chain(group)
    ]


def test_walk_chain_stops_at_the_limit():
    """A very long chain gives at most MAX_EXCEPTIONS exceptions, the earliest causes dropped."""
    exc: BaseException = ValueError(0)
    for i in range(1, 200):
        nxt = ValueError(i)
        nxt.__cause__ = exc
        exc = nxt
    assert MAX_EXCEPTIONS >= len(walk_chain(exc))


def test_class_name_qualifies_all_but_builtins():
    """Builtins by their bare name, everything else as module.QualName."""
    import json

    assert "ValueError" == class_name(ValueError)
    assert "json.decoder.JSONDecodeError" == class_name(json.JSONDecodeError)


def test_safe_text_never_raises_and_cuts():
    """A raising __str__ gives the fallback; a long text is cut and says so."""

    def boom() -> str:
        raise RuntimeError

    assert ("fallback", False) == safe_text(boom, "fallback", 10)
    assert ("abcde", True) == safe_text(lambda: "abcdefgh", "x", 5)
    assert ("x", False) == safe_text(lambda: 42, "x", 5)


def test_safe_getattr_reads_plain_attributes_without_running_properties():
    """A plain attribute is read from __dict__; a raising property gives the default."""

    class Config:
        def __init__(self) -> None:
            self.max_model_len = 4096

        @property
        def broken(self) -> int:
            raise RuntimeError("must not escape")

    assert 4096 == safe_getattr(Config(), "max_model_len")
    assert "d" == safe_getattr(Config(), "broken", "d")


def test_frame_sites_lists_frames_outermost_first():
    """Each frame as (file, line, function), outermost first."""

    def inner() -> None:
        raise ValueError

    try:
        inner()
    except ValueError as exc:
        sites = list(frame_sites(exc.__traceback__))
    assert ["test_frame_sites_lists_frames_outermost_first", "inner"] == [s[2] for s in sites]
    assert all(s[0] == __file__ for s in sites)
