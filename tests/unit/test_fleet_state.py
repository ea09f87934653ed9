"""errkb.fleet._state: what a nightly run reads again, and the totals across runs."""

from __future__ import annotations

import pytest

from errkb.exceptions import UsageError
from errkb.fleet._sources import Source
from errkb.fleet._state import changed, load, running, save


def _source(size, *, mtime=1.0, etag=None, compression=None, url="a.log"):
    return Source(url=url, root="", size=size, mtime=mtime, etag=etag, compression=compression)


def _tail(data):
    return lambda source, n: data[source.size - n : source.size]


def _state(**entries):
    return {"schema": "errkb.scan-state/1", "sources": entries, "running": None}


def test_a_new_plain_file_is_read_up_to_its_last_whole_line():
    """A line still being written waits for the next run; the offset is after the last newline."""
    data = b"one\ntwo\nthr"
    todo, spans, entries = changed([_source(len(data))], _state(), _tail(data))
    assert ([len(data)], {"a.log": (0, 8)}, 8) == (
        [s.size for s in todo],
        spans,
        entries["a.log"]["offset"],
    )


def test_a_grown_plain_file_is_read_from_the_offset():
    """Appended bytes only: from where the last run stopped."""
    data = b"one\ntwo\nthree\n"
    state = _state(**{"a.log": {"size": 8, "mtime": 1.0, "etag": None, "offset": 8}})
    _, spans, _ = changed([_source(len(data), mtime=2.0)], state, _tail(data))
    assert {"a.log": (8, 14)} == spans


def test_an_unchanged_source_is_skipped():
    """Same size and ETag, read to its end: nothing to read."""
    state = _state(**{"a.gz": {"size": 10, "mtime": 1.0, "etag": "e1", "offset": 10}})
    todo, spans, _ = changed(
        [_source(10, etag="e1", compression="gzip", url="a.gz")], state, _tail(b"")
    )
    assert ([], {}) == (todo, spans)


def test_a_rewritten_compressed_file_is_read_again_whole():
    """Another ETag: the archive is read from its start."""
    state = _state(**{"a.gz": {"size": 10, "mtime": 1.0, "etag": "e1", "offset": 10}})
    _, spans, _ = changed(
        [_source(12, etag="e2", compression="gzip", url="a.gz")], state, _tail(b"")
    )
    assert {"a.gz": (0, None)} == spans


def test_a_shrunk_plain_file_is_read_again_from_its_start():
    """Smaller than the offset: rotated or truncated, read from 0."""
    data = b"new\n"
    state = _state(**{"a.log": {"size": 100, "mtime": 1.0, "etag": None, "offset": 100}})
    _, spans, _ = changed([_source(len(data), mtime=3.0)], state, _tail(data))
    assert {"a.log": (0, 4)} == spans


def test_running_totals_add_runs_up():
    """Counts add, times widen, shapes add; most frequent first."""
    one = {
        "lines": 10,
        "bytes": 100,
        "groups": [
            {
                "id": "a",
                "count": 2,
                "first_seen": "2026-12-01T00:00:00Z",
                "last_seen": "2026-12-01T01:00:00Z",
            }
        ],
        "unknown": [{"shape": "s", "count": 1}],
    }
    two = {
        "lines": 5,
        "bytes": 50,
        "groups": [
            {"id": "a", "count": 1, "first_seen": None, "last_seen": "2026-12-02T00:00:00Z"},
            {"id": "b", "count": 4, "first_seen": None, "last_seen": None},
        ],
        "unknown": [{"shape": "s", "count": 2}],
    }
    total = running(running(None, one), two)
    assert {
        "lines": 15,
        "bytes": 150,
        "groups": [
            {"id": "b", "count": 4, "first_seen": None, "last_seen": None},
            {
                "id": "a",
                "count": 3,
                "first_seen": "2026-12-01T00:00:00Z",
                "last_seen": "2026-12-02T00:00:00Z",
            },
        ],
        "unknown": [{"shape": "s", "count": 3}],
    } == total


def test_the_state_file_round_trips_and_rejects_other_files(tmp_path):
    """What save writes, load reads; a JSON file of another kind is a usage error."""
    path = tmp_path / "state.json"
    save(path, {"a.log": {"size": 1, "mtime": 1.0, "etag": None, "offset": 1}}, load(path), None)
    assert {"a.log": {"size": 1, "mtime": 1.0, "etag": None, "offset": 1}} == load(path)["sources"]
    path.write_text('{"schema": "other"}')
    with pytest.raises(UsageError, match=r"expected a errkb\.scan-state/1 file"):
        load(path)
