"""Large .jsonl packs: bodies read on demand, and the build cache."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import gear_records, write_pack
from hypothesis import given, settings
from hypothesis import strategies as st

import errkb._index
import errkb._patterns
import errkb.packs
import errkb.records
from errkb.exceptions import RegistryError
from errkb.records import RecordRef, load_paths
from errkb.registry import Registry


def _load(*paths):
    return Registry.from_paths(paths, builtin=False, env=False, entry_points=False)


_FIELDS = ("id", "slug", "title", "severity", "repo", "message_pattern", "error_class")
_FIELDS += ("file_path", "retired", "variant_of", "tags")


def _summary(registry):
    return [
        (*(getattr(r, name) for name in _FIELDS), r.literal_sets(), r.source) for r in registry.refs
    ]


BAD_LINES = ("{not json", json.dumps({"id": "no-pattern"}))


def test_pack_bodies_load_on_demand_and_equal_a_full_load(tmp_path, monkeypatch):
    monkeypatch.setenv("ERRKB_NO_CACHE", "1")
    pack = write_pack(tmp_path / "gears.jsonl", gear_records(30), BAD_LINES)
    registry = _load(pack)
    eager = load_paths([pack], validate=False)
    assert len(registry) == 30
    assert all(ref._record is None for ref in registry.refs)  # nothing read whole yet
    assert [p.line for p in registry.problems] == [p.line for p in eager.problems]
    assert registry.get("acme-gear-7") == eager.records[7]
    assert registry.get("gear-7").solutions == ("Tighten gear 7.", "Check the belt.")
    assert registry.refs[7]._record is not None
    assert registry.refs[8]._record is None
    assert list(registry.records) == list(eager.records)
    assert registry.records[2:4] == eager.records[2:4]
    assert [r.id for r in registry.with_tag("G1")] == [f"acme-gear-{i}" for i in range(1, 30, 3)]
    [match] = registry.matcher.match("gear12x slipped at 900 rpm", "RuntimeError")
    assert (match.record, match.captures) == (eager.records[12], {"rpm": 900})
    assert match.record.source == f"{pack}:13"


def test_the_cache_gives_what_a_fresh_read_gives(tmp_path, pack_cache, monkeypatch):
    pack = write_pack(tmp_path / "gears.jsonl", gear_records(40), BAD_LINES)
    cold = _load(pack)
    [written] = (pack_cache / "packs").iterdir()
    # The warm load must come from the cache alone: reading the pack's records would fail.
    monkeypatch.setattr(errkb.packs, "_read", lambda *a: pytest.fail("pack read again"))
    warm = _load(pack)
    assert _summary(warm) == _summary(cold)
    assert [p.line for p in warm.problems] == [p.line for p in cold.problems]
    assert {p.source for p in warm.problems} == {f"{pack}:41", f"{pack}:42"}
    for i in (0, 17, 39):
        text = f"gear{i}x slipped at 5 rpm"
        assert [m.record for m in warm.matcher.match(text)] == [
            m.record for m in cold.matcher.match(text)
        ]
        assert warm.get(f"acme-gear-{i}") == cold.get(f"acme-gear-{i}")
    assert written.stat().st_size > 0


def test_a_changed_pack_is_read_again(tmp_path, pack_cache):
    pack = write_pack(tmp_path / "gears.jsonl", gear_records(5))
    assert len(_load(pack)) == 5
    write_pack(pack, gear_records(6))
    assert len(_load(pack)) == 6
    # Same size and content, newer mtime: still read again (and still right).
    st = pack.stat()
    os.utime(pack, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    assert [r.id for r in _load(pack).refs] == [f"acme-gear-{i}" for i in range(6)]


def test_a_change_to_errkb_code_reads_the_pack_again(tmp_path, pack_cache, monkeypatch):
    """A cache written by other code (another code stamp) is stale: the pack is read again."""
    pack = write_pack(tmp_path / "gears.jsonl", gear_records(5))
    expected = _summary(_load(pack))
    monkeypatch.setattr(errkb.packs, "_code_stamp", lambda: "other code")
    read = []
    real_read = errkb.packs._read
    monkeypatch.setattr(errkb.packs, "_read", lambda *a: read.append(1) or real_read(*a))
    assert expected == _summary(_load(pack))
    assert [1] == read


def test_the_code_stamp_covers_every_file_of_the_records_package():
    """The stamp hashes every .py file of errkb/records/ and the modules packs build on, and
    _scanplan's, whose reading of each pattern the records index holds; sorted."""
    import errkb._scanplan

    files = errkb.packs._code_files()
    modules = (errkb._patterns, errkb._index, errkb.packs, errkb._scanplan)
    expected = {*Path(errkb.records.__file__).parent.rglob("*.py")}
    expected |= {Path(m.__file__) for m in modules}
    assert expected == set(files)
    assert sorted(files) == files


