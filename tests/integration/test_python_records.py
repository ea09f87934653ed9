"""The interpreter's own errors under the hook, in real child processes.

The child runs a real program file that raises an error Python words itself; the hook's
diagnosis on stderr names the interpreter record and says whose code raised it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from helpers import run_python

if TYPE_CHECKING:
    from pathlib import Path


def _run(tmp_path: Path, body: str):
    program = tmp_path / "train.py"
    program.write_text("import errkb; errkb.install()\n" + body, encoding="utf-8")
    return run_python(f"import runpy; runpy.run_path({str(program)!r}, run_name='__main__')")


def test_a_name_error_in_the_program_is_said_to_be_in_its_code(tmp_path: Path) -> None:
    """NameError raised in train.py: the record, and the program's own file as its owner."""
    proc = _run(tmp_path, "def main():\n    return undefined_model\n\nmain()\n")
    assert 1 == proc.returncode
    assert b"NameError: name 'undefined_model' is not defined" in proc.stderr
    assert b"errkb show python-name-not-defined" in proc.stderr
    assert b"your code" in proc.stderr
    assert str(tmp_path / "train.py").encode() in proc.stderr


def test_a_failed_command_is_said_to_be_raised_by_the_standard_library(tmp_path: Path) -> None:
    """subprocess raises CalledProcessError in its own file; the program's call is named."""
    proc = _run(tmp_path, "import subprocess\nsubprocess.check_call(['false'])\n")
    assert 1 == proc.returncode
    assert b"errkb show python-subprocess-failed" in proc.stderr
    assert b"standard library" in proc.stderr


def test_a_shared_library_without_an_init_function_is_named(tmp_path: Path) -> None:
    """A C library built with ``cc -shared`` and imported as a module: no PyInit_<name>."""
    import shutil
    import subprocess

    import pytest

    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "n.c").write_text("int nothing(void) { return 0; }\n")
    subprocess.run(
        [cc, "-shared", "-fPIC", "-o", str(tmp_path / "libnumbuf.so"), str(tmp_path / "n.c")],
        check=True,
    )
    proc = _run(tmp_path, f"import sys\nsys.path.insert(0, {str(tmp_path)!r})\nimport libnumbuf\n")
    assert 1 == proc.returncode
    assert b"(PyInit_libnumbuf)" in proc.stderr
    assert b"errkb show python-extension-without-init-function" in proc.stderr
