"""The literal index gives exactly what searching every record gives."""

from __future__ import annotations

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from errkb._index import AFFIX, LONG_AFFIX, literal_keys, plan_keys, words_of
from errkb._patterns import literal_sets, required_literals
from errkb.match import Matcher
from errkb.records import Record, RecordRef

WORDS = [
    "cache",
    "max",
    "seq",
    "len",
    "GiB",
    "a",
    "ab",
    "x1",
    "model's",
    "KV",
    "ñandú",
    # Long enough to key by eight characters, and to give a pattern a head cut after them.
    "QuantoQuantizedCacheProcessor",
    "Processor",
    "throughput_metrics",
]
SEPARATORS = [" ", ". ", "(", ")", ", ", "`", "-", "'", ":"]
PIECES = [
    r"\d+",
    r"(?P<n{i}>\d+)",
    r"\s+",
    r"\s?",
    r"\w*",
    r".",
    r"[ab]",
    r"[^)]*?",
    r"(?:cache|seq)",
    r"(?:GiB|GB)?",
    r"\x41",
    r"\u00f1",
    r"\(",
    r"\)",
    r"\.",
    r"\`",
    r"x?",
    r"y*",
    r"z{0,2}",
    r"k{2}",
    r"\bmax\b",
    r"\N{LATIN SMALL LETTER N WITH TILDE}",
    r"(?:a(?:b|c))+",
    r"(?:'Processor'|Processor\b)",
    r"(?P<q{i}>max|seq)",
    r"\b",
]


@st.composite
def patterns(draw):
    parts = []
    for i in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["word", "sep", "piece"]))
        if kind == "word":
            parts.append(draw(st.sampled_from(WORDS)))
        elif kind == "sep":
            parts.append(
                {"(": r"\(", ")": r"\)", ". ": r"\. "}.get(
                    sep := draw(st.sampled_from(SEPARATORS)), sep
                )
            )
        else:
            parts.append(draw(st.sampled_from(PIECES)).replace("{i}", str(i)))
    pattern = "".join(parts).strip() or "cache"
    if draw(st.booleans()) and draw(st.booleans()):
        pattern += "|" + draw(st.sampled_from(WORDS))
    return pattern


messages = st.lists(
    st.sampled_from([*WORDS, *SEPARATORS, "12", "3.5", "A", "ñ", "kk", "zz", "\n"]), max_size=25
).map("".join)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(st.lists(patterns(), min_size=1, max_size=25), st.lists(messages, min_size=1, max_size=8))
# Found by this test: the text ends inside \w*, while the head matches whole with a word going
# on after it; a cut head must end a word where the pattern goes on with a space.
@example(pats=[r"cache\w*QuantoQuantizedCacheProcessor cache"],
         texts=["cacheQuantoQuantizedCacheProcessorcache"])  # fmt: skip
def test_indexed_matching_equals_naive_matching(pats, texts):
    """For generated records and messages, the index never loses (or adds) a match."""
    # Built directly: the loader would refuse the loosest generated patterns, and the index
    # must be exact for every record it is given.
    records = [
        Record(schema_version=2, id=f"r{i}", slug=f"r{i}", error_message="m", message_pattern=p)
        for i, p in enumerate(pats)
    ]
    indexed, naive = Matcher(records), Matcher(records, indexed=False)
    # As a cached pack gives them: keys planned over half of the records, ahead of the rest.
    refs = [RecordRef.of(r) for r in records]
    half = refs[: len(refs) // 2]
    for ref, keys in zip(half, plan_keys([r.key_sets() for r in half]), strict=True):
        ref.keys = keys
    planned = Matcher(refs)
    for text in texts:
        expected = [(m.record.id, dict(m.captures), m.score) for m in naive.match(text)]
        assert expected == [(m.record.id, dict(m.captures), m.score) for m in indexed.match(text)]
        assert expected == [(m.record.id, dict(m.captures), m.score) for m in planned.match(text)]


def _reference_keys(literal):
    """literal_keys as first written, from each word's span (the fast one must agree)."""
    import re

    keys = []
    for m in re.finditer(r"\w+", literal):
        word, start, end = m.group(), m.start(), m.end()
        if start > 0 and end < len(literal):
            if len(word) >= 3:
                keys.append(("word", word))
        elif len(word) < AFFIX:
            continue
        elif start > 0:
            keys.append(("prefix", word[: LONG_AFFIX if len(word) >= LONG_AFFIX else AFFIX]))
        elif end < len(literal):
            keys.append(("suffix", word[-(LONG_AFFIX if len(word) >= LONG_AFFIX else AFFIX) :]))
    return tuple(keys)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from([*WORDS, *SEPARATORS, "_", "ab_c", "é", "٣٤", "x"]), max_size=8))
def test_literal_keys_follow_word_edges(parts):
    """A word inside a literal is a key; a word at its edge keys by its inner three characters
    (eight, for a long word)."""
    literal = "".join(parts)
    assert literal_keys(literal) == _reference_keys(literal)


@settings(max_examples=500, deadline=None)
@given(patterns(), messages)
def test_required_literals_are_in_every_match(pattern, text):
    """Whenever a pattern matches, each literal it is said to require is in the text."""
    import regex

    if regex.search(pattern, text):
        assert all(lit in text for lit in required_literals(pattern) or ())


def test_real_records_are_mostly_indexed():
    """The shipped records are nearly all reachable through the index, not the always-list."""
    from errkb.registry import Registry

    matcher = Registry.from_paths([], env=False, entry_points=False).matcher
    assert len(matcher._index.always) <= len(matcher._entries) // 10


@settings(max_examples=500, deadline=None)
@given(patterns(), messages)
def test_every_literal_set_has_a_member_in_every_match(pattern, text):
    """Whenever a pattern matches, each any-of set it is said to require has a member in the text."""
    import regex

    if regex.search(pattern, text):
        assert all(any(lit in text for lit in group) for group in literal_sets(pattern) or ())


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(), st.text(alphabet=st.characters(max_codepoint=127))))
def test_words_of_a_message_are_what_a_word_regex_finds(text):
    """The ASCII shortcut splits exactly where \\w+ does."""
    import re

    assert words_of(text) == re.findall(r"\w+", text)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab_1é ", max_size=40))
def test_a_messages_keys_are_its_words_keys_together(text):
    """A shipped pack looks a message up word by word (word_keys), an index built in the
    process by the whole message (message_keys): both name the same keys."""
    from errkb._index import message_keys, word_keys

    words = set(words_of(text))
    by_word = [set(), set(), set()]
    for word in words:
        for kind, keys in zip(by_word, word_keys(word), strict=True):
            kind.update(keys)
    assert tuple(by_word) == message_keys(text)