def test_a_change_to_any_code_file_changes_the_stamp(monkeypatch):
    """One byte more in any file of the stamp gives another stamp (so every cache is stale)."""
    stamp = errkb.packs._code_stamp.__wrapped__
    before = stamp()
    read_bytes = Path.read_bytes
    for changed in errkb.packs._code_files():

        def edited(path, changed=changed):
            return read_bytes(path) + (b"#" if path == changed else b"")

        monkeypatch.setattr(Path, "read_bytes", edited)
        assert before != stamp(), changed
    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    assert before == stamp()


def test_a_damaged_cache_is_ignored_and_rewritten(tmp_path, pack_cache):
    pack = write_pack(tmp_path / "gears.jsonl", gear_records(5))
    expected = _summary(_load(pack))
    [written] = (pack_cache / "packs").iterdir()
    for damage in ("", "{}", "[1, 2]\n[]\n[3]\n", written.read_text()[:-40]):
        written.write_text(damage)
        assert _summary(_load(pack)) == expected
        assert written.read_text().count("\n") == 7  # header, problems, five records


def test_a_record_whose_pack_changed_since_loading_says_so(tmp_path, pack_cache):
    pack = write_pack(tmp_path / "gears.jsonl", gear_records(5))
    registry = _load(pack)
    write_pack(pack, gear_records(5)[2:])
    with pytest.raises(RegistryError, match=r"gears.jsonl:1: record 'acme-gear-0' is no longer"):
        registry.get("acme-gear-0")


def test_no_cache_when_turned_off_or_unwritable(tmp_path, pack_cache, monkeypatch):
    pack = write_pack(tmp_path / "gears.jsonl", gear_records(5))
    monkeypatch.setenv("ERRKB_NO_CACHE", "1")
    assert len(_load(pack)) == 5
    assert not pack_cache.exists()
    monkeypatch.delenv("ERRKB_NO_CACHE")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("ERRKB_CACHE_DIR", str(blocker))
    assert len(_load(pack)) == 5


def test_small_packs_are_not_cached(tmp_path, pack_cache, monkeypatch):
    monkeypatch.setattr(errkb.packs, "MIN_CACHED", 1 << 20)
    _load(write_pack(tmp_path / "gears.jsonl", gear_records(5)))
    assert not pack_cache.exists()


def test_ids_taken_across_packs_are_reported_cold_and_warm(tmp_path, pack_cache):
    first = write_pack(tmp_path / "a.jsonl", gear_records(3))
    second = write_pack(tmp_path / "b.jsonl", gear_records(4)[2:])
    for _ in range(2):
        registry = _load(first, second)
        assert [r.id for r in registry.refs] == [f"acme-gear-{i}" for i in range(4)]
        taken = f"duplicate id, already defined in {first}:3"
        assert [p.line for p in registry.problems] == [
            f'{second}:1: record "acme-gear-2": field "id": {taken}'
        ]


def test_a_shipped_index_is_used_wherever_the_pack_is_installed(tmp_path, monkeypatch):
    """The index beside a pack gives what a fresh read gives, with no cache and a new path."""
    monkeypatch.setenv("ERRKB_NO_CACHE", "1")
    (tmp_path / "built").mkdir()
    built = write_pack(tmp_path / "built" / "gears.jsonl", gear_records(40), BAD_LINES)
    cold = _load(built)  # read, not indexed: the reference
    errkb.packs.write_index(built)
    installed = tmp_path / "site" / "gears.jsonl"
    installed.parent.mkdir()
    for name in ("gears.jsonl", "gears.jsonl" + errkb.packs.INDEX_SUFFIX):
        installed.with_name(name).write_bytes(built.with_name(name).read_bytes())
    monkeypatch.setattr(errkb.packs, "_read", lambda *a: pytest.fail("pack read again"))
    warm = _load(installed)
    assert [s[:-1] for s in _summary(warm)] == [s[:-1] for s in _summary(cold)]
    assert [p.line.replace("/site/", "/built/") for p in warm.problems] == [
        p.line for p in cold.problems
    ]
    assert warm.get("acme-gear-17").source == f"{installed}:18"
    assert ["acme-gear-17"] == [m.record.id for m in warm.matcher.match("gear17x slipped at 5 rpm")]


