"""The environment doctor: read this machine's facts, judge them, say what to run.

:func:`examine` reads the environment through bounded probes (:mod:`errkb.probes.system`, NVML
through :mod:`errkb.probes.gpu`, torch's build and the compiled extensions in child
interpreters, the installed distributions' metadata) and judges it with the knowledge tables in
:mod:`errkb.advisors.environment.verdicts`, the checks the environment advisor shares (it gives
the same command when one of these errors is raised). The result is a :class:`Checkup`, plain
data that ``errkb doctor`` renders; nothing here changes the environment, and errkb's own
process never imports torch or initialises CUDA.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from errkb.doctor._model import SCHEMA, Checkup, Environment, Severity, Verdict

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from errkb.probes.extensions import Extension
    from errkb.probes.stack import StackReading
    from errkb.probes.torch_build import TorchBuild

__all__ = [
    "SCHEMA",
    "Checkup",
    "Environment",
    "Severity",
    "Verdict",
    "examine",
    "examine_paste",
    "read_environment",
]

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
    from errkb.probes.environment import read
    from errkb.probes.extensions import load_extensions
    from errkb.probes.torch_build import read_torch

    def extensions(
        stack: StackReading, torch: TorchBuild, env: dict[str, str]
    ) -> tuple[Extension, ...]:
        return load_extensions(
            stack.distributions,
            torch_installed=torch.installed and torch.error is None,
            torch_cuda=torch.cuda,
            timeout=extension_timeout,
            env=env,
            python=python,
        )

    return read(
        lambda env: read_torch(python, timeout=TORCH_TIMEOUT, env=env),
        nvml_timeout=NVML_TIMEOUT,
        paths=paths,
        environ=environ,
        extensions=extensions,
    )


def examine(
    *,
    paths: Sequence[str] | None = None,
    environ: Mapping[str, str] | None = None,
    python: str | None = None,
) -> Checkup:
    """Read the environment and judge it: the :class:`Checkup` ``errkb doctor`` shows."""
    from errkb.advisors.environment.verdicts import judge

    start = time.monotonic()
    env = read_environment(paths=paths, environ=environ, python=python)
    return Checkup(environment=env, verdicts=judge(env), seconds=time.monotonic() - start)


def examine_paste(text: str) -> Checkup | None:
    """Judge the environment a pasted text describes; ``None`` when no report tool's output is in it.

    The text may hold the output of ``python -m torch.utils.collect_env``, ``vllm collect-env``,
    ``accelerate env``, ``transformers env`` and ``nvidia-smi``, with the traceback beside them;
    the verdicts and commands are for the machine they describe, never this one.

    >>> examine_paste("no report here") is None
    True
    """
    from errkb.advisors.environment._pasted import completed, judge_pasted
    from errkb.advisors.environment._tables import tables
    from errkb.probes.pasted_env import read_pasted

    start = time.monotonic()
    pasted = read_pasted(text)
    if pasted is None:
        return None
    known = tables()
    return Checkup(
        environment=completed(pasted, known),
        verdicts=judge_pasted(pasted, known),
        seconds=time.monotonic() - start,
        pasted=pasted,
    )
