"""errkb._guard: the one guard every surface runs its diagnosis under."""

from __future__ import annotations

import threading

import pytest

from errkb._guard import diagnose_guarded, guarded
from errkb.options import Options


def test_a_value_comes_back_with_no_problem():
    """A call that finishes gives its value and no line."""
    outcome = guarded(lambda: 42, 1.0)
    assert (42, None, None) == (outcome.value, outcome.problem, outcome.error)


def test_a_failure_becomes_one_line(monkeypatch):
    """errkb failing is one 'internal error' line, with the exception kept for the debug trace."""
    monkeypatch.delenv("ERRKB_DEBUG", raising=False)

    def broken() -> None:
        raise OSError("simulated failure")

    outcome = guarded(broken, 1.0)
    assert "errkb: internal error: OSError: simulated failure (ERRKB_DEBUG=1 for details)" == (
        outcome.problem
    )
    assert isinstance(outcome.error, OSError)


def test_a_hang_is_left_behind_after_the_bound():
    """A call that does not finish in time is left in its daemon thread; the line says so."""
    release = threading.Event()
    outcome = guarded(release.wait, 0.05)
    release.set()
    assert "errkb: the diagnosis did not finish within 0.05s and was left out" == outcome.problem
    assert outcome.value is None


def test_report_writes_the_line_and_the_trace_only_when_debugging(monkeypatch, capsys):
    """report(): the line on stderr; errkb's traceback after it with ERRKB_DEBUG on."""

    def broken() -> None:
        raise OSError("simulated failure")

    monkeypatch.setenv("ERRKB_DEBUG", "1")
    guarded(broken, 1.0).report()
    err = capsys.readouterr().err
    assert err.startswith("errkb: internal error: OSError: simulated failure\n")
    assert "Traceback (most recent call last)" in err


@pytest.mark.parametrize("message", ["nothing errkb knows about"])
def test_diagnose_guarded_gives_none_for_an_unknown_error(message):
    """An exception no record knows gives no value and no problem."""
    outcome = diagnose_guarded(RuntimeError(message), Options(probes=False))
    assert (None, None) == (outcome.value, outcome.problem)


def test_the_collector_pauses_for_the_work_and_is_on_again_after_it():
    """gc is off while the work runs and as it was after: when it ends, fails or hangs."""
    import gc

    assert gc.isenabled()
    assert guarded(gc.isenabled, timeout=5).value is False
    assert gc.isenabled()

    def fail() -> None:
        raise RuntimeError("boom")

    assert guarded(fail, timeout=5).problem is not None
    assert gc.isenabled()

    release = threading.Event()
    assert guarded(lambda: release.wait(10), timeout=0.05).problem is not None
    assert gc.isenabled()  # given up: on again while the work still hangs
    release.set()

    gc.disable()
    try:
        guarded(lambda: None, timeout=5)
        assert not gc.isenabled()  # a program that had it off keeps it off
    finally:
        gc.enable()
