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
"""

from __future__ import annotations

import contextlib
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from errkb.findings import Diagnosis
    from errkb.options import Options

__all__ = ["DiagnosisFilter", "summary"]


def summary(diagnosis: Diagnosis) -> str:
    """One line for ``diagnosis``: ``id: title`` and the first solution's computed settings."""
    from errkb._sanitize import clean

    top = diagnosis.top
    line = f"{top.record.id}: {top.record.heading}"
    settings = next((s.settings for s in top.solutions if s.settings), None)
    if settings:
        line += " (try " + ", ".join(f"{k}={v!r}" for k, v in settings.items()) + ")"
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
        record.errkb = diagnosis.to_dict()
        record.errkb_text = render_plain(diagnosis, options.width or 100)
        record.errkb_summary = summary(diagnosis)