def test_a_shipped_index_of_other_content_or_code_is_not_used(tmp_path, monkeypatch):
    """A pack changed after its index was written, or newer errkb code: the pack is read."""
    monkeypatch.setenv("ERRKB_NO_CACHE", "1")
    pack = write_pack(tmp_path / "gears.jsonl", gear_records(5))
    errkb.packs.write_index(pack)
    write_pack(pack, gear_records(6))
    assert 6 == len(_load(pack))
    errkb.packs.write_index(pack)
    monkeypatch.setattr(errkb.packs, "_code_stamp", lambda: "other code")
    read = []
    real_read = errkb.packs._read
    monkeypatch.setattr(errkb.packs, "_read", lambda *a: read.append(1) or real_read(*a))
    assert 6 == len(_load(pack))
    assert [1] == read


def test_a_passed_index_check_is_kept_by_the_files_stats(tmp_path, monkeypatch):
    """An index found current is not checked again while it, its packs and the code keep
    their sizes, times and inodes; a pack rewritten to the same size is checked again (and
    the index passed over); files changed in the last two seconds are never taken on trust."""
    import sys
    import time

    monkeypatch.setenv("ERRKB_NO_CACHE", "1")
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    monkeypatch.setattr(errkb.packs, "_checked_path", lambda: tmp_path / "checks.json")
    monkeypatch.setattr(errkb.packs, "_checked_marks", None)
    pack = write_pack(tmp_path / "gears.jsonl", gear_records(5))
    index = errkb.packs.write_index(pack)
    checks = []
    real = errkb.packs._index_header
    monkeypatch.setattr(errkb.packs, "_index_header", lambda *a: checks.append(1) or real(*a))

    def settle(*paths: Path, seconds: int = 10) -> None:
        past = time.time_ns() - seconds * 10**9
        for path in paths:
            os.utime(path, ns=(past, past))

    def matched(registry) -> list[str]:
        return [m.record.id for m in registry.matcher.match("gear9x slipped at 5 rpm")]

    assert 5 == len(_load(pack))
    assert 5 == len(_load(pack))
    assert 2 == len(checks)  # just written: checked each time
    assert not (tmp_path / "checks.json").exists()
    settle(pack, index)
    assert 5 == len(_load(pack))
    assert 3 == len(checks)
    assert [] == matched(_load(pack))
    assert 3 == len(checks)  # taken on trust
    assert (tmp_path / "checks.json").exists()
    text = pack.read_text(encoding="utf-8")
    pack.write_text(text.replace("gear1x", "gear9x"), encoding="utf-8")
    assert pack.stat().st_size == len(text.encode())
    settle(pack, seconds=20)  # the same size, a time of its own
    assert ["acme-gear-1"] == matched(_load(pack))  # read again: the index no longer fits
    assert 4 == len(checks)


def test_a_pack_with_a_shipped_index_makes_refs_only_for_candidates(tmp_path, monkeypatch):
    """Loading reads the table only; a lookup makes the refs of its candidates, and finds
    exactly what the pack read whole finds (matches and ranking)."""
    monkeypatch.setenv("ERRKB_NO_CACHE", "1")
    pack = write_pack(tmp_path / "gears.jsonl", gear_records(300))
    whole = _load(pack)
    errkb.packs.write_index(pack)
    lazy = _load(pack)
    [loaded] = lazy._lazy
    assert 300 == len(lazy)
    assert 0 == len(loaded._made)
    messages = [f"gear{i}x slipped at {i} rpm" for i in (0, 7, 150, 299)]
    messages += ["nothing here", "gear12x slipped", "slipped at 5 rpm gear3x"]
    for text in messages:
        assert [(m.record.id, m.score) for m in lazy.matcher.match(text)] == [
            (m.record.id, m.score) for m in whole.matcher.match(text)
        ]
    assert 0 < len(loaded._made) < 20
    assert whole.get("acme-gear-250") == lazy.get("acme-gear-250")
    assert "acme-gear-251" in lazy


