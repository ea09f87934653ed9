"""The ``errkb.scan/1`` object of a scan, each group with its Fix line (docs/json.md).

One road for ``errkb scan`` (one file or a fleet) and the console's ``POST /v1/scan``: the map
step's merged :class:`errkb.scan.ScanPart`, each group's example explained as ``errkb explain``
explains it for its Fix line. ``errkb scan`` of one file has them made while it reads, in a
child process (:func:`fixes_ahead`).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from errkb.records import Record
    from errkb.registry import Registry
    from errkb.scan import ScanPart


def fix_line() -> Callable[[Record, str], str | None]:
    """A group's Fix line: the diagnosis' of its example, as ``errkb explain`` gives it."""
    from errkb.diagnosis import explain
    from errkb.options import Options
    from errkb.registry import Registry

    options = Options(probes=False)

    def fix(record: Record, example: str) -> str | None:
        # The record alone: its finding is the one wanted, and searching every other record's
        # pattern (2,400 compiled for a 134 MB log's 133 groups) tripled a scan's time.
        diagnosis = explain(example, options=options, registry=Registry([record]))
        finding = (
            next((f for f in diagnosis.findings if f.record.id == record.id), None)
            if diagnosis is not None
            else None
        )
        if finding is None:
            return record.solutions[0] if record.solutions else None
        if finding.fix is not None:
            return finding.fix.text
        return finding.solutions[0].text if finding.solutions else None

    return fix


def report(part: ScanPart, registry: Registry, ahead: FixesAhead | None = None) -> dict[str, Any]:
    """The ``errkb.scan/1`` object of ``part`` (docs/json.md).

    ``ahead``: the child that made Fix lines while the scan read (:func:`fixes_ahead`); those
    it did not make are made here.
    """
    made = ahead.fixes() if ahead is not None else {}
    here: list[Callable[[Record, str], str | None]] = []

    def fix(record: Record, example: str) -> str | None:
        key = (record.id, example)
        if key in made:
            return made[key]
        if not here:  # the diagnosis' modules are imported only when a line is made here
            here.append(fix_line())
        return here[0](record, example)

    return part.to_dict(registry, fix=fix)


def fixes_ahead(registry: Callable[[], Registry]) -> FixesAhead | None:
    """A child process that makes Fix lines as a scan finds its groups; None where none can run.

    Forked (Linux, two CPUs or more) before the scan starts and before ``registry`` is called:
    no other thread runs then, so the child holds no lock another thread held, and it makes its
    own registry (nothing this process loads after the fork is copied on write). It explains
    each group's example as the scan tells it (:meth:`FixesAhead.want`) on another CPU while
    this process reads the log, and prints nothing.
    """
    import threading

    from errkb.scan import _cpus

    if not sys.platform.startswith("linux") or threading.active_count() > 1 or _cpus() < 2:
        return None
    down, up = os.pipe(), os.pipe()
    try:
        pid = os.fork()
    except OSError:
        for fd in (*down, *up):
            os.close(fd)
        return None
    if pid == 0:  # the child: never returns
        status = 1
        try:
            os.close(down[1])
            os.close(up[0])
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.dup2(null, 2)
            _make_fixes(registry(), down[0], up[1])
            status = 0
        finally:
            os._exit(status)  # no atexit handler, no flush of this process's buffers
    os.close(down[0])
    os.close(up[1])
    os.set_blocking(down[1], False)  # the scan never waits on the child
    return FixesAhead(pid, down[1], up[0])


def _make_fixes(registry: Registry, wanted: int, made: int) -> None:
    """The child's work: a Fix line for each record and example read, all written at the end."""
    fix = fix_line()
    out = []
    with os.fdopen(wanted, "rb") as lines:
        for line in lines:
            record_id, example = json.loads(line)
            try:
                out.append([record_id, example, fix(registry.get(record_id), example)])
            except Exception:  # noqa: S112 - the parent makes that line, and meets the same
                continue
    with os.fdopen(made, "wb") as file:
        file.write(json.dumps(out).encode())


class FixesAhead:
    """The parent's end of :func:`fixes_ahead`: what to explain goes down, Fix lines come up."""

    def __init__(self, pid: int, down: int, up: int) -> None:
        self._pid, self._down, self._up = pid, down, up
        self._pending = bytearray()  # what the pipe did not take yet
        self._broken = False

    def want(self, record_id: str, example: str) -> None:
        """Have the child make the Fix line of ``record_id``'s group, whose example this is."""
        if not self._broken:
            self._pending += json.dumps([record_id, example]).encode() + b"\n"
            self._send()

    def _send(self) -> None:
        while self._pending and not self._broken:
            try:
                sent = os.write(self._down, self._pending)
            except BlockingIOError:
                return  # the pipe is full: the rest goes with the next group, or at the end
            except OSError:  # the child is gone: its lines are made here
                self._broken = True
                return
            del self._pending[:sent]

    def fixes(self) -> dict[tuple[str, str], str | None]:
        """The Fix lines the child made, by record id and example (empty when it failed)."""
        os.set_blocking(self._down, True)
        self._send()
        os.close(self._down)
        with os.fdopen(self._up, "rb") as file:
            data = file.read()
        _, status = os.waitpid(self._pid, 0)
        if status != 0 or self._broken:
            return {}
        try:
            return {(r, e): f for r, e, f in json.loads(data)}
        except (ValueError, TypeError):
            return {}
