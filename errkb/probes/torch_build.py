"""The torch probe: the installed torch's build, read in a child interpreter with a time bound.

The child imports torch and reports what the wheel was built with: its version,
``torch.version.cuda`` / ``hip``, the GPU architectures it carries code for
(``torch._C._cuda_getArchFlags()``, a string fixed at build time) and the C++ ABI. It never
asks torch for a device, so CUDA is not initialised, and errkb's own process never imports
torch at all: a torch that fails to import, crashes or hangs is a reported fact.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import TYPE_CHECKING

from errkb._attrs import attrs

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = ["TorchBuild", "read_torch"]

#: What the child runs: one JSON line on stdout.
_SCRIPT = r"""
import json, sys
try:
    import torch
except BaseException as exc:
    print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    sys.exit(0)
version = getattr(torch, "version", None)
flags = getattr(torch._C, "_cuda_getArchFlags", None)
archs = (flags() or "") if flags is not None else ""
abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None)
print(json.dumps({
    "version": str(torch.__version__),
    "cuda": getattr(version, "cuda", None),
    "hip": getattr(version, "hip", None),
    "archs": archs.split(),
    "cxx11_abi": None if abi is None else bool(abi),
    "file": getattr(torch, "__file__", None),
}))
"""


@attrs.frozen(kw_only=True)
class TorchBuild:
    """The installed torch's build, or why it could not be read (``error``).

    ``installed`` is False when no torch is importable; ``cuda`` and ``hip`` are ``None`` on a
    CPU build; ``archs`` are the architectures compiled in (``sm_90``, ``compute_90``).
    """

    installed: bool
    version: str | None = None
    cuda: str | None = None
    hip: str | None = None
    archs: tuple[str, ...] = ()
    cxx11_abi: bool | None = None
    file: str | None = None
    error: str | None = None
    source: str = ""

    @property
    def cpu_only(self) -> bool:
        """True for a build with neither CUDA nor ROCm (the CPU wheel)."""
        return self.installed and self.error is None and not self.cuda and not self.hip


def read_torch(
    python: str | None = None, *, timeout: float = 60.0, env: Mapping[str, str] | None = None
) -> TorchBuild:
    """Import torch in a child ``python`` (this interpreter by default) and read its build.

    Never raises: a child that fails, crashes or does not answer within ``timeout`` seconds
    gives a :class:`TorchBuild` with ``error`` saying so.
    """
    executable = python or sys.executable
    start = time.monotonic()
    try:
        done = subprocess.run(
            [executable, "-c", _SCRIPT],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=None if env is None else dict(env),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return TorchBuild(
            installed=True,
            error=f"importing torch did not finish within {timeout:g}s",
            source=f"a child interpreter ({executable}), stopped at {timeout:g}s",
        )
    except OSError as exc:
        return TorchBuild(installed=False, error=f"cannot start {executable}: {exc}")
    source = f"a child interpreter ({executable}), {time.monotonic() - start:.1f}s"
    line = done.stdout.strip().splitlines()[-1:] or [""]
    try:
        data = json.loads(line[0])
    except ValueError:
        why = f"exit status {done.returncode}" if done.returncode >= 0 else "a crash"
        tail = done.stderr.strip().splitlines()[-1:] or [""]
        return TorchBuild(
            installed=True, error=f"importing torch ended in {why}: {tail[0]}", source=source
        )
    if "error" in data:
        missing = data["error"].startswith("ModuleNotFoundError: No module named 'torch'")
        return TorchBuild(installed=not missing, error=data["error"], source=source)
    return TorchBuild(
        installed=True,
        version=data["version"],
        cuda=data["cuda"],
        hip=data["hip"],
        archs=tuple(data["archs"]),
        cxx11_abi=data["cxx11_abi"],
        file=data["file"],
        source=source,
    )
