"""errkb.logging: the diagnosis attached to log records, for text and JSON formatters."""

from __future__ import annotations

import io
import json
import logging
import logging.config

import pytest
from helpers import SEED_MESSAGE

import errkb.logging
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


def test_probes_off_note_names_the_filter_not_the_command_line():
    """The note that the GPU was not measured says why in logging's terms, not --no-probes."""
    record = logging.LogRecord("x", logging.ERROR, __file__, 1, "boom", None, None)
    try:
        raise ValueError(SEED_MESSAGE)
    except ValueError as exc:
        record.exc_info = (ValueError, exc, exc.__traceback__)
    DiagnosisFilter().filter(record)
    assert "probes are off (a log record is diagnosed without measuring" in record.errkb_text
    assert "--no-probes" not in record.errkb_text


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


@pytest.fixture
def server_log():
    """A logger set up as a server's: "srv.error" logs, its parent "srv" prints and does not
    propagate (uvicorn's shape). Returns (error logger, stream); detached and cleaned after."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    parent = logging.getLogger("errkb-test-srv")
    parent.addHandler(handler)
    parent.propagate = False
    error = logging.getLogger("errkb-test-srv.error")
    yield error, stream
    errkb.logging.detach("errkb-test-srv.error")
    parent.removeHandler(handler)


def test_attach_follows_the_record_with_the_diagnosis_in_the_same_log(server_log):
    """attach(): the server's record and its traceback, then the diagnosis as a record of its
    own, through the same handler and format."""
    error, stream = server_log
    errkb.logging.attach("errkb-test-srv.error")
    _log_seed(error)
    out = stream.getvalue()
    assert out.startswith("ERROR: engine failed to start\nTraceback (most recent call last):")
    logged, follow = out.split("\nERROR: errkb: ", 1)
    assert logged.endswith(f"ValueError: {SEED_MESSAGE}")
    assert follow.startswith("vLLM (V0 engine)")
    assert "max_model_len=12288" in follow


def test_attach_gives_the_record_the_filter_fields(server_log):
    """The record itself carries errkb, errkb_text and errkb_summary, for JSON formatters."""
    error, _ = server_log
    seen = []
    error.addFilter(lambda record: seen.append(record) or True)
    handler = logging.Handler()
    handler.emit = seen.append
    error.addHandler(handler)
    try:
        errkb.logging.attach("errkb-test-srv.error", text=False)
        _log_seed(error)
    finally:
        error.removeHandler(handler)
    [record, emitted] = seen
    assert record is emitted
    assert "vllm-kv-cache-max-seq-len" == record.errkb["matches"][0]["id"]
    assert record.errkb_summary.startswith("vllm-kv-cache-max-seq-len: ")


def test_attach_without_text_adds_no_record(server_log):
    """text=False: the fields only; the log holds the server's record alone."""
    error, stream = server_log
    errkb.logging.attach("errkb-test-srv.error", text=False)
    _log_seed(error)
    assert "errkb" not in stream.getvalue()


def test_attach_survives_a_dict_config_that_replaces_the_handlers(server_log):
    """Attached first, then the server configures logging (dictConfig, as uvicorn does): the
    diagnosis still follows, in the new handler's output."""
    error, _ = server_log
    errkb.logging.attach("errkb-test-srv.error")
    stream = io.StringIO()
    logging.config.dictConfig(
        {
            "version": 1,
            "disable_existing_loggers": False,
            "formatters": {"plain": {"format": "%(levelname)s: %(message)s"}},
            "handlers": {
                "out": {"class": "logging.StreamHandler", "formatter": "plain", "stream": stream}
            },
            "loggers": {
                "errkb-test-srv": {"handlers": ["out"], "level": "INFO", "propagate": False},
                "errkb-test-srv.error": {"level": "INFO"},
            },
        }
    )
    try:
        _log_seed(error)
    finally:
        for handler in logging.getLogger("errkb-test-srv").handlers[:]:
            logging.getLogger("errkb-test-srv").removeHandler(handler)
    assert "\nERROR: errkb: vLLM (V0 engine)" in stream.getvalue()


def test_attach_adds_nothing_when_nothing_matches(server_log):
    """An exception no record knows, and a record without one: the log is what it was."""
    error, stream = server_log
    errkb.logging.attach("errkb-test-srv.error")
    error.warning("plain line")
    try:
        raise RuntimeError("the frobnicator is out of beans")
    except RuntimeError:
        error.exception("oops")
    assert "errkb" not in stream.getvalue()
    assert stream.getvalue().startswith("WARNING: plain line\nERROR: oops\nTraceback")


def test_detach_puts_the_logger_back(server_log):
    """detach(): the logger hands records to its handlers as before; nothing follows."""
    error, stream = server_log
    errkb.logging.attach("errkb-test-srv.error")
    errkb.logging.detach("errkb-test-srv.error")
    _log_seed(error)
    assert "callHandlers" not in vars(error)
    assert "errkb" not in stream.getvalue()


def test_attach_when_errkb_fails_keeps_the_record(server_log, monkeypatch):
    """The diagnosis raising costs its record, never the server's."""
    import errkb.diagnosis

    def broken(*args, **kwargs):
        raise RuntimeError("errkb is broken")

    monkeypatch.setattr(errkb.diagnosis, "diagnose", broken)
    error, stream = server_log
    errkb.logging.attach("errkb-test-srv.error")
    _log_seed(error)
    assert stream.getvalue().startswith("ERROR: engine failed to start\nTraceback")
    assert "errkb" not in stream.getvalue()
