"""The fleet scan on real parts: a Dask LocalCluster of two worker processes, Dask's
single-machine scheduler on a pool of two, a real S3 server on loopback (moto's server mode)
read through s3fs, a worker killed mid-run, sources that fail, and ``errkb scan`` in a child
process.

Every comparison is against the serial scan of the same files: each file whole, in this
process, no Dask (``workers=0``). The cluster's runs cut the plain files into byte ranges of
:data:`fleet_data.STRADDLE` bytes, across which the generated fleet has planted tracebacks.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from fleet_data import STRADDLE, make_fleet
from helpers import run_python

pytest.importorskip("distributed")

from errkb.fleet._run import FleetOptions, plan, run

SERIAL = FleetOptions(workers=0, split=1 << 40)
RANGED = FleetOptions(split=STRADDLE)


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    """Six hosts (one on Kubernetes, one through syslog), three days, 180 files, about 8 MB."""
    root = tmp_path_factory.mktemp("fleet")
    make_fleet(root, files=10, file_bytes=45_000)
    return root


@pytest.fixture(scope="module")
def serial(fleet):
    """The serial scan of the whole fleet: the reference every other run must equal."""
    return run([str(fleet)], SERIAL)


@pytest.fixture(scope="module")
def client():
    """A real LocalCluster: two worker processes, a thread each."""
    from distributed import Client, LocalCluster

    with (
        LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c


def _renamed(result, old, new):
    """``result`` with every source name's prefix ``old`` replaced by ``new``."""
    text = json.dumps(result).replace(json.dumps(old)[1:-1], json.dumps(new)[1:-1])
    return json.loads(text)


def test_the_serial_scan_finds_the_planted_errors_on_every_host(serial):
    """The reference itself is not empty: known errors on all six hosts, unknown shapes, times."""
    assert 0 == serial["failed"]
    assert 180 == len(serial["sources"])
    by_id = {g["id"]: g for g in serial["groups"]}
    assert {"vllm-no-cache-blocks", "vllm-kv-cache-max-seq-len"} <= by_id.keys()
    hosts = {f"gpu-node-{n}" for n in range(1, 7)}
    assert hosts == set(by_id["vllm-no-cache-blocks"]["hosts"])
    assert by_id["vllm-no-cache-blocks"]["first_seen"] is not None
    shapes = {u["shape"] for u in serial["unknown"]}
    assert "KeyError: 'cmpl-<hex>'" in shapes
    assert "RuntimeError: sequence group <n> exceeded its budget of <n> tokens" in shapes


def test_a_local_cluster_with_byte_ranges_equals_the_serial_scan(fleet, serial, client):
    """Two worker processes, plain files cut every 64 KiB across tracebacks: the same result."""
    result = run([str(fleet)], RANGED, client=client)
    assert serial == result


def test_a_scheduler_given_by_its_address_gives_the_same_result(fleet, serial, client):
    """--scheduler ADDRESS: errkb connects to the running cluster itself; the same result."""
    options = FleetOptions(scheduler=client.scheduler.address, split=STRADDLE)
    assert serial == run([str(fleet)], options)


def test_a_killed_worker_is_retried_and_the_result_is_still_exact(fleet, serial, client):
    """A worker process killed once the first task is back: Dask reruns its tasks elsewhere."""
    pids = client.run(os.getpid)
    killed: list[int] = []

    def kill_one(done, *_):
        if not killed:
            pid = next(iter(pids.values()))
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    result = run([str(fleet)], RANGED, client=client, progress=kill_one)
    assert killed
    assert killed[0] not in client.run(os.getpid).values()
    assert serial == result


