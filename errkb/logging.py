"""Diagnoses in log records, for servers that log exceptions instead of dying.

:class:`DiagnosisFilter` attaches errkb's diagnosis to every log record that carries
``exc_info`` (``logger.exception(...)``, ``logger.error(..., exc_info=True)``), as three
attributes that any formatter can use:

- ``record.errkb``: the versioned JSON object (:meth:`errkb.Diagnosis.to_dict`), for JSON
  formatters; ``None`` when nothing matched;
- ``record.errkb_text``: the diagnosis as plain text; ``""`` when nothing matched;
- ``record.errkb_summary``: one line, the record id, its title and the computed settings of
  the first solution; ``""`` when nothing matched.

Every record gets the three attributes, so ``%(errkb_summary)s`` is safe in a format string.
The filter never raises and never drops a record::

    import logging
    from errkb.logging import DiagnosisFilter

    handler = logging.StreamHandler()
    handler.addFilter(DiagnosisFilter())
    logging.getLogger().addHandler(handler)

Servers log the errors of the requests they serve on loggers of their own that do not reach
the root logger (uvicorn's ``uvicorn.error``, gunicorn's ``gunicorn.error``). :func:`attach`
diagnoses the records of such loggers where they are handled: the record gets the three
attributes, and the diagnosis follows it in the server's own log, through the same handlers::

    import errkb.logging

    errkb.logging.attach()    # uvicorn.error, gunicorn.error, hypercorn.error
"""

from __future__ import annotations

import contextlib
import logging
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from errkb.findings import Diagnosis
    from errkb.options import Options

__all__ = ["SERVER_LOGGERS", "DiagnosisFilter", "attach", "detach", "summary"]

#: The loggers on which servers report the errors of the requests they serve: uvicorn's
#: "Exception in ASGI application" (FastAPI's and Starlette's errors too), gunicorn's "Error
#: handling request", hypercorn's.
SERVER_LOGGERS = ("uvicorn.error", "gunicorn.error", "hypercorn.error")


def summary(diagnosis: Diagnosis) -> str:
    """One line for ``diagnosis``: ``id: title`` and the first solution's computed settings."""
    from errkb._sanitize import clean

    top = diagnosis.top
    line = f"{top.record.id}: {top.heading}"
    settings = next((s.settings for s in top.solutions if s.settings), None)
    if settings:
        line += " (try " + ", ".join(f"{k}={v!r}" for k, v in settings.items()) + ")"
    elif top.fix is not None:  # a mined record's derived fix
        line += f" (try {top.fix.text})"
    return clean(line).replace("\n", " ")


class DiagnosisFilter(logging.Filter):
    """A logging filter that attaches errkb's diagnosis to records carrying ``exc_info``.

    Add it to a handler (every record that handler emits) or to a logger (records logged to
    that logger itself). The diagnosis is bounded by ``options.timeout``; errkb failing costs
    the fields, never the log record. A record already diagnosed by another filter is kept.

    Args:
        name: as for :class:`logging.Filter` (a logger name prefix; empty passes all).
        options: an :class:`errkb.Options`; probes are off unless you give options that turn
            them on, since a log call should not measure the GPU. ``options.width`` sets the
            columns of ``errkb_text`` (100 when unset).
    """

    def __init__(self, name: str = "", *, options: Options | None = None) -> None:
        super().__init__(name)
        self._options = options

    def filter(self, record: logging.LogRecord) -> bool:
        """Attach the fields; True unless ``name`` rules the record out (errkb drops nothing)."""
        if not super().filter(record):
            return False
        if getattr(record, "errkb", None) is not None:
            return True
        record.errkb, record.errkb_text, record.errkb_summary = None, "", ""
        # The log record matters more than its diagnosis: errkb failing costs only the fields.
        with contextlib.suppress(Exception):
            self._attach(record)
        return True

    def _attach(self, record: logging.LogRecord) -> None:
        exc = record.exc_info[1] if isinstance(record.exc_info, tuple) else None
        if not isinstance(exc, BaseException):
            return
        from errkb._guard import diagnose_guarded
        from errkb.options import Options
        from errkb.render import render_plain

        options = self._options or Options(probes=False)
        diagnosis = diagnose_guarded(exc, options).value
        if diagnosis is None:
            return
        diagnosis = _worded_for_logs(diagnosis)
        record.errkb = diagnosis.to_dict()
        record.errkb_text = render_plain(diagnosis, options.width or 100)
        record.errkb_summary = summary(diagnosis)


