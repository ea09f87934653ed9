"""The snippets of docs/adding-an-error-family.md run, and print what the page shows.

The Python blocks run in order in one child interpreter (as a reader pastes them); each
``$ errkb ...`` line of a console block runs as a command, and the lines the page shows after it
must come out in that order (``...`` stands for lines left out).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import _child_env

ROOT = Path(__file__).resolve().parents[2]
GUIDE = ROOT / "docs" / "adding-an-error-family.md"
BLOCK = re.compile(r"^```(?P<lang>\w+)\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)


def _blocks(lang: str) -> list[str]:
    return [m["body"] for m in BLOCK.finditer(GUIDE.read_text()) if m["lang"] == lang]


def _commands() -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for body in _blocks("console"):
        for line in body.rstrip("\n").split("\n"):
            if line.startswith("$ "):
                found.append((line[2:], []))
            elif found:
                found[-1][1].append(line)
    return found


def _env() -> dict[str, str]:
    return _child_env({"NO_COLOR": "1", "COLUMNS": "100", "PYTHONPATH": os.pathsep.join(sys.path)})


def test_the_python_snippets_run_in_order():
    code = "\n\n".join(_blocks("python"))
    assert code, "the guide has Python snippets"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, env=_env(),
                          cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert 0 == proc.returncode, proc.stderr.decode()


@pytest.mark.parametrize(("command", "shown"), _commands(), ids=lambda x: str(x)[:40])
def test_each_command_prints_what_the_page_shows(command, shown):
    argv = shlex.split(command)
    assert argv[0] == "errkb"
    proc = subprocess.run([sys.executable, "-m", "errkb", *argv[1:]], capture_output=True,
                          env=_env(), cwd=ROOT, timeout=120, check=False)  # fmt: skip
    assert 0 == proc.returncode, proc.stderr.decode()
    out = (proc.stdout + proc.stderr).decode().split("\n")
    at = 0
    for line in shown:
        if line == "...":
            continue
        rest = [o.rstrip() for o in out[at:]]
        assert line.rstrip() in rest, f"{line!r} not printed (in order) by {command}"
        at += rest.index(line.rstrip()) + 1
