"""The one guard between errkb's own faults and the program it watches.

Every surface (the hook, the logging filter, the pytest plugin, start-up installation) runs
its diagnosis through :func:`guarded`: in a daemon thread, within the options' time bound, and
never raising. What went wrong comes back as one line to show (:attr:`Outcome.problem`), so
errkb failing costs the program at most that line; ``ERRKB_DEBUG`` adds errkb's own traceback.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from typing import TYPE_CHECKING, Generic, TypeVar

from errkb._attrs import attrs
from errkb._env import flag
from errkb._gc import paused
from errkb._sanitize import clean

if TYPE_CHECKING:
    from collections.abc import Callable

    from errkb.findings import Diagnosis
    from errkb.options import Options

__all__ = ["Outcome", "diagnose_guarded", "guarded", "internal_error_line", "write_line"]

T = TypeVar("T")

#: How much longer than the options' timeout the guard waits: the diagnosis keeps its own
#: bound, and this second has it show what it finished in time.
GRACE = 1.0


@attrs.frozen
class Outcome(Generic[T]):
    """What a guarded call gave: its value, or the one line that says why there is none."""

    value: T | None = None
    #: ``errkb: ...``, one line: the time bound ran out, or errkb failed.
    problem: str | None = None
    #: errkb's own exception, when it failed.
    error: BaseException | None = None

    def report(self) -> None:
        """Write :attr:`problem` to stderr, then errkb's traceback when ``ERRKB_DEBUG`` is on."""
        if self.problem is not None:
            write_line(self.problem)
        if self.error is not None and flag("ERRKB_DEBUG"):
            import traceback

            with contextlib.suppress(Exception):  # best effort only
                traceback.print_exception(
                    type(self.error), self.error, self.error.__traceback__, file=sys.stderr
                )


def guarded(work: Callable[[], T], timeout: float) -> Outcome[T]:
    """Run ``work`` in a daemon thread for at most ``timeout`` (+ :data:`GRACE`) seconds; never raise."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = work()
        except BaseException as err:
            box["error"] = err

    worker = threading.Thread(target=run, name="errkb-diagnosis", daemon=True)
    # The collector's passes over the objects a first diagnosis makes cost it about a
    # twentieth of its time. It is paused while this thread waits, and on again here when the
    # work ends or is given up, never by a worker that ends late.
    with paused():
        try:
            worker.start()
        except RuntimeError:
            # Python 3.12.0 to 3.12.2 start no thread once shutdown begins (atexit callbacks
            # included); without a thread nothing would bound the work, so it is left out.
            return Outcome(problem="errkb: the diagnosis was left out: Python starts no thread now")
        worker.join(timeout + GRACE)
    if worker.is_alive():
        line = f"errkb: the diagnosis did not finish within {timeout:g}s and was left out"
        return Outcome(problem=line)
    error = box.get("error")
    if isinstance(error, BaseException):
        return Outcome(problem=internal_error_line(error), error=error)
    return Outcome(value=box.get("value"))  # type: ignore[arg-type]


def diagnose_guarded(exc: BaseException, options: Options) -> Outcome[Diagnosis | None]:
    """:func:`errkb.diagnose` for ``exc`` under :func:`guarded`, with ``options``' time bound."""

    def work() -> Diagnosis | None:
        from errkb.diagnosis import diagnose

        return diagnose(exc, options=options)

    return guarded(work, options.timeout)


def internal_error_line(err: BaseException) -> str:
    """The one line that says errkb failed with ``err``."""
    try:
        detail = str(err).splitlines()[0][:200] if str(err) else ""
    except Exception:
        detail = ""
    hint = "" if flag("ERRKB_DEBUG") else " (ERRKB_DEBUG=1 for details)"
    return clean(f"errkb: internal error: {type(err).__name__}: {detail}{hint}".replace(": :", ":"))


def write_line(text: str) -> None:
    """Write one line to stderr, if there still is one."""
    try:
        stream = sys.stderr
        if stream is not None:
            stream.write(text + "\n")
            stream.flush()
    except Exception:  # noqa: S110 - stderr itself is gone; nothing left to tell
        pass
