"""The environment advisor's own answers in a child process, with the real probes.

The child is a script run as users run it (``python train.py --epochs 3``): its
``init_process_group`` meets a port another socket of the same process holds, torch raises its
real error, and the ``launch`` probe reads the real command line and asks the system for a free
port. The command must be that command line with ``MASTER_PORT`` set to a port that is free.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys

import pytest
from helpers import _child_env

SCRIPT = """
import json, os, socket
import errkb
import torch.distributed as dist

busy = socket.socket()
busy.bind(("", 0))
busy.listen()
os.environ["MASTER_ADDR"] = "localhost"
os.environ["MASTER_PORT"] = str(busy.getsockname()[1])
try:
    dist.init_process_group("gloo", init_method="env://", rank=0, world_size=1)
except RuntimeError as exc:
    finding = errkb.diagnose(exc).findings[0]
    print(json.dumps({
        "record": finding.record.id,
        "command": finding.solutions[0].settings.get("command"),
        "busy": busy.getsockname()[1],
    }))
"""


def test_a_script_s_busy_master_port_gets_its_own_command_line_on_a_free_port(tmp_path):
    """Real torch, real probes: MASTER_PORT=<free> python <the script> --epochs 3."""
    pytest.importorskip("torch.distributed")
    script = tmp_path / "train.py"
    script.write_text(SCRIPT, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script), "--epochs", "3"],
        capture_output=True, env=_child_env(None), timeout=300, check=False,
    )  # fmt: skip
    assert 0 == done.returncode, done.stderr.decode()[-2000:]
    data = json.loads(done.stdout)
    found = re.fullmatch(rf"MASTER_PORT=(\d+) python {re.escape(str(script))} --epochs 3",
                         str(data["command"]))  # fmt: skip
    assert ("torch-rendezvous-port-in-use", True) == (data["record"], found is not None)
    port = int(found.group(1)) if found else 0
    with socket.socket() as sock:  # free when read, and not the one that was taken
        sock.bind(("", port))
    assert port != data["busy"]
