"""errkb explain on text as people paste it, and on every example the knowledge base ships.

The pasted texts are tests/data/pasted: printed by the real tools (rich, IPython, pytest, vLLM's
log format, GitHub's quote reply, ...), each with the record errkb must find as its top match
(``manifest.json``). The records' own examples go through the same road: the parser, then the
matcher and the ranking.
"""

from __future__ import annotations

import json

import pytest
from helpers import DATA

import errkb
from errkb.options import Options
from errkb.parse import parse_text
from errkb.registry import default_registry

_PASTED = DATA / "pasted"
_MANIFEST = json.loads((_PASTED / "manifest.json").read_text(encoding="utf-8"))
_OPTIONS = Options(probes=False)


@pytest.mark.parametrize("entry", _MANIFEST, ids=[e["file"] for e in _MANIFEST])
def test_pasted_text_gives_its_record_as_top_match(entry):
    """Each pasted text, as a user would paste it, gives the manifest's record first."""
    with (_PASTED / entry["file"]).open(encoding="utf-8") as f:
        diagnosis = errkb.explain(f.read(), options=_OPTIONS)
    assert diagnosis is not None, entry["file"]
    assert entry["record"] == diagnosis.top.record.id


def _examples() -> list[tuple[str, str, str | None]]:
    return [
        (record.id, example, record.variant_of)
        for record in default_registry().hand_written().records
        for example in record.examples
    ]


def test_explain_finds_every_shipped_record_example_as_its_top_match():
    """explain finds every shipped record example as its top match (the records check runs the
    parser): the record itself, or the record it is a variant of when the example shows no
    traceback that could tell the copy apart."""
    wrong = []
    for record_id, example, variant_of in _examples():
        diagnosis = errkb.explain(example, options=_OPTIONS)
        top = diagnosis.top.record.id if diagnosis else None
        allowed = {record_id}
        if variant_of and not any(p.frames for p in parse_text(example)):
            allowed.add(variant_of)
        if top not in allowed:
            wrong.append((record_id, top, example[:80]))
    assert [] == wrong
