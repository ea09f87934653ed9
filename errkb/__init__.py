"""errkb: error knowledge for the Python ML and LLM-serving stack.

Three ways in::

    import errkb
    errkb.install()                      # diagnose uncaught exceptions, under the traceback

    errkb.lookup("CUDA out of memory. Tried to allocate 2.00 GiB ...")   # -> [Match, ...]
    errkb.diagnose(exc)                  # -> Diagnosis | None, for a live exception

and ``errkb explain "<message>"`` on the command line. ``import errkb`` is cheap: the records,
rich, torch and transformers load on first use, never at import.
"""

from __future__ import annotations

import importlib

from errkb._version import __version__
from errkb.hook import install, uninstall

# `typing` costs milliseconds to import; the annotations never need it at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import Any

    from errkb.diagnosis import Diagnosis, diagnose, explain
    from errkb.match import Match
    from errkb.options import Options
    from errkb.records import Record
    from errkb.registry import Registry

__all__ = [
    "Diagnosis",
    "Match",
    "Options",
    "Record",
    "Registry",
    "__version__",
    "diagnose",
    "explain",
    "install",
    "lookup",
    "uninstall",
]


_LAZY = {
    "Diagnosis": "errkb.diagnosis",
    "diagnose": "errkb.diagnosis",
    "explain": "errkb.diagnosis",
    "Match": "errkb.match",
    "Options": "errkb.options",
    "Record": "errkb.records",
    "Registry": "errkb.registry",
}


def lookup(message: str, error_class: type[BaseException] | str | None = None) -> list[Match]:
    """The records that match ``message``, best first (empty when none does).

    ``error_class`` narrows the candidates to records whose ``errorClass`` is in its MRO: give
    the exception's class, or a name (``"ValueError"``, ``"torch.OutOfMemoryError"``). The
    built-in registry is loaded once, on first use; this is safe to call from many threads.

    Examples:
        >>> [m.record.id for m in lookup("No available memory for the cache blocks. Try increasing "
        ...                              "`gpu_memory_utilization` when initializing the engine.")][:1]
        ['vllm-no-cache-blocks']
    """
    global _default_registry  # noqa: PLW0603 - an import statement a lookup costs 8,000 instructions
    if _default_registry is None:
        from errkb.registry import default_registry

        _default_registry = default_registry
    return _default_registry().matcher.match(message, error_class)


_default_registry: Callable[[], Registry] | None = None  # imported by the first lookup


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'errkb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext errkb``: install the hook into this IPython shell."""
    del ipython  # install() finds the running shell itself
    install()


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext errkb``: put the shell's previous handler back."""
    del ipython
    uninstall()
