"""Imported once, in the process that local worker processes are forked from (``forkserver``).

Its import loads Dask's worker code and errkb's built-in records, so that each worker process
starts with both in memory, instead of importing and loading them again after it has started.
"""

from __future__ import annotations

import importlib

from errkb.fleet._run import _registry

importlib.import_module("distributed")
_registry(())
