"""errkb._logline: times, hosts and shapes read from log lines and paths.

The lines are in the formats the tools write: vLLM's logger (tests/data/pasted), Python
logging's default ``asctime``, Kubernetes' CRI container log prefix, rsyslog's file format.
"""

from __future__ import annotations

import calendar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from errkb._logline import error_text, hour, iso, line_host, line_time, path_host, shape
from errkb.parse import class_at

DEC_2_2026 = calendar.timegm((2026, 12, 2, 6, 0, 0))
JAN_3_2027 = calendar.timegm((2027, 1, 3, 0, 0, 0))


def _at(text, mtime=None):
    return iso(line_time(text, mtime))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "2026-12-01T14:03:07.123456789Z stdout F INFO 12-01 14:03:07 [core.py:41] x",
            "2026-12-01T14:03:07Z",
        ),
        (
            "2026-11-30 14:02:11,123 ERROR app.loader: Could not load the model config",
            "2026-11-30T14:02:11Z",
        ),
        ("2026-12-01T14:03:07+02:00 started", "2026-12-01T12:03:07Z"),
        ("[2026-12-01 14:03:07] worker up", "2026-12-01T14:03:07Z"),
    ],
)
def test_iso_times_near_the_start_are_read_with_their_zone(line, expected):
    """ISO 8601 with nanoseconds, a comma, an offset or none (read as UTC)."""
    assert expected == _at(line)


def test_a_vllm_line_takes_its_year_from_the_modification_time():
    """vLLM's ``INFO 11-30 14:02:11`` has no year: the file's modification time gives it."""
    line = "(EngineCore_0 pid=123) ERROR 11-30 14:02:11 [core.py:41] EngineCore failed to start."
    assert "2026-11-30T14:02:11Z" == _at(line, DEC_2_2026)


def test_a_date_after_the_modification_time_is_from_the_year_before():
    """A December line in a file last written on January 3rd is from the December before."""
    line = "Dec 30 23:59:01 gpu-node-1 vllm[122]: INFO 12-30 23:59:01 [core.py:41] ready"
    assert "2026-12-30T23:59:01Z" == _at(line, JAN_3_2027)


def test_without_a_modification_time_a_yearless_line_has_no_time():
    """No year can be made up: the line has no time."""
    assert None is _at("INFO 12-01 14:03:07 [core.py:41] ready")


def test_colour_codes_around_vllm_s_date_are_skipped():
    """vLLM colours its level and date on a terminal; the time is read through the codes."""
    line = "\x1b[32mINFO\x1b[0m \x1b[90m12-01 14:03:07\x1b[0m [core.py:41] ready"
    assert "2026-12-01T14:03:07Z" == _at(line, DEC_2_2026)


@pytest.mark.parametrize("line", ["INFO all good", "2026-13-01T00:00:00Z bad month", ""])
def test_a_line_with_no_valid_time_has_none(line):
    """No time, or an impossible one: None."""
    assert None is line_time(line, DEC_2_2026)


def test_hours_are_the_timeline_s_buckets():
    """The hour a time falls in, written as the timeline writes it."""
    assert "2026-12-01T14:00Z" == hour(line_time("2026-12-01T14:59:59Z x"))


def test_a_syslog_line_names_its_host():
    """rsyslog's ``Mmm dd HH:MM:SS host program[pid]:`` gives the host; other lines none."""
    line = "Nov 30 14:02:11 gpu-node-1 vllm[122]: INFO 11-30 14:02:11 [llm_engine.py:13] Using max model len 32768"
    assert ("gpu-node-1", None) == (line_host(line), line_host("INFO 11-30 14:02:11 x"))


@pytest.mark.parametrize(
    ("path", "root", "expected"),
    [
        ("s3://logs/date=2026-12-01/host=node-7/vllm.log.gz", "s3://logs", "node-7"),
        ("logs/hostname=a1/x.log", "logs", "a1"),
        ("/var/log/pods/serving_vllm-0_1f2e3d/vllm/0.log", "/var/log/pods", "vllm-0"),
        ("/var/log/containers/vllm-0_serving_vllm-4a5b.log", "/var/log/containers", "vllm-0"),
        ("fleet/node-3/2026-12-01/vllm.log", "fleet", "node-3"),
        ("fleet/vllm.log", "fleet", None),
        ("elsewhere/node-3/vllm.log", "fleet", None),
    ],
)
def test_the_path_rules_in_their_order(path, root, expected):
    """host=NAME first, then a Kubernetes pod, then the first folder below the root, else None."""
    assert expected == path_host(path, root)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("KeyError: 'cmpl-3f9a2c01d4e5b6a7'", "KeyError: 'cmpl-<hex>'"),
        (
            "RuntimeError: CUDA error at /opt/x/kernels.cu:88 on device 3 (0x7f3a)",
            "RuntimeError: CUDA error at <path>:<n> on device <n> (<hex>)",
        ),
        (
            "OSError: request 6f1c2b8e-0a4d-4c1e-9b7a-2d3e4f5a6b7c failed",
            "OSError: request <id> failed",
        ),
        ("ValueError: see https://docs.vllm.ai/en/latest/x.html", "ValueError: see <url>"),
    ],
)
def test_shapes_mask_what_varies(line, expected):
    """Numbers, paths, UUIDs, hex and URLs are masked; the words stay."""
    assert expected == shape(line)


@given(st.integers(0, 10**12), st.integers(0, 10**6))
def test_lines_that_differ_only_in_numbers_have_one_shape(a, b):
    """Any two numbers in the same message give the same shape."""
    text = "RuntimeError: sequence group {} exceeded its budget of {} tokens"
    assert shape(text.format(a, b)) == shape(text.format(b, a))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "(EngineCore_0 pid=123) ERROR 11-30 14:02:11 [core.py:41] EngineCore failed to start.",
            "ERROR EngineCore failed to start.",
        ),
        (
            "2026-11-30 14:02:11,123 ERROR app.loader: Could not load the model config",
            "ERROR Could not load the model config",
        ),
        (
            "ERROR 11-30 14:02:11 llm_engine.py:13] Engine background task failed",
            "ERROR Engine background task failed",
        ),
        ("ERROR 11-30 14:02:11 [core.py:41] ValueError: bad value", "ValueError: bad value"),
        (
            '(EngineCore_0 pid=123) ERROR 11-30 14:02:11 [core.py:41]   File "/x/core.py", line 34, in run',
            None,
        ),
        (
            "(EngineCore_0 pid=123) ERROR 11-30 14:02:11 [core.py:41] Traceback (most recent call last):",
            None,
        ),
        ("UserWarning: something to know", None),
        ("INFO 11-30 14:02:11 [core.py:41] ErrorHandler installed", None),
    ],
)
def test_what_looks_like_an_error(line, expected):
    """A class ending in Error or Exception, or an ERROR line's message; not a traceback's body."""
    assert expected == error_text(line, class_at)