def _worded_for_logs(diagnosis: Diagnosis) -> Diagnosis:
    """``diagnosis`` with the probes' note naming the filter's options, not the CLI's flag."""
    if not any("probes are off" in n for n in diagnosis.notes):
        return diagnosis
    from errkb._attrs import attrs

    here = "probes are off (a log record is diagnosed without measuring; see DiagnosisFilter)"
    notes = tuple(re.sub(r"probes are off(?: \([^)]*\))?", here, n) for n in diagnosis.notes)
    return attrs.evolve(diagnosis, notes=notes)


def attach(*names: str, options: Options | None = None, text: bool = True) -> None:
    """Diagnose the exceptions logged on the loggers ``names``, in their own log output.

    For servers, whose loggers do not reach the root logger: each record logged with
    ``exc_info`` on one of these loggers gets :class:`DiagnosisFilter`'s three attributes before
    its handlers see it (for JSON formatters), and with ``text``, a record of its own follows
    it, at the same level and through the same handlers, holding the diagnosis as plain text:
    it lands where the server logs, under the traceback, in the server's format. Nothing
    follows a record that nothing matched.

    The loggers are wrapped where they hand records to their handlers, so the server may
    configure its logging before or after this call (``logging.config.dictConfig`` replaces
    handlers, not loggers). Records of child loggers are theirs: name the logger that logs.
    Idempotent: a second call for a logger only updates ``options`` and ``text``.

    Args:
        *names: logger names; none means :data:`SERVER_LOGGERS`.
        options: as for :class:`DiagnosisFilter` (probes off unless these turn them on).
        text: whether the diagnosis also follows as a record of its own.

    Example: uvicorn, FastAPI or Starlette, in the module that defines the app::

        import errkb.logging

        errkb.logging.attach()
    """
    for name in names or SERVER_LOGGERS:
        logger = logging.getLogger(name)
        current = vars(logger).get("callHandlers")
        if isinstance(current, _Diagnosing):
            current.filter, current.text = DiagnosisFilter(options=options), text
            continue
        wrapper = _Diagnosing(logger.callHandlers, DiagnosisFilter(options=options), text)
        logger.callHandlers = wrapper  # type: ignore[method-assign]


def detach(*names: str) -> None:
    """Undo :func:`attach` for the loggers ``names`` (none means :data:`SERVER_LOGGERS`)."""
    for name in names or SERVER_LOGGERS:
        logger = logging.getLogger(name)
        current = vars(logger).get("callHandlers")
        if isinstance(current, _Diagnosing):
            if getattr(current.original, "__func__", None) is type(logger).callHandlers:
                del logger.callHandlers
            else:  # another wrapper was there before errkb's: put it back
                logger.callHandlers = current.original  # type: ignore[method-assign]


class _Diagnosing:
    """A logger's ``callHandlers``: the fields, the handlers, then the diagnosis as a record."""

    def __init__(self, original: Any, filter_: DiagnosisFilter, text: bool) -> None:
        self.original = original
        self.filter = filter_
        self.text = text

    def __call__(self, record: logging.LogRecord) -> None:
        self.filter.filter(record)  # never raises, never drops
        self.original(record)
        diagnosis = getattr(record, "errkb_text", "")
        if not (self.text and diagnosis) or getattr(record, "errkb_follows", False):
            return
        follow = logging.LogRecord(
            record.name,
            record.levelno,
            record.pathname,
            record.lineno,
            re.sub(r"\A[\u2500-]+\n", "", diagnosis).rstrip("\n"),  # the log line is the rule
            None,
            None,
            func=record.funcName,
        )
        follow.errkb, follow.errkb_text, follow.errkb_summary = None, "", ""
        follow.errkb_follows = True
        self.original(follow)
