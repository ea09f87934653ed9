from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from errkb.match import ClassSpec, Matcher, typed
from errkb.testing import record_dict, registry_from_dicts


def _matcher(*records, **kw):
    return Matcher(registry_from_dicts(records).records, **kw)


def test_captures_are_typed_named_by_name_unnamed_by_position():
    """Numeric groups come back as int/float; named by name, unnamed by 1-based position."""
    m = _matcher(record_dict(messagePattern=r"len \((?P<n>\d+)\) > (\d+\.\d+) ([a-z]+)"))
    [match] = m.match("len (32768) > 12.5 gib")
    assert {"n": 32768, 2: 12.5, 3: "gib"} == dict(match.captures)


def test_search_semantics_find_the_pattern_inside_a_longer_message():
    """The pattern is searched, not full-matched."""
    m = _matcher(record_dict(messagePattern=r"cache blocks"))
    assert 1 == len(m.match("ERROR: No available memory for the cache blocks. Try again."))


def test_error_class_filters_by_mro():
    """A record for RuntimeError matches a subclass; a record for KeyError does not."""
    m = _matcher(
        record_dict(id="rt", messagePattern="boom", errorClass="RuntimeError"),
        record_dict(id="key", messagePattern="boom", errorClass="KeyError"),
        record_dict(id="any", messagePattern="boom"),
    )
    assert ["rt", "any"] == [x.record.id for x in m.match("boom", NotImplementedError)]
    assert ["any", "key", "rt"] == sorted(x.record.id for x in m.match("boom"))


def test_exact_class_ranks_over_base_class():
    """Same pattern: the record naming the exception's own class wins over its base class."""
    m = _matcher(
        record_dict(id="base", messagePattern="boom", errorClass="LookupError"),
        record_dict(id="exact", messagePattern="boom", errorClass="KeyError"),
    )
    assert ["exact", "base"] == [x.record.id for x in m.match("boom", KeyError)]


def test_qualified_class_names_match_public_aliases():
    """torch.cuda.OutOfMemoryError in a record matches a class defined as torch.OutOfMemoryError."""
    oom = type("OutOfMemoryError", (RuntimeError,), {"__module__": "torch"})
    m = _matcher(
        record_dict(
            id="oom", messagePattern="out of memory", errorClass="torch.cuda.OutOfMemoryError"
        )
    )
    assert ["oom"] == [x.record.id for x in m.match("CUDA out of memory", oom)]
    # A class errkb cannot resolve never hides the record; it only lowers the score.
    unknown = m.match("CUDA out of memory", "flax.OutOfMemoryError")
    assert ["oom"] == [x.record.id for x in unknown]
    assert unknown[0].score < m.match("CUDA out of memory", oom)[0].score


def test_unresolvable_class_name_ranks_builtin_and_same_package_records_first():
    """A class known only by name may derive from a builtin or a sibling of its package: those
    rank above a record of another package, which is still found (never hidden by a name)."""
    m = _matcher(
        record_dict(id="rt", messagePattern="boom", errorClass="RuntimeError"),
        record_dict(id="pkg", messagePattern="boom", errorClass="acme.BaseError"),
        record_dict(id="other", messagePattern="boom", errorClass="zzz.BaseError"),
        record_dict(id="own", messagePattern="boom", errorClass="acme.errors.SpecificError"),
    )
    assert ["own", "pkg", "rt", "other"] == [
        x.record.id for x in m.match("boom", "acme.errors.SpecificError")
    ]


def test_class_given_by_name_resolves_builtins():
    """'ValueError' as text is resolved to the builtin, so its bases count."""
    m = _matcher(record_dict(id="v", messagePattern="xyz", errorClass="Exception"))
    assert ["v"] == [x.record.id for x in m.match("xyz", "ValueError")]
    assert ClassSpec.of("ValueError").resolved


def test_raise_site_in_traceback_ranks_first():
    """A record whose filePath is among the traceback's files outranks an equal one."""
    m = _matcher(
        record_dict(id="a", messagePattern="boom", filePath="pkg/a.py"),
        record_dict(id="b", messagePattern="boom", filePath="pkg/b.py"),
    )
    assert ["b", "a"] == [x.record.id for x in m.match("boom", files=["/site-packages/pkg/b.py"])]
    assert ["a", "b"] == [x.record.id for x in m.match("boom")]


def test_more_specific_pattern_ranks_first():
    """With equal class and site, the pattern requiring more literal text wins."""
    m = _matcher(
        record_dict(id="loose", messagePattern=r"memory"),
        record_dict(id="tight", messagePattern=r"No available memory for the cache blocks"),
    )
    assert ["tight", "loose"] == [
        x.record.id for x in m.match("No available memory for the cache blocks")
    ]


def test_variant_ranks_below_original_unless_its_file_is_in_the_traceback():
    """A vendored copy (variantOf) loses to the original, except at its own raise site."""
    m = _matcher(
        record_dict(id="orig", messagePattern="boom", filePath="vllm/engine.py"),
        record_dict(id="copy", messagePattern="boom", filePath="chat/engine.py", variantOf="orig"),
    )
    assert ["orig", "copy"] == [x.record.id for x in m.match("boom")]
    assert ["copy", "orig"] == [x.record.id for x in m.match("boom", files=["x/chat/engine.py"])]


def test_retired_records_never_match():
    """A retired record stays loadable but is never a match."""
    m = _matcher(record_dict(id="old", messagePattern="boom", retired=True))
    assert [] == m.match("boom")


def test_pattern_that_times_out_is_skipped_and_reported():
    """A catastrophic pattern is given up after the timeout; the other records still match."""
    m = _matcher(
        record_dict(id="evil", messagePattern=r"aaa(a|aa)+$"),
        record_dict(id="fine", messagePattern=r"aaa"),
        timeout=0.01,
    )
    assert ["fine"] == [x.record.id for x in m.match("a" * 40 + "!")]
    assert {"evil"} == m.skipped.timed_out


@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_typed_parses_any_integer(n):
    """Integers of any size round-trip through typed()."""
    assert n == typed(str(n))


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_typed_parses_floats(x):
    """Float texts become floats equal to the original."""
    assert x == typed(repr(x))


@given(st.text())
def test_typed_never_raises(text):
    """Any text gives a value: a number or the text itself."""
    value = typed(text)
    assert isinstance(value, (int, float, str))
