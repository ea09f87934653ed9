"""Pausing Python's cycle collector while errkb makes many objects at once.

A registry build, and a first diagnosis (its imports, classes and records), allocate many small
objects and no cycles worth collecting; each collection they trigger walks every object made so
far. Reference counting frees memory as usual meanwhile.
"""

from __future__ import annotations

import contextlib
import gc
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["paused"]


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """Pause the collector for the block; on again after it only if it was on before."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
