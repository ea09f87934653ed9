"""Imported once, in the process that local worker processes are forked from (``forkserver``).

Its import loads errkb's built-in records, so that each worker process starts with them in
memory, instead of loading them again after it has started (Dask's worker code is preloaded
beside it: see :func:`errkb.fleet._run._start_forkserver`).
"""

from __future__ import annotations

from errkb.fleet._run import _registry

_registry(())
