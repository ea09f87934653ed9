"""The pytest plugin, run for real: pytest in a child process on a failing test file."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from helpers import SEED_MESSAGE

FAILING = f"""
def test_engine_starts():
    raise ValueError({SEED_MESSAGE!r})


def test_unknown_failure():
    raise RuntimeError("the frobnicator is out of beans")
"""


@pytest.fixture
def failing_project(tmp_path):
    """A folder with a failing test file (and an empty ini, so no outer config applies)."""
    (tmp_path / "test_failing.py").write_text(textwrap.dedent(FAILING))
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return tmp_path


def _pytest(folder, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ERRKB_", "PYTEST_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rN", *args],
        capture_output=True,
        cwd=folder,
        timeout=120,
        check=False,
        env=env,
    )
    assert 1 == proc.returncode, proc.stdout + proc.stderr
    return proc.stdout.decode()


def test_enabled_with_p_adds_the_section(failing_project):
    """-p errkb: the failing test's report has an "errkb diagnosis" section with the record."""
    out = _pytest(failing_project, "-p", "errkb", "-k", "engine")
    assert 1 == out.count("errkb diagnosis")
    assert "vllm-kv-cache-max-seq-len" in out


def test_off_by_default(failing_project):
    """Installed but not enabled: the report has no section."""
    out = _pytest(failing_project, "-k", "engine")
    assert "errkb diagnosis" not in out


def test_enabled_with_the_ini_option(failing_project):
    """The ini option `errkb = true` turns it on without -p."""
    (failing_project / "pytest.ini").write_text("[pytest]\nerrkb = true\n")
    out = _pytest(failing_project, "-k", "engine")
    assert "errkb diagnosis" in out


def test_unknown_failure_gets_no_section(failing_project):
    """A failure no record knows gets no section, even when enabled."""
    out = _pytest(failing_project, "-p", "errkb", "-k", "unknown")
    assert "errkb diagnosis" not in out
