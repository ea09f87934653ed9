"""The extensions probe: does each compiled extension of the stack load? Tried in child processes.

For each installed distribution of :data:`errkb.probes.stack.EXTENSION_DISTRIBUTIONS`, the compiled files its
``RECORD`` lists are loaded in a child interpreter, after ``import torch`` as the library itself
would: a Python extension module straight from its file (``vllm/_C.abi3.so``,
``flash_attn_2_cuda....so``: its package's ``__init__`` is not run, so only the binary is
judged), and a plain shared library with ctypes where the distribution loads one itself
(bitsandbytes' native library, the one for torch's CUDA version). Each distribution has its own
child and time bound, so an extension that crashes the interpreter or hangs is a reported fact
(the child says which file it was loading), never errkb's failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from errkb._attrs import attrs
from errkb._dists import normalize
from errkb.probes.stack import EXTENSION_DISTRIBUTIONS

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from errkb.probes.stack import Distribution

__all__ = ["Extension", "compiled_files", "load_extensions"]

#: The child: argv[1] is JSON ``{"torch": bool, "files": [[kind, name, path], ...]}``; it
#: prints ``{"trying": i}`` before each file and ``{"done": i, "error": ...}`` after it.
_SCRIPT = r"""
import json, sys
task = json.loads(sys.argv[1])
def say(**kw):
    print(json.dumps(kw), flush=True)
failed_torch = None
if task["torch"]:
    try:
        import torch
    except BaseException as exc:
        failed_torch = f"{type(exc).__name__}: {exc}"
for i, (kind, name, path) in enumerate(task["files"]):
    say(trying=i)
    if failed_torch:
        say(done=i, error="torch did not import: " + failed_torch)
        continue
    try:
        if kind == "module":
            import importlib.util
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
        else:
            import ctypes
            ctypes.CDLL(path)
    except BaseException as exc:
        say(done=i, error=f"{type(exc).__name__}: {exc}")
    else:
        say(done=i, error=None)
"""

#: Tags between a module's name and ``.so``/``.pyd`` that mark a Python extension module.
_MODULE_TAGS = ("cpython-", "abi3", "cp3", "pypy")


@attrs.frozen(kw_only=True)
class Extension:
    """One compiled file of a distribution, and whether it loaded (``error`` is ``None``).

    ``kind`` is ``module`` (a Python extension module) or ``library`` (loaded with ctypes).
    """

    distribution: str
    version: str
    kind: str
    name: str
    path: str
    error: str | None
    source: str = ""


def compiled_files(dist: Distribution, torch_cuda: str | None) -> list[tuple[str, str, str]]:
    """(kind, dotted name, absolute path) of each compiled file ``dist`` would load."""
    root = Path(dist.folder).parent
    try:
        record = (Path(dist.folder) / "RECORD").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    modules, libraries = [], []
    for line in record.splitlines():
        relative = line.split(",", 1)[0]
        name = relative.rsplit("/", 1)[-1]
        if not name.endswith((".so", ".pyd")) or relative.startswith(".."):
            continue
        parts = name.split(".")
        tagged = len(parts) > 2 and parts[1].startswith(_MODULE_TAGS)
        folder = relative.rsplit("/", 1)[0] if "/" in relative else ""
        if tagged or (len(parts) == 2 and not name.startswith("lib")):
            dotted = ".".join([*filter(None, folder.split("/")), parts[0]])
            modules.append(("module", dotted, str(root / relative)))
        else:
            libraries.append(("library", name, str(root / relative)))
    return modules + _chosen_library(normalize(dist.name), libraries, torch_cuda)


def _chosen_library(
    name: str, libraries: list[tuple[str, str, str]], torch_cuda: str | None
) -> list[tuple[str, str, str]]:
    """The plain shared library a distribution loads itself, where errkb knows which.

    bitsandbytes loads ``libbitsandbytes_cuda<XY>`` for torch's CUDA version X.Y
    (``BNB_CUDA_VERSION`` overrides it), ``libbitsandbytes_cpu`` on a CPU build, and its CPU
    library where it has none for that CUDA (releases 0.43.1 to 0.45.5 fall back to it:
    bitsandbytes/cextension.py at 0.45.5, lines 63-70; later ones refuse to load): a CPU
    library is then what the installed files offer, and it is reported as the one loaded.
    """
    if name != "bitsandbytes":
        return []
    wanted = os.environ.get("BNB_CUDA_VERSION") or (torch_cuda or "").replace(".", "")
    stems = [f"libbitsandbytes_cuda{wanted}"] if wanted else []
    for stem in [*stems, "libbitsandbytes_cpu"]:
        found = [lib for lib in libraries if lib[1].split(".")[0] == stem]
        if found:
            return found
    return []


def load_extensions(
    dists: Sequence[Distribution],
    *,
    torch_installed: bool,
    torch_cuda: str | None,
    timeout: float = 30.0,
    env: Mapping[str, str] | None = None,
    python: str | None = None,
) -> tuple[Extension, ...]:
    """Load the compiled files of each of ``dists`` in its own child; never raises.

    Each child has ``timeout`` seconds; the children run a few at a time.
    """
    wanted = {normalize(n) for n in EXTENSION_DISTRIBUTIONS}
    tasks = [
        (dist, files)
        for dist in dists
        if normalize(dist.name) in wanted and (files := compiled_files(dist, torch_cuda))
    ]
    if not tasks:
        return ()
    workers = max(1, min(4, os.cpu_count() or 1, len(tasks)))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="errkb-ext") as pool:
        results = pool.map(
            lambda task: _load_one(
                task[0], task[1], torch_installed, timeout, env, python or sys.executable
            ),
            tasks,
        )
        return tuple(ext for batch in results for ext in batch)


def _load_one(
    dist: Distribution,
    files: list[tuple[str, str, str]],
    torch_installed: bool,
    timeout: float,
    env: Mapping[str, str] | None,
    python: str,
) -> list[Extension]:
    task = json.dumps({"torch": torch_installed, "files": files})
    start = time.monotonic()
    timed_out = False
    try:
        done = subprocess.run(
            [python, "-c", _SCRIPT, task],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=None if env is None else dict(env),
            check=False,
        )
        stdout, code = done.stdout, done.returncode
    except subprocess.TimeoutExpired as exc:
        said = exc.stdout or ""
        stdout = said.decode(errors="replace") if isinstance(said, bytes) else said
        code, timed_out = 0, True
    source = f"a child interpreter, {time.monotonic() - start:.1f}s"
    errors: dict[int, str | None] = {}
    trying: int | None = None
    for line in stdout.splitlines():
        try:
            said = json.loads(line)
        except ValueError:
            continue
        if "trying" in said:
            trying = int(said["trying"])
        elif "done" in said:
            errors[int(said["done"])] = said["error"]
            trying = None
    if trying is not None:
        if timed_out:
            errors[trying] = f"loading it did not finish within {timeout:g}s (a hang)"
        else:
            errors[trying] = f"loading it crashed the interpreter ({_signal_name(code)})"
    out = []
    for index, (kind, name, path) in enumerate(files):
        if index not in errors:
            continue  # never reached: the child stopped at an earlier file
        out.append(
            Extension(
                distribution=dist.name,
                version=dist.version,
                kind=kind,
                name=name,
                path=path,
                error=errors[index],
                source=source,
            )
        )
    return out


def _signal_name(code: int) -> str:
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"