def test_a_folder_index_serves_its_packs_as_one(tmp_path, monkeypatch):
    """One index for every pack of a folder gives what reading them gives: the same refs,
    sources, problems, matches and listing; a pack it does not cover is read as usual, and a
    changed pack makes the folder read again."""
    monkeypatch.setenv("ERRKB_NO_CACHE", "1")
    folder = tmp_path / "packs"
    folder.mkdir()
    records = gear_records(120)
    for record in records[80:]:
        record["tags"] = ["mined"]
    first = write_pack(folder / "a.jsonl", records[:50], BAD_LINES)
    second = write_pack(folder / "b.jsonl", records[50:])
    cold = _load(folder)
    assert errkb.packs.write_folder_index(folder) == folder / errkb.packs.FOLDER_INDEX
    later = write_pack(folder / "c.jsonl", gear_records(130)[120:])  # written after the index
    read, real_read = [], errkb.packs._read
    monkeypatch.setattr(
        errkb.packs, "_read", lambda pack, *a: read.append(pack.path) or real_read(pack, *a)
    )
    warm = _load(folder)
    assert read == [later]  # only the pack the index does not cover
    [loaded] = warm._lazy
    assert 120 == len(loaded)
    assert [p.line for p in warm.problems] == [p.line for p in cold.problems]
    whole = _load(first, second, later)
    # A lazily loaded pack's refs come after those read at once (c.jsonl's here).
    assert sorted(_summary(warm)) == sorted(_summary(whole))
    assert warm.get("acme-gear-60").source == f"{second}:11"
    for text in (
        "gear7x slipped at 5 rpm",
        "gear99x slipped at 1 rpm",
        "gear125x slipped at 2 rpm",
    ):
        assert [(m.record.id, m.score) for m in warm.matcher.match(text)] == [
            (m.record.id, m.score) for m in whole.matcher.match(text)
        ]
    assert sorted(warm.listed()) == sorted(r.listed() for r in whole.refs)
    assert sorted(r.id for r in warm.listed(mined=False)) == sorted(
        r.id for r in whole.refs if "mined" not in r.tags
    )
    assert sorted(r.id for r in warm.listed(tag="G1", library="gears")) == sorted(
        f"acme-gear-{i}" for i in range(1, 130, 3) if not 80 <= i < 120
    )
    write_pack(second, records[50:60])
    assert 60 + 10 == len(_load(folder))  # b.jsonl changed: the index is not used


def test_compiled_patterns_load_only_regex_own_compile(tmp_path):
    """A file of compiled patterns loads through regex's own compile alone: any other code
    named in it, another regex release or a damaged file gives None (compiled as usual)."""
    import pickle

    import regex

    from errkb._patterns import read_compiled, write_compiled

    good = tmp_path / "good.compiled"
    assert write_compiled(good, [r"CUDA out of (?P<what>\w+)", "(unclosed"]) == 1
    loaded = read_compiled(good, [r"CUDA out of (?P<what>\w+)", "(unclosed", "not written"])
    assert loaded is not None
    assert [r"CUDA out of (?P<what>\w+)"] == list(loaded)
    assert loaded[r"CUDA out of (?P<what>\w+)"].search("CUDA out of memory")["what"] == "memory"

    header = good.read_bytes().split(b"\n", 1)[0]
    hostile = tmp_path / "hostile.compiled"
    hostile.write_bytes(header + b"\n" + pickle.dumps([print]))
    assert read_compiled(hostile, ["x"]) is None

    foreign = tmp_path / "foreign.compiled"
    foreign.write_bytes(
        header.replace(regex.__version__.encode(), b"0.0")
        + b"\n"
        + good.read_bytes().split(b"\n", 1)[1]
    )
    assert read_compiled(foreign, ["x"]) is None

    cut = tmp_path / "cut.compiled"
    cut.write_bytes(good.read_bytes()[:-20])
    assert read_compiled(cut, ["x"]) is None
    assert read_compiled(tmp_path / "missing.compiled", ["x"]) is None


def test_a_hand_written_ref_is_made_from_its_json_and_its_record_read_when_needed():
    """The records index makes a ref without building the record; load() gives the same record."""
    from errkb.registry import builtin_records_dir, default_registry

    written = default_registry().hand_written().refs
    ref = next(r for r in written if r.id == "vllm-kv-cache-max-seq-len")
    built = load_paths([Path(ref.source)], validate=False).records[0]
    expected = RecordRef.of(built)
    for name in ("id", "slug", "title", "severity", "repo", "message_pattern", "error_class",
                 "file_path", "retired", "variant_of", "tags", "error_classes"):  # fmt: skip
        assert getattr(expected, name) == getattr(ref, name), name
    assert built.documentation == ref.load().documentation
    assert ref.literal_sets() == expected.literal_sets()
    assert str(builtin_records_dir()) in ref.source


