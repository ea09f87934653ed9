"""The ranking's tiers: hand-written records above mined ones, folding, literal runs.

The rule is in errkb/match.py's docstring and docs/api.md ("The ranking rule").
"""

from __future__ import annotations

import pytest

from errkb.match import LITERAL_RUN, Matcher
from errkb.testing import record_dict, registry_from_dicts

MESSAGE = "The engine could not allocate the paged attention workspace for 4096 tokens"
PATTERN = r"The engine could not allocate the paged attention workspace for (?P<n>\d+) tokens"


def _matcher(*records):
    return Matcher(registry_from_dicts(records).records)


def _mined(**fields):
    base = {
        "tags": ["mined", "raise", "python"],
        "versions": {"distribution": "enginelib", "first": "1.0", "last": "1.4", "checked": "2.0"},
    }
    return record_dict(**{**base, **fields})


def test_a_hand_written_record_ranks_above_a_mined_one_whatever_the_scores():
    """Tier first: the mined record has the exact class and the raise site, and still ranks below."""
    m = _matcher(
        record_dict(id="written", repo="acme/otherlib", messagePattern="workspace for"),
        _mined(
            id="mined-x",
            repo="acme/enginelib",
            messagePattern=PATTERN,
            errorClass="RuntimeError",
            filePath="enginelib/alloc.py",
        ),
    )
    found = m.match(MESSAGE, RuntimeError, files=["/site/enginelib/alloc.py"])
    assert ["written", "mined-x"] == [x.record.id for x in found]
    assert found[1].score > found[0].score  # the score ranks within a tier only
    assert [False, True] == [x.mined for x in found]


@pytest.mark.parametrize(
    ("sites", "place"),
    [
        # The sites do not say where that line was read: no release.
        (None, "enginelib/alloc.py:41"),
        # The release its line was read in, not the message's range (1.0 to 1.4): another
        # file raised it in some of those releases.
        (
            {"1.0": "enginelib/alloc.py:12", "1.1": ":41", "1.3": "enginelib/pool.py:7"},
            "enginelib/alloc.py:41 (enginelib 1.1)",
        ),
    ],
)
def test_a_mined_record_of_the_same_library_folds_into_the_hand_written_one(sites, place):
    """Same library, same message: one finding, the mined raise site listed as "also raised at"."""
    versions = {"distribution": "enginelib", "first": "1.0", "last": "1.4", "sites": sites or {}}
    m = _matcher(
        record_dict(id="written", repo="acme/enginelib", messagePattern=PATTERN),
        _mined(
            id="mined-x",
            repo="acme/enginelib",
            messagePattern=PATTERN,
            filePath="enginelib/alloc.py",
            lineNumber=41,
            versions=versions,
        ),
    )
    [only] = m.match(MESSAGE)
    assert "written" == only.record.id
    assert (place,) == only.also


def test_a_sibling_message_sharing_a_literal_run_is_not_listed_as_raised_elsewhere():
    """A mined record matched on its literal run alone: not the message the written one matched."""
    sibling = _mined(
        id="mined-x",
        repo="acme/enginelib",
        messagePattern=r"The engine could not allocate the paged attention workspace (?P<n>\d+) times",
        filePath="enginelib/alloc.py",
        lineNumber=41,
    )
    [alone] = _matcher(sibling).match(MESSAGE)  # its run, the pattern does not match
    assert alone.record.id == "mined-x"
    assert alone.score < 40 - 1
    [only] = _matcher(
        record_dict(id="written", repo="acme/enginelib", messagePattern=PATTERN), sibling
    ).match(MESSAGE)
    assert "written" == only.record.id
    assert () == only.also


def test_class_evidence_outranks_the_raise_site():
    """Exact class without the site beats a base class with it (step 2 before step 3)."""
    m = _matcher(
        record_dict(id="site", messagePattern="workspace", errorClass="Exception", filePath="a.py"),
        record_dict(id="exact", messagePattern="workspace", errorClass="MemoryError"),
    )
    found = m.match(MESSAGE, MemoryError, files=["/x/a.py"])
    assert ["exact", "site"] == [x.record.id for x in found]


def test_a_mined_record_matches_a_reworded_paste_on_its_longest_literal_run():
    """The pattern fails (the number was replaced by a word) but its longest run is whole."""
    m = _matcher(_mined(id="mined-x", messagePattern=PATTERN))
    reworded = "The engine could not allocate the paged attention workspace for many tokens"
    [found] = m.match(reworded)
    assert "mined-x" == found.record.id
    assert {} == dict(found.captures)
    whole = m.match(MESSAGE)[0]
    assert whole.score - found.score > 1.5  # a literal run is weaker than the whole message


def test_a_hand_written_record_never_matches_on_a_literal_run_alone():
    """Hand-written records have counterexamples that share long runs: whole or cut only."""
    m = _matcher(record_dict(id="written", messagePattern=PATTERN))
    assert [] == m.match("The engine could not allocate the paged attention workspace for many")


def test_a_short_literal_run_is_not_enough():
    """A run shorter than LITERAL_RUN identifies nothing on its own."""
    short = "x" * (LITERAL_RUN - 2)  # the run is these and the space after them
    m = _matcher(_mined(id="mined-x", messagePattern=short + r" (?P<n>\d+) y"))
    assert [] == m.match(short + " many y")


def test_an_interpreter_record_ranks_below_a_fallback_and_a_raise_site_match() -> None:
    """Tier: a site-only match and a library fallback both come before the interpreter's record."""
    registry = registry_from_dicts(
        [
            record_dict(
                id="python-x",
                messagePattern=r"'(?P<t>\w+)' object has no attribute 'load'",
                errorClass="AttributeError",
                tags=["interpreter", "fallback"],
                solutions=["s"],
            ),
            record_dict(
                id="lib-fallback",
                messagePattern=r"'Chat' object has no attribute",
                errorClass="AttributeError",
                tags=["fallback"],
            ),
            record_dict(
                id="lib-site",
                messagePattern="never in the message",
                errorClass="AttributeError",
                sitePatterns=[{"file": "lib/chat.py", "function": "infer"}],
                tags=["site-pattern"],
            ),
        ]
    )
    found = Matcher(registry.records).match(
        "'Chat' object has no attribute 'load'",
        AttributeError,
        files=["/site-packages/lib/chat.py"],
        raised_at=("/site-packages/lib/chat.py", "infer"),
    )
    assert ["lib-fallback", "lib-site", "python-x"] == [m.record.id for m in found]
    assert [False, False, True] == [m.interpreter for m in found]
