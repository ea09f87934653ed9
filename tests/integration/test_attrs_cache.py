"""The compiled attrs methods kept between processes (errkb._attrs), in real child processes.

Each child gets its own ``PYTHONPYCACHEPREFIX``, so the file lands in a temporary folder (as
Python's bytecode would) and never in the checkout.
"""

from __future__ import annotations

import json

from tests.helpers import run_python

# Makes errkb's classes, one of them hashed and compared (no None in it: before Python 3.12
# None hashes by its address, which differs between processes), and a class of its own;
# prints what the cache did and what the values gave.
_CHILD = """
import json, attrs
import errkb._attrs as cache
from errkb.findings import Fact

@attrs.frozen
class Mine:
    x: int

fact = Fact(name="max_model_len", value=32768, unit="tokens", source="message", note="n")
print(json.dumps({
    "read": sorted(cache._cache or {}),
    "fresh": sorted(cache._fresh),
    "hash": hash(fact),
    "equal": fact == Fact(name="max_model_len", value=32768, unit="tokens", source="message", note="n"),
    "repr": repr(fact),
    "mine": hash(Mine(1)) == hash(Mine(1)),
}))
"""


def _run(prefix, seed: int, **env: str) -> dict:
    done = run_python(
        _CHILD,
        env={
            "PYTHONPYCACHEPREFIX": str(prefix),
            "PYTHONHASHSEED": str(seed),
            "PYTHONDONTWRITEBYTECODE": "",
            **env,
        },
    )
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def _files(prefix) -> list:
    return sorted(prefix.rglob("attrs-methods.*"))


def test_a_second_process_takes_the_methods_from_the_file_and_they_behave_the_same(tmp_path):
    cached, fresh = tmp_path / "cached", tmp_path / "fresh"
    first = _run(cached, seed=1)
    assert first["fresh"], "the first process compiles and keeps its classes"
    assert all(" errkb." in name for name in first["fresh"])  # the program's own class is not
    assert len(_files(cached)) == 1

    # Another hash seed: attrs writes another number into each __hash__, which the cached code
    # must take on, so that the values hash as a process that compiled them would.
    second = _run(cached, seed=2)
    assert second["fresh"] == [], "every class came from the file"
    assert set(first["fresh"]) <= set(second["read"])
    compiled_here = _run(fresh, seed=2)
    assert compiled_here["fresh"]
    for key in ("hash", "equal", "repr", "mine"):
        assert second[key] == compiled_here[key], key
    assert second["equal"] is True


def test_a_changed_or_broken_file_is_passed_over(tmp_path):
    _run(tmp_path, seed=1)
    (path,) = _files(tmp_path)
    path.write_bytes(path.read_bytes()[:40] + b"not marshal data")
    again = _run(tmp_path, seed=1)
    assert again["fresh"], "nothing was read from a broken file: all compiled, as without it"
    assert again["equal"] is True


def test_nothing_is_written_where_python_writes_no_bytecode(tmp_path):
    _run(tmp_path, seed=1, PYTHONDONTWRITEBYTECODE="1")
    assert _files(tmp_path) == []