def test_a_hand_written_record_is_built_from_the_json_its_ref_was_made_from(monkeypatch):
    """The line is not read and parsed again when the record is loaded, and it is built once."""
    from errkb.registry import builtin_records_dir

    path = builtin_records_dir() / "vllm" / "kv-cache-max-seq-len.json"
    expected = load_paths([path], validate=False).records[0]

    def no_reading(path):
        raise AssertionError(f"{path} read again")

    monkeypatch.setattr(errkb.packs, "open_pack", no_reading)
    registry = Registry.from_paths(env=False, entry_points=False)
    assert registry.get(expected.id) == expected
    assert registry.get(expected.id) is registry.get(expected.id)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts /proc/self/fd")
def test_reading_every_hand_written_record_leaves_no_file_open():
    """A record file of its own is read, not mapped: a map would hold a descriptor for each."""
    from errkb.registry import Registry

    registry = Registry.from_paths(env=False, entry_points=False).hand_written()
    before = len(list(Path("/proc/self/fd").iterdir()))
    assert len(registry.refs) > 200
    assert [r.id for r in registry.refs] == [r.load().id for r in registry.refs]
    assert len(list(Path("/proc/self/fd").iterdir())) - before < 3


# Patterns that share words, so that a message's words meet many rows at the first level and
# the second level (each row's own key, in a column of the index) decides.
_SHARED = (
    r"cache blocks (?P<n>\d+) too few for max seq len",
    r"max seq len (?P<n>\d+) is larger than the KV cache",
    r"KV cache is full: (?:evict|preempt) a sequence",
    r"too few cache blocks",
    r"seq len is larger than max_model_len",
    r"preempt(?:ed|ing) sequence \d+ for lack of cache",
    r"cache",
)
_MESSAGE_WORDS = ["cache", "blocks", "12", "too", "few", "for", "max", "seq", "len", "is"]
_MESSAGE_WORDS += ["larger", "than", "the", "KV", "full:", "evict", "preempt", "preempted", "a"]
_MESSAGE_WORDS += ["sequence", "max_model_len", "lack", "of"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.lists(st.sampled_from(_MESSAGE_WORDS), max_size=14).map(" ".join),
        min_size=3,
        max_size=6,
    )
)
def test_a_shipped_index_gives_the_records_whose_literals_a_message_holds(tmp_path_factory, texts):
    """A lazily loaded pack's candidates, through both levels of its index file, are exactly
    the records whose required literals the message holds, checked one by one: for the
    first message (its keys found by bisecting the index's sorted keys) and the later ones
    (the index's keys as sets). What a record requires is what its pattern's head requires,
    where it has one (a message cut after the head is still found: RecordRef.literal_sets);
    ``preempt(?:ed|ing) sequence ...`` has one."""
    folder = tmp_path_factory.mktemp("shared")
    records = gear_records(len(_SHARED))
    for record, pattern in zip(records, _SHARED, strict=True):
        record["messagePattern"] = pattern
    pack = write_pack(folder / "shared.jsonl", records)
    errkb.packs.write_index(pack)
    [lazy] = _load(pack)._lazy
    heads = [errkb._patterns.head_pattern(pattern) or pattern for pattern in _SHARED]
    assert heads != list(_SHARED)  # a head and whole patterns, both compared
    needs = [errkb._index.requirements(errkb._patterns.literal_sets(head)) for head in heads]
    for text in texts:
        holds = errkb._index.literal_test(text)
        expected = [
            record["id"]
            for record, (singles, alternatives) in zip(records, needs, strict=True)
            if all(map(holds, singles)) and all(any(map(holds, a)) for a in alternatives)
        ]
        assert expected == [ref.id for ref in lazy.candidates(text)]


