"""The shipped mined packs (records/mined/): their bar, their index, and real errors.

Mined records are not held to the hand-written bar (tests/integration/test_knowledge_base.py):
their text is generated from the source. They must be valid, carry no upstream code, say which
releases raise them, load lazily from their shipped index, and name the real raise site of a
real error raised by the installed torch and transformers.
"""

from __future__ import annotations

import json
import sys
import traceback
from importlib import metadata
from pathlib import Path

import pytest

from errkb._patterns import COMPILED_FORMAT, loosen, patterns_crc, read_compiled
from errkb.diagnosis import diagnose
from errkb.options import Options
from errkb.packs import (
    COMPILED_FILE,
    FOLDER_INDEX,
    INDEX_SUFFIX,
    MINED_FOLDER,
    lazy_folder,
    records_patterns,
    twin_patterns,
)
from errkb.records import load_paths
from errkb.registry import builtin_records_dir, default_registry

MINED = builtin_records_dir() / "mined"
PACKS = sorted(MINED.glob("*.jsonl"))

pytestmark = pytest.mark.skipif(not PACKS, reason="no mined packs in this tree")


def test_the_packs_ship_one_current_index_and_listing():
    """The packs load lazily from the folder's one index; a stale one means `nox -s mine` (or
    its index step) was not run after a change to the code the index depends on."""
    assert (MINED / FOLDER_INDEX).is_file()
    problems: list = []
    loaded, covered = lazy_folder(MINED, lambda name: str(MINED / name), problems)
    assert loaded is not None, (
        f'{FOLDER_INDEX} is stale: rebuild it with python -c "from pathlib import Path; '
        f"from errkb.packs import write_folder_index; write_folder_index(Path('{MINED}'))\""
    )
    assert covered == {p.name for p in PACKS}
    assert [] == problems
    assert len(loaded) == sum(len(p.read_bytes().splitlines()) for p in PACKS)
    assert not list(MINED.glob("*.jsonl" + INDEX_SUFFIX)), "the folder index replaces per-pack ones"
    listed = loaded.listed()
    assert len(listed) == len(loaded)
    for row in (0, len(loaded) // 2, len(loaded) - 1):  # the listing says what the record says
        ref = loaded._entry(row)[0]
        assert listed[row] == ref.listed()


def test_a_first_lookup_bisects_the_index_keys_and_meets_the_rows_later_ones_meet():
    """A process's first lookup finds its message's keys by bisecting the index's sorted keys
    (no table of the 30,000 keys is built for a hook's one diagnosis); later ones use the
    whole tables, and what each word met is kept. All meet the same rows, for messages made of
    the mined records' own words, and for the message no record matches."""
    from errkb._index import words_of

    problems: list = []
    warm, _ = lazy_folder(MINED, str, problems)
    assert warm is not None
    step = max(1, len(warm) // 150)
    messages = []
    for row in range(0, len(warm), step):
        singles, alternatives = warm._check(row)
        messages.append(" ".join([*singles, *(a[0] for a in alternatives)]))
    messages.append("Avg prompt throughput: 0.0 tokens/s, Running: 1 reqs, Pending: 0 reqs")
    for message in messages[:2]:  # the whole tables from here on
        warm._met(set(words_of(message)))
    assert warm._tables is not None
    met = 0
    for message in messages:
        first, _ = lazy_folder(MINED, str, problems)
        assert first is not None
        words = set(words_of(message))
        rows = first._met(words)
        assert first._tables is None  # it bisected
        assert rows == warm._met(words) == warm._met(words), message  # read, then kept
        met += bool(rows)
    assert met >= len(messages) * 0.9  # the messages meet rows: the comparison says something


def test_mined_records_are_valid_carry_no_upstream_code_and_say_their_releases():
    """Every record checks (patterns compile), is tagged mined, has no source excerpt, and
    names its distribution; ids are unique across the packs."""
    result = load_paths(PACKS, validate=True)
    assert [] == [p.line for p in result.problems][:5]
    ids = [r.id for r in result.records]
    assert len(ids) == len(set(ids))
    bad = [
        r.id
        for r in result.records
        if "mined" not in r.tags
        or r.source_code is not None
        or r.versions is None
        or r.versions.distribution.replace("-", "_") != Path(r.source.split(":")[0]).stem
    ]
    assert [] == bad[:5]


def _site_of(exc: BaseException, package: str) -> str:
    """The raise site of ``exc`` inside ``package``: ``pkg/x.py:line`` as mined records say it."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if f"/{package}/" in f.filename]
    last = frames[-1]
    path = last.filename[last.filename.rindex(f"/{package}/") + 1 :]
    return f"{path}:{last.lineno}"


def _torch_interpolate():
    import torch

    torch.nn.functional.interpolate(torch.ones(1, 1, 4), scale_factor=2, mode="bilinear")


def _torch_dataloader():
    import torch

    torch.utils.data.DataLoader([1, 2], shuffle=True, sampler=[0, 1])


def _torch_lstm():
    import torch

    torch.nn.LSTM(4, 4, num_layers=0)


def _transformers_for_model():
    import transformers

    transformers.AutoConfig.for_model("no-such-model-type")


CASES = [
    ("torch", _torch_interpolate),
    ("torch", _torch_dataloader),
    ("torch", _torch_lstm),
    ("transformers", _transformers_for_model),
]


@pytest.mark.parametrize(("package", "trigger"), CASES, ids=lambda c: getattr(c, "__name__", c))
def test_a_real_error_finds_its_mined_raise_site(package, trigger):
    """The installed library raises; errkb's top finding is the mined record of that very
    site, at the installed release (the mined releases include the ones the tests install)."""
    installed = metadata.version(package)
    try:
        trigger()
    except Exception as exc:
        error = exc
    else:
        pytest.fail("no error raised")
    diagnosis = diagnose(error, options=Options(probes=False))
    assert diagnosis is not None, str(error)
    record = diagnosis.top.record
    assert "mined" in record.tags, record.id
    assert record.versions is not None
    assert _site_of(error, package) == record.versions.site_at(installed), record.versions


def test_the_default_registry_loads_the_packs_lazily():
    """A fresh process: every record counts, none is read at start (the hand-written and the
    mined load from their indexes), few are made for one diagnosis."""
    code = (
        "import errkb, json\n"
        "from errkb.registry import default_registry\n"
        "reg = default_registry()\n"
        "errkb.explain('ValueError: Unrecognized model identifier: nosuch. Should contain one of x')\n"
        "print(json.dumps([len(reg), len(reg._eager), sum(len(p._made) for p in reg._lazy)]))\n"
    )
    import subprocess

    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    total, eager, made = json.loads(out.stdout)
    mined = sum(len(p.read_bytes().splitlines()) for p in PACKS)
    assert 0 == eager
    assert total == len(list(builtin_records_dir().glob("*/*.json"))) + mined
    assert made < mined // 50  # a few hundred of tens of thousands
    assert len(default_registry()) == total


def test_the_package_in_the_traceback_picks_the_library_that_raised_a_shared_message():
    """torch's optimizers and bitsandbytes' LARS copy raise the same "Invalid momentum value";
    the record of the library whose package the traceback goes through ranks first (the
    record names the first of torch's files that raise it: a message raised from several files
    of one release is one record)."""
    import torch

    try:
        torch.optim.SGD([torch.ones(1, requires_grad=True)], lr=0.1, momentum=-1)
    except ValueError as exc:
        error = exc
    diagnosis = diagnose(error, options=Options(probes=False))
    assert diagnosis is not None
    ranked = [f.record.library for f in diagnosis.findings]
    assert "torch" == ranked[0]
    assert "bitsandbytes" in ranked


def test_the_hand_written_records_ship_a_current_index():
    """records/packs.index covers every hand-written record file; a stale one means
    `nox -s records` was not run after a record (or the code the index depends on) changed."""
    top = builtin_records_dir()
    files = sorted(top.glob("*/*.json"))
    problems: list = []
    loaded, covered = lazy_folder(top, lambda name: str(top / name), problems)
    assert loaded is not None, (
        'records/packs.index is stale: rebuild it with python -c "from pathlib import Path; '
        "from errkb.packs import write_records_index; write_records_index(Path('records'))\""
    )
    assert covered == {f.relative_to(top).as_posix() for f in files}
    assert [] == problems
    whole = load_paths(files, validate=False).records
    assert [r.id for r in loaded.refs()] == [r.id for r in whole]
    assert [r.load() for r in loaded.refs()] == list(whole)


def test_the_hand_written_records_ship_their_patterns_compiled():
    """records/patterns.compiled holds every hand-written pattern and head, and those of the
    mined twins their own messages reach, compiled, and a lookup takes them from it: written
    by the same rebuild as records/packs.index."""
    top = builtin_records_dir()
    records = load_paths(sorted(top.glob("*/*.json")), validate=False).records
    wanted = records_patterns(records) | twin_patterns(records, top / MINED_FOLDER)
    path = top / COMPILED_FILE
    header = json.loads(path.open("rb").readline())
    assert header["format"] == COMPILED_FORMAT
    assert header["crc"] == patterns_crc(wanted), (
        "records/patterns.compiled is stale: rebuild it with records/packs.index"
    )
    compiled = read_compiled(path, wanted)
    if compiled is None:  # another regex release wrote it: it is passed over, never misread
        pytest.skip(f"records/patterns.compiled was written by regex {header['regex']}")
    assert set(compiled) == wanted
    for pattern, loaded in compiled.items():
        assert loosen(pattern) == loaded.pattern
    seed = next(r for r in records if r.id == "vllm-kv-cache-max-seq-len")
    assert compiled[seed.message_pattern].search(seed.examples[0]) is not None
