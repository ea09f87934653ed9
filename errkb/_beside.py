"""Files errkb keeps beside its own bytecode, as Python keeps a module's ``.pyc``.

What a process learns that the next can reuse while its inputs stand: the methods attrs wrote
for errkb's classes (``errkb._attrs``), which index files were found current (``errkb.packs``),
the listings of installers' folders (``errkb._dists``). Each lives in the ``__pycache__`` of the
module that keeps it (or under ``PYTHONPYCACHEPREFIX``), is written only where Python would
write bytecode (not under ``PYTHONDONTWRITEBYTECODE``), whole or not at all, and a failure to
write it costs nothing but the next process's work.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["SETTLED_NS", "path", "write"]

#: A file or folder changed this recently (ns) may change again within its time's clock tick
#: with its time unchanged: what was read from it is not kept (as git treats a file changed in
#: the second its index was written).
SETTLED_NS = 2_000_000_000


def path(module_file: str, name: str) -> Path:
    """``name.<cache tag>.<suffix>`` beside the bytecode of the module at ``module_file``.

    ``name`` is given with its suffix (``"dists.json"``); the interpreter's cache tag goes
    before it, as in ``dists.cpython-311.json``.
    """
    import importlib.util
    from pathlib import Path

    stem, _, suffix = name.rpartition(".")
    pyc = Path(importlib.util.cache_from_source(module_file, optimization=""))
    return pyc.with_name(f"{stem}.{sys.implementation.cache_tag}.{suffix}")


def write(where: Path, data: bytes) -> None:
    """Write ``data`` to ``where`` whole, where Python would write bytecode; never raises.

    A temporary file beside it is moved into place: a reader sees the old file or the new one.
    """
    import contextlib
    import os

    if sys.dont_write_bytecode:
        return
    temporary = where.with_name(f"{where.name}.{os.getpid()}.tmp")
    try:
        where.parent.mkdir(parents=True, exist_ok=True)
        temporary.write_bytes(data)
        temporary.replace(where)
    except (OSError, ValueError):
        with contextlib.suppress(OSError):
            temporary.unlink(missing_ok=True)
