"""errkb.diagnosis: the orchestrator, and notes that belong to one diagnosis."""

from __future__ import annotations

import errkb
from errkb.options import Options
from errkb.testing import record_dict, registry_from_dicts

# A pattern that backtracks for ages on a long run of "a" that does not end the text.
EVIL = record_dict(id="evil", errorMessage="aaa", messagePattern=r"aaa(a|aa)+$")
PLAIN = record_dict(id="plain", errorMessage="gear slipped", messagePattern=r"gear slipped")


def test_a_pattern_timeout_is_noted_only_in_the_diagnosis_it_happened_in():
    """A later, unrelated diagnosis does not repeat an earlier one's timeout note."""
    registry = registry_from_dicts([EVIL, PLAIN])
    registry.matcher.timeout = 0.01
    first = errkb.explain(
        "gear slipped after " + "a" * 40 + "!", registry=registry, options=Options()
    )
    assert first is not None
    assert any("ran past their timeout" in n and "evil" in n for n in first.notes)
    second = errkb.explain("gear slipped", registry=registry, options=Options())
    assert second is not None
    assert not any("timeout" in n for n in second.notes)
    assert {"evil"} == registry.matcher.skipped.timed_out
