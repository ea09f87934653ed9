"""errkb's ``sitecustomize``: installs the hook at start-up when ``ERRKB_AUTOINSTALL`` is set.

``errkb run`` puts this folder first on ``PYTHONPATH``, so every Python process started under it
(children, grandchildren, multiprocessing workers) runs this file. It first runs the
``sitecustomize`` it shadows, if there is one, then installs errkb; an interpreter without
errkb goes on untouched.
"""

from __future__ import annotations

import os
import sys


def _chain() -> None:
    """Run the next ``sitecustomize`` on ``sys.path``: the one this file hides."""
    import importlib.util
    from importlib.machinery import PathFinder

    here = os.path.dirname(os.path.abspath(__file__))  # noqa: PTH100, PTH120 - start-up cost
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]  # noqa: PTH100
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


try:
    _chain()
finally:
    # A cheap gate first: without the variable, errkb is not even imported.
    if os.environ.get("ERRKB_AUTOINSTALL"):
        try:
            from errkb._autostart import autostart
        except ImportError:  # another interpreter, without errkb: nothing to do
            pass
        else:
            autostart()
