"""The environment doctor: read this machine's facts, judge them, say what to run.

:func:`examine` reads the environment through bounded probes (:mod:`errkb.probes.system`, NVML
through :mod:`errkb.probes.gpu`, torch's build and the compiled extensions in child
interpreters, the installed distributions' metadata) and judges it with the knowledge tables
(:mod:`errkb.doctor._tables`) in :mod:`errkb.doctor.verdicts`. The result is a
:class:`Checkup`, plain data that ``errkb doctor`` renders; nothing here changes the
environment, and errkb's own process never imports torch or initialises CUDA.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from errkb.doctor._model import SCHEMA, Checkup, Environment, Severity, Verdict

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

__all__ = ["SCHEMA", "Checkup", "Environment", "Severity", "Verdict", "examine", "read_environment"]

#: Seconds each kind of probe may take: NVML, importing torch, loading one distribution's
#: extensions.
NVML_TIMEOUT = 5.0
TORCH_TIMEOUT = 60.0
EXTENSION_TIMEOUT = 30.0


def read_environment(
    *,
    paths: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    python: str | None = None,
    extension_timeout: float = EXTENSION_TIMEOUT,
) -> Environment:
    """Read every fact, each probe within its time bound.

    ``paths`` are where distributions are looked for (``sys.path``), ``environ`` the variables
    read and handed to the children (``os.environ``), ``python`` the interpreter the children
    run (this one): tests point them at a stand-in environment.
    """
    import os

    from errkb.probes import run_bounded
    from errkb.probes.extensions import load_extensions
    from errkb.probes.gpu import read_nvml
    from errkb.probes.stack import read_stack
    from errkb.probes.system import read_system
    from errkb.probes.torch_build import read_torch

    timings: list[tuple[str, float]] = []

    def timed(name: str, start: float) -> None:
        timings.append((name, round(time.monotonic() - start, 2)))

    env = dict(os.environ if environ is None else environ)
    start = time.monotonic()
    system = read_system(env)
    timed("system", start)
    start = time.monotonic()
    nvml, reason = run_bounded(read_nvml, NVML_TIMEOUT, "NVML")
    if nvml is None and reason is None:
        reason = "libnvidia-ml.so.1 is not found"
    timed("nvml", start)
    start = time.monotonic()
    torch = read_torch(python, timeout=TORCH_TIMEOUT, env=env)
    timed("torch", start)
    start = time.monotonic()
    stack = read_stack(paths)
    timed("stack", start)
    start = time.monotonic()
    extensions = load_extensions(
        stack.distributions,
        torch_installed=torch.installed and torch.error is None,
        torch_cuda=torch.cuda,
        timeout=extension_timeout,
        env=env,
        python=python,
    )
    timed("extensions", start)
    return Environment(
        system=system,
        nvml=nvml,
        nvml_error=reason,
        torch=torch,
        stack=stack,
        extensions=extensions,
        timings=tuple(timings),
    )


def examine(
    *,
    paths: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    python: str | None = None,
) -> Checkup:
    """Read the environment and judge it: the :class:`Checkup` ``errkb doctor`` shows."""
    from errkb.doctor.verdicts import judge

    start = time.monotonic()
    env = read_environment(paths=paths, environ=environ, python=python)
    return Checkup(environment=env, verdicts=judge(env), seconds=time.monotonic() - start)
