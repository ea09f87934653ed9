"""Records: the schema of a known error, its validation, and the loader of record files.

The package is the facade; each private module holds one job, upstream first:

- ``_schema``: the :class:`Record` type and the JSON keys derived from its fields;
- ``_validate``: :func:`record_from_dict`, which checks a JSON value and builds a record;
- ``_files``: the walk over folders and the readers of ``.json``, ``.jsonl`` and ``.jsonl.gz``
  files;
- ``_refs``: :class:`RecordRef`, the part of a record a registry keeps, and its :class:`Body`;
- ``_load``: :func:`load_paths` and :func:`load_refs`, which tie the others together.

How a trusted ``.jsonl`` pack is read is a parameter of :func:`load_refs` (``read_pack``), so
this package never imports :mod:`errkb.packs`, which is built on it.
"""

from __future__ import annotations

from errkb.records._files import MAX_FILE, MAX_LINE, jsonl_values, open_pack, pack_value
from errkb.records._load import LoadResult, ReadPack, load_paths, load_refs
from errkb.records._refs import Body, Listed, RecordRef
from errkb.records._schema import (
    JSON_KEYS,
    SCHEMA_VERSION,
    SITE_TAG,
    SKEW_CHANGES,
    Record,
    SitePattern,
    Skew,
    Versions,
    release_key,
)
from errkb.records._validate import MAX_PATTERN, MAX_TEXT, SEVERITIES, record_from_dict

__all__ = [
    "JSON_KEYS",
    "MAX_FILE",
    "MAX_LINE",
    "MAX_PATTERN",
    "MAX_TEXT",
    "SCHEMA_VERSION",
    "SEVERITIES",
    "SITE_TAG",
    "SKEW_CHANGES",
    "Body",
    "Listed",
    "LoadResult",
    "ReadPack",
    "Record",
    "RecordRef",
    "SitePattern",
    "Skew",
    "Versions",
    "jsonl_values",
    "load_paths",
    "load_refs",
    "open_pack",
    "pack_value",
    "record_from_dict",
    "release_key",
]