_KILL_A_WORKER = """
import json, os, signal, sys
import psutil
from errkb.fleet._run import FleetOptions, _forkable, run

before = {p.pid for p in psutil.Process().children(recursive=True)}
killed = []

def kill_one(done, *_):
    if killed:
        return
    me = psutil.Process()
    # The pool's workers: this process's own children (fork), or the forkserver's.
    helpers = [p for p in me.children() if "multiprocessing" in " ".join(p.cmdline())]
    servers = [p for p in helpers if "forkserver" in " ".join(p.cmdline())]
    parents = [me, *servers]
    workers = [
        p for parent in parents for p in parent.children()
        if p.pid not in before and p not in helpers
    ]
    assert workers, "no pool worker found"
    os.kill(workers[0].pid, signal.SIGKILL)
    killed.append(workers[0].pid)

if __name__ == "__main__":
    if sys.argv[2] == "forkserver":
        import errkb.fleet._run as fleet_run
        fleet_run._forkable = lambda: False
    forked = sys.argv[2] == "fork" and _forkable()
    result = run([sys.argv[1]], FleetOptions(workers=2, split=int(sys.argv[3])), progress=kill_one)
    print(json.dumps({"killed": killed, "forked": forked, "result": result}))
"""


@pytest.mark.parametrize("start", ["fork", "forkserver"])
def test_the_process_pool_equals_the_serial_scan_and_survives_a_killed_worker(
    fleet, serial, tmp_path, start
):
    """Dask's single-machine scheduler, the default of --workers N, in a child process: two
    worker processes forked from the driver (it runs no other thread) or from the forkserver.
    One is killed once the first task is back: the pool breaks, the tasks not done run again
    on a new pool, and the result is still the serial scan's."""
    script = tmp_path / "kill_a_worker.py"
    script.write_text(_KILL_A_WORKER)
    done = subprocess.run(
        [sys.executable, str(script), str(fleet), start, str(STRADDLE)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["killed"]
    assert out["forked"] == (start == "fork")
    assert serial == out["result"]


def _copy(fleet, tmp_path, count=20, name="fleet", but=None):
    """The first ``count`` files of the fleet (less ``but``), copied with their times."""
    files = sorted(p for p in fleet.rglob("*") if p.is_file())[:count]
    for path in files:
        if path.relative_to(fleet) == but:
            continue
        target = tmp_path / name / path.relative_to(fleet)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return tmp_path / name


def test_a_truncated_gzip_is_reported_and_skipped(fleet, tmp_path):
    """A .gz cut in half fails alone, with gzip's reason; the other sources count as before."""
    root = _copy(fleet, tmp_path)
    bad = next(p for p in sorted(root.rglob("*.gz")))
    others = _copy(fleet, tmp_path, name="others", but=bad.relative_to(root))
    expected = _renamed(run([str(others)], SERIAL), str(others), str(root))
    data = bad.read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    result = run([str(root)], SERIAL)
    failed = [s for s in result["sources"] if s["failed"]]
    assert [str(bad)] == [s["source"] for s in failed]
    assert failed[0]["failed"].startswith("EOFError: Compressed file ended")
    assert 1 == result["failed"]
    assert expected["groups"] == result["groups"]
    assert expected["unknown"] == result["unknown"]


def test_an_unreadable_file_is_reported_and_skipped(fleet, tmp_path):
    """A file listed, then unreadable when read (no permission; as root: replaced by a folder)."""
    root = _copy(fleet, tmp_path)
    bad = min(p for p in root.rglob("*.log"))
    planned = plan([str(root)], SERIAL)
    if os.geteuid() == 0:  # root reads any file whatever its mode
        bad.unlink()
        bad.mkdir()
        reason = "IsADirectoryError"
    else:
        bad.chmod(0)
        reason = "PermissionError"
    result = run([str(root)], SERIAL, planned=planned)
    failed = {s["source"]: s["failed"] for s in result["sources"] if s["failed"]}
    assert [str(bad)] == list(failed)
    assert failed[str(bad)].startswith(reason)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def s3(fleet):
    """moto's S3 server on loopback, the fleet uploaded to bucket ``logs`` (through s3fs)."""
    pytest.importorskip("s3fs")
    from moto.server import ThreadedMotoServer

    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port)
    server.start()
    options = {
        "key": "testing",
        "secret": "testing",
        "endpoint_url": f"http://127.0.0.1:{port}",
        "client_kwargs": {"region_name": "eu-west-1"},
    }
    import s3fs

    fs = s3fs.S3FileSystem(**options)
    fs.mkdir("logs")
    fs.put(str(fleet) + "/", "logs/fleet/", recursive=True)
    yield options, fs
    server.stop()


def test_the_fleet_in_s3_scanned_by_url_gives_the_same_result(fleet, serial, client, s3):
    """s3://logs/fleet/ on two workers, through s3fs: the serial result, sources renamed."""
    options, _ = s3
    result = run(
        ["s3://logs/fleet/"], FleetOptions(split=STRADDLE, storage_options=options), client=client
    )
    assert _renamed(serial, str(fleet), "s3://logs/fleet") == result


def test_an_object_deleted_after_listing_is_reported_and_skipped(s3):
    """An object removed between the listing and the reading fails alone, as not found."""
    options, fs = s3
    fs.put(
        str(min(Path(__file__).parent.parent.glob("data/pasted/log-*.txt"))),
        "logs/gone/a.log",
    )
    fs.put(
        str(sorted(Path(__file__).parent.parent.glob("data/pasted/log-*.txt"))[1]),
        "logs/gone/b.log",
    )
    opts = FleetOptions(workers=0, storage_options=options)
    planned = plan(["s3://logs/gone/*.log"], opts)
    fs.rm("logs/gone/a.log")
    result = run([], opts, planned=planned)
    by_name = {s["source"]: s["failed"] for s in result["sources"]}
    assert by_name["s3://logs/gone/a.log"].startswith("FileNotFoundError")
    assert by_name["s3://logs/gone/b.log"] is None
    assert 1 == result["failed"]


def _errkb(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "errkb", "scan", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


def test_the_command_prints_the_fleet_json_and_exits_2_when_a_source_failed(fleet, tmp_path):
    """errkb scan DIR --json in a child process: the merged object; a bad .gz makes it exit 2."""
    root = _copy(fleet, tmp_path, count=12)
    done = _errkb(str(root), "--json")
    assert 0 == done.returncode, done.stderr
    assert "" == done.stderr  # piped: no progress line
    assert run([str(root)], SERIAL) == json.loads(done.stdout)
    bad = next(iter(sorted(root.rglob("*.gz"))))
    bad.write_bytes(bad.read_bytes()[:100])
    done = _errkb(str(root), "--json")
    assert 2 == done.returncode
    assert f"errkb: cannot read {bad}" not in done.stdout
    assert 1 == json.loads(done.stdout)["failed"]


@pytest.mark.parametrize(
    "scheduler", [[], ["--scheduler", "processes"], ["--scheduler", "local-cluster"]]
)
def test_the_command_on_its_own_local_workers_equals_the_serial_scan(fleet, serial, scheduler):
    """errkb scan DIR --workers 2 in a child process: the process pool (the default) or the
    LocalCluster it starts (workers forked from a forkserver that loaded the records) gives the
    serial scan's result exactly."""
    done = _errkb(str(fleet), "--json", "--workers", "2", "--split", str(STRADDLE), *scheduler)
    assert 0 == done.returncode, done.stderr
    assert serial == json.loads(done.stdout)


def test_a_state_file_scans_only_what_is_new_and_keeps_running_totals(fleet, tmp_path):
    """A second run reads only the bytes appended since; the running totals add both runs."""
    root = _copy(fleet, tmp_path, count=6)
    state = tmp_path / "state.json"
    first = json.loads(_errkb(str(root), "--json", "--state", str(state)).stdout)
    grown = min(root.rglob("*.log"))
    size = grown.stat().st_size
    appended = (
        Path(__file__).parent.parent / "data/pasted/log-vllm-engine-core-raw.txt"
    ).read_bytes()
    with grown.open("ab") as f:
        f.write(appended)
    second = json.loads(_errkb(str(root), "--json", "--state", str(state)).stdout)
    assert [{"source": str(grown), "offset": size, "bytes": len(appended)}] == [
        {k: s[k] for k in ("source", "offset", "bytes")} for s in second["sources"]
    ]
    assert [("vllm-no-cache-blocks", 1)] == [(g["id"], g["count"]) for g in second["groups"]]
    running = {g["id"]: g["count"] for g in second["running"]["groups"]}
    before = {g["id"]: g["count"] for g in first["groups"]}
    assert before["vllm-no-cache-blocks"] + 1 == running["vllm-no-cache-blocks"]
    assert first["bytes"] + len(appended) == second["running"]["bytes"]
    third = json.loads(_errkb(str(root), "--json", "--state", str(state)).stdout)
    assert ([], 0) == (third["sources"], third["bytes"])


def test_compressed_sources_by_extension(tmp_path):
    """The same log as .gz, .bz2, .xz and .zst: each read through its codec, the same count."""
    import bz2
    import lzma

    zstandard = pytest.importorskip("zstandard")
    text = (Path(__file__).parent.parent / "data/pasted/log-vllm-engine-core-raw.txt").read_bytes()
    for name, data in {
        "a.log.gz": gzip.compress(text),
        "b.log.bz2": bz2.compress(text),
        "c.log.xz": lzma.compress(text),
        "d.log.zst": zstandard.ZstdCompressor().compress(text),
    }.items():
        (tmp_path / name).write_bytes(data)
    result = run([str(tmp_path)], SERIAL)
    assert [0, 0, 0, 0] == [1 if s["failed"] else 0 for s in result["sources"]]
    assert [("vllm-no-cache-blocks", 4)] == [(g["id"], g["count"]) for g in result["groups"]]


def test_progress_shows_on_a_terminal(fleet, tmp_path):
    """On a terminal (a pseudo-terminal here), a progress line: pieces, bytes, rate, errors."""
    import pty

    root = _copy(fleet, tmp_path, count=6)
    pid, fd = pty.fork()
    if pid == 0:  # the child: errkb scan, its output on the terminal
        os.execv(sys.executable, [sys.executable, "-m", "errkb", "scan", str(root)])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the terminal closed: the child is done
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    assert 0 == os.waitstatus_to_exitcode(status)
    assert b"\rscanning: 6/6 pieces, " in out
    assert b" known errors\x1b[K" in out


def test_import_errkb_and_install_load_nothing_of_the_fleet():
    """A child that imports errkb and installs the hook has no Dask, fsspec or fleet module."""
    done = run_python("import sys, errkb; errkb.install(); print(' '.join(sys.modules))")
    fleet = {"dask", "distributed", "fsspec", "s3fs", "zstandard", "errkb.fleet", "errkb.scan"}
    assert set() == (fleet | {"errkb._logline"}).intersection(done.stdout.split())


def test_one_compressed_file_alone_is_read_through_its_codec(tmp_path):
    """errkb scan FILE.bz2 (one file, no fleet): read through bz2, as a fleet's sources are."""
    import bz2

    text = (Path(__file__).parent.parent / "data/pasted/log-vllm-engine-core-raw.txt").read_bytes()
    path = tmp_path / "engine.log.bz2"
    path.write_bytes(bz2.compress(text))
    done = _errkb(str(path), "--json")
    assert 0 == done.returncode, done.stderr
    result = json.loads(done.stdout)
    assert (str(path), [("vllm-no-cache-blocks", 1)]) == (
        result["path"],
        [(g["id"], g["count"]) for g in result["groups"]],
    )


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="no CPU affinity here")
def test_local_workers_default_to_the_cores_the_process_may_run_on():
    """A process limited to one core (taskset, a container's cpuset) starts one worker, not one
    per core of the machine."""
    done = run_python(
        "import os; os.sched_setaffinity(0, {min(os.sched_getaffinity(0))}); "
        "from errkb.fleet._run import cores; print(cores())"
    )
    assert done.returncode == 0, done.stderr
    assert b"1" == done.stdout.strip()
