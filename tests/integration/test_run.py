"""`errkb run`: the hook in every Python process a command starts, tested with real children."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
from helpers import SEED_MESSAGE

PARENT = f"""
import multiprocessing, subprocess, sys

def engine_core():
    raise ValueError({SEED_MESSAGE!r})

if __name__ == "__main__":
    worker = multiprocessing.get_context("spawn").Process(target=engine_core, name="EngineCore")
    worker.start()
    worker.join()
    print("spawn exit", worker.exitcode, flush=True)
    sys.stderr.write("=== subprocess ===\\n")
    sys.stderr.flush()
    done = subprocess.run([sys.executable, "-c", "raise ValueError(" + repr({SEED_MESSAGE!r}) + ")"])
    print("subprocess exit", done.returncode, flush=True)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ERRKB_", "PYTHONPATH"))}
    env.update(extra)
    return env


def _errkb_run(*argv: str, cwd=None, **env: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "errkb", "run", "--", *argv],
        capture_output=True,
        cwd=cwd,
        timeout=180,
        check=False,
        env=_env(**env),
    )


@pytest.fixture(scope="module")
def parent_run(tmp_path_factory):
    """`errkb run -- python parent.py`, where parent.py starts a spawned and a plain child."""
    folder = tmp_path_factory.mktemp("run")
    (folder / "parent.py").write_text(textwrap.dedent(PARENT))
    return _errkb_run(sys.executable, "parent.py", cwd=folder)


def test_spawned_child_gets_the_diagnosis_after_its_traceback(parent_run):
    """A multiprocessing (spawn) child's error: its traceback, then the diagnosis, on stderr."""
    spawned = parent_run.stderr.split(b"=== subprocess ===")[0]
    assert b"Process EngineCore:" in spawned
    assert spawned.index(b"ValueError: The model") < spawned.index(b"vllm-kv-cache-max-seq-len")


def test_subprocess_child_gets_the_diagnosis(parent_run):
    """A subprocess child's uncaught error gets the diagnosis under its traceback."""
    child = parent_run.stderr.split(b"=== subprocess ===")[1]
    assert child.index(b"ValueError: The model") < child.index(b"vllm-kv-cache-max-seq-len")


def test_children_keep_their_exit_status(parent_run):
    """Both children exit 1, as without errkb; the parent runs to its end (exit 0)."""
    assert (0, b"spawn exit 1\nsubprocess exit 1\n") == (parent_run.returncode, parent_run.stdout)


def test_exit_status_is_the_commands():
    """errkb run returns the command's own exit status."""
    assert 7 == _errkb_run(sys.executable, "-c", "import sys; sys.exit(7)").returncode


def test_existing_sitecustomize_still_runs(tmp_path):
    """A sitecustomize already on PYTHONPATH runs too, and the hook is installed after it."""
    (tmp_path / "sitecustomize.py").write_text("print('their sitecustomize ran')\n")
    proc = _errkb_run(
        sys.executable,
        "-c",
        "import errkb.hook; print(errkb.hook.installed())",
        PYTHONPATH=str(tmp_path),
    )
    # errkb run itself ran it too (same PYTHONPATH); the child's lines come last.
    assert (
        b"their sitecustomize ran\nTrue\n"
        == proc.stdout[-len(b"their sitecustomize ran\nTrue\n") :]
    )


def test_without_the_variable_the_sitecustomize_does_nothing(tmp_path):
    """The sitecustomize installs the hook only when ERRKB_AUTOINSTALL is set."""
    from errkb._autostart import site_dir

    proc = subprocess.run(
        [sys.executable, "-c", "import sys; print('errkb.hook' in sys.modules)"],
        capture_output=True,
        timeout=60,
        check=True,
        env=_env(PYTHONPATH=site_dir()),
    )
    assert b"False\n" == proc.stdout


def test_missing_command_exits_127():
    """A command that does not exist: one line and the shell's status 127."""
    proc = _errkb_run("no-such-command-for-errkb")
    assert 127 == proc.returncode
    assert 1 == len(proc.stderr.splitlines())


@pytest.mark.skipif(os.name != "posix", reason="POSIX signals")
def test_sigterm_is_forwarded_to_the_command():
    """SIGTERM sent to errkb run reaches the command, whose handler decides the exit status."""
    code = (
        "import signal, sys\n"
        "signal.signal(signal.SIGTERM, lambda *a: sys.exit(42))\n"
        "print('ready', flush=True)\n"
        "signal.pause()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "errkb", "run", "--", sys.executable, "-c", code],
        stdout=subprocess.PIPE,
        env=_env(),
    )
    assert b"ready\n" == proc.stdout.readline()
    proc.send_signal(signal.SIGTERM)
    assert 42 == proc.wait(timeout=60)
    proc.stdout.close()