def test_an_index_above_the_folder_given_is_not_used_and_one_at_it_is(tmp_path, monkeypatch):
    """The records index of recs/ serves recs/ given (or a link to it), never recs/lib/ given
    alone: an index above a folder would bring in records not asked for. Either way the
    records are the same; only how they are read differs."""
    monkeypatch.setenv("ERRKB_NO_CACHE", "1")
    recs = tmp_path / "recs"
    for name in ("lib", "other"):
        (recs / name).mkdir(parents=True)
    for i, record in enumerate(gear_records(6)):
        folder = recs / ("lib" if i < 4 else "other")
        (folder / f"{record['id']}.json").write_text(json.dumps(record))
    errkb.packs.write_records_index(recs)
    (tmp_path / "link").symlink_to(recs, target_is_directory=True)

    def load(path: Path) -> Registry:
        return Registry.from_paths([path], builtin=False, env=False, entry_points=False)

    given_top, through_link, given_lib = load(recs), load(tmp_path / "link"), load(recs / "lib")
    assert len(given_top._lazy) == len(through_link._lazy) == 1
    assert not given_lib._lazy  # recs/packs.index lies above recs/lib: read file by file
    assert sorted(r.id for r in given_top.refs) == [f"acme-gear-{i}" for i in range(6)]
    assert sorted(r.id for r in through_link.refs) == [f"acme-gear-{i}" for i in range(6)]
    assert sorted(r.id for r in given_lib.refs) == [f"acme-gear-{i}" for i in range(4)]


@given(st.lists(st.text(max_size=40), max_size=30))
def test_an_index_text_is_read_back_alone(texts):
    """An index keeps one text a row in its binary tail (each hand-written pattern's readings);
    each is read back by itself, whatever the others hold."""
    from errkb.packs import _Numbers, _Texts

    numbers = _Numbers()
    (at, length), starts = numbers.texts(texts)
    data = b"head" + numbers.data()
    read = _Texts(data, 4 + at, length, errkb.packs._ints(data[4:], *starts))
    assert texts == [read[row].decode("utf-8") for row in range(len(read))]


@pytest.mark.parametrize(
    ("starts", "length"), [([], 0), ([0, 5, 3, 9], 9), ([0, 4], 9), ([0, 4], 3)]
)
def test_index_texts_that_do_not_agree_are_refused(starts, length):
    """Starts that go back, or end elsewhere than the texts do: the index is not this code's,
    and is passed over (its readings are then read from each pattern)."""
    from errkb.packs import _Texts

    with pytest.raises(ValueError, match="index's texts"):
        _Texts(b"0123456789", 0, length, starts)


def test_a_file_where_two_patterns_share_a_name_is_not_written(tmp_path, monkeypatch):
    """Patterns are named by a 64-bit digest: two that met on one would give one the other's
    code, so the writer refuses (the odds are about 1 in 10^12 for a shipped file)."""
    from errkb import _patterns

    monkeypatch.setattr(_patterns, "_key", lambda pattern: b"samename")
    with pytest.raises(ValueError, match="same digest"):
        _patterns.write_compiled(tmp_path / "two.compiled", ["first (\\d+)", "second (\\d+)"])
    assert not (tmp_path / "two.compiled").exists()


def test_an_index_gives_each_record_its_line_number_past_lines_that_are_not_records(
    tmp_path, monkeypatch
):
    """The index keeps line numbers as runs of rows; a bad or blank line between records
    breaks a run, and every record still names its own line."""
    monkeypatch.setenv("ERRKB_NO_CACHE", "1")
    folder = tmp_path / "packs"
    folder.mkdir()
    records = [json.dumps(r) for r in gear_records(40)]
    lines = [*records[:5], BAD_LINES[0], "", *records[5:20], BAD_LINES[1], *records[20:30]]
    (folder / "a.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    write_pack(folder / "b.jsonl", gear_records(40)[30:])
    whole = _load(folder)
    errkb.packs.write_folder_index(folder)
    warm = _load(folder)
    assert warm._lazy
    assert sorted(_summary(warm)) == sorted(_summary(whole))
    assert warm.get("acme-gear-5").source == f"{folder / 'a.jsonl'}:8"
    assert warm.get("acme-gear-30").source == f"{folder / 'b.jsonl'}:1"


def test_line_numbers_are_kept_as_runs():
    assert ([0], [1]) == errkb.packs._number_runs([1, 2, 3, 4])
    assert ([0, 2, 4], [1, 5, 1]) == errkb.packs._number_runs([1, 2, 5, 6, 1])
    assert ([0, 1, 2], [0, 0, 0]) == errkb.packs._number_runs([0, 0, 0])  # files of their own
