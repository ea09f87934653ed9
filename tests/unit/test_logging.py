"""errkb.logging: the diagnosis attached to log records, for text and JSON formatters."""

from __future__ import annotations

import io
import json
import logging

import pytest
from helpers import SEED_MESSAGE

from errkb.logging import DiagnosisFilter


class JsonFormatter(logging.Formatter):
    """A small JSON formatter, as servers use: selected fields, one object per line."""

    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(
            {
                "level": record.levelname,
                "message": record.getMessage(),
                "errkb_summary": getattr(record, "errkb_summary", None),
                "errkb": getattr(record, "errkb", None),
            }
        )


@pytest.fixture
def log():
    """A logger whose handler has the filter and a JSON formatter; returns (logger, stream)."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(DiagnosisFilter())
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("errkb-test-logging")
    logger.propagate = False
    logger.addHandler(handler)
    yield logger, stream
    logger.removeHandler(handler)


def _log_seed(logger: logging.Logger) -> None:
    try:
        raise ValueError(SEED_MESSAGE)
    except ValueError:
        logger.exception("engine failed to start")


def test_json_formatter_gets_the_versioned_diagnosis(log):
    """A record logged with exc_info carries the JSON diagnosis, which a JSON formatter dumps."""
    logger, stream = log
    _log_seed(logger)
    out = json.loads(stream.getvalue())
    assert "errkb.diagnosis/1" == out["errkb"]["schema"]
    assert "vllm-kv-cache-max-seq-len" == out["errkb"]["matches"][0]["id"]


def test_summary_is_one_line_with_the_record_id(log):
    """errkb_summary is a single line naming the record and its title."""
    logger, stream = log
    _log_seed(logger)
    summary = json.loads(stream.getvalue())["errkb_summary"]
    assert summary.startswith("vllm-kv-cache-max-seq-len: vLLM")
    assert "\n" not in summary


def test_text_field_in_a_format_string():
    """errkb_text holds the plain diagnosis, usable as %(errkb_text)s."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(DiagnosisFilter())
    handler.setFormatter(logging.Formatter("%(message)s\n%(errkb_text)s"))
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", None, None)
    try:
        raise ValueError(SEED_MESSAGE)
    except ValueError as exc:
        record.exc_info = (ValueError, exc, exc.__traceback__)
    handler.handle(record)
    assert "errkb: vLLM (V0 engine): max_model_len does not fit" in stream.getvalue()


def test_records_without_exc_info_get_empty_fields():
    """A record without an exception gets the fields, empty, so format strings never fail."""
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "hello", None, None)
    assert True is DiagnosisFilter().filter(record)
    assert (None, "", "") == (record.errkb, record.errkb_text, record.errkb_summary)


def test_unknown_exception_gets_empty_fields(log):
    """An exception no record knows leaves errkb null in the JSON."""
    logger, stream = log
    try:
        raise RuntimeError("the frobnicator is out of beans")
    except RuntimeError:
        logger.exception("oops")
    assert None is json.loads(stream.getvalue())["errkb"]


def test_filter_never_raises_when_errkb_fails(monkeypatch):
    """If the diagnosis itself raises, the record passes through with empty fields."""
    import errkb.diagnosis

    def broken(*args, **kwargs):
        raise RuntimeError("errkb is broken")

    monkeypatch.setattr(errkb.diagnosis, "diagnose", broken)
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", None, None)
    try:
        raise ValueError(SEED_MESSAGE)
    except ValueError as exc:
        record.exc_info = (ValueError, exc, exc.__traceback__)
    assert True is DiagnosisFilter().filter(record)
    assert None is record.errkb
