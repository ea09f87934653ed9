"""Start-up installation of the hook, for ``errkb run`` and ``ERRKB_AUTOINSTALL=1``.

The folder of this package holds a ``sitecustomize.py`` that ``errkb run`` puts first on the
child's ``PYTHONPATH``. It calls :func:`autostart`, which installs the hook when
``ERRKB_AUTOINSTALL`` is set, and makes ``multiprocessing`` workers report too: a worker's
uncaught exception never reaches ``sys.excepthook`` (``multiprocessing`` prints it itself), so
the worker's ``run`` is watched and the diagnosis follows the traceback it prints.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

__all__ = ["ENV", "autostart", "site_dir"]

#: The variable that turns start-up installation on.
ENV = "ERRKB_AUTOINSTALL"


def site_dir() -> str:
    """The folder holding errkb's ``sitecustomize.py``, to put first on ``PYTHONPATH``."""
    return os.path.dirname(os.path.abspath(__file__))  # noqa: PTH100, PTH120 - start-up cost


def autostart() -> None:
    """Install the hook, and watch ``multiprocessing`` workers, when ``ERRKB_AUTOINSTALL`` is set."""
    from errkb._env import flag
    from errkb.hook import install, installed

    if not flag(ENV) or installed():
        return
    install()
    if installed():
        _watch_multiprocessing()


def _watch_multiprocessing() -> None:
    """Wrap ``BaseProcess._bootstrap`` so a worker's exception gets a diagnosis.

    ``_bootstrap`` runs ``run``, prints the traceback of whatever escapes it and returns the
    exit code; the diagnosis comes once it returns, so it follows the traceback, as under the
    hook. Subclasses that override ``run`` are watched too (the bound method is wrapped).
    """
    from multiprocessing import process

    original = process.BaseProcess._bootstrap  # type: ignore[attr-defined]  # noqa: SLF001
    if getattr(original, "errkb_watched", False):
        return

    def bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        run = self.run
        failure: list[BaseException] = []

        def watched() -> Any:
            try:
                return run()
            except (SystemExit, KeyboardInterrupt):
                raise
            except BaseException as exc:
                failure.append(exc)
                raise

        self.run = watched
        try:
            return original(self, *args, **kwargs)
        finally:
            if failure:
                from errkb.hook import show

                show(failure.pop())

    bootstrap.errkb_watched = True  # type: ignore[attr-defined]
    process.BaseProcess._bootstrap = bootstrap  # type: ignore[attr-defined]  # noqa: SLF001
