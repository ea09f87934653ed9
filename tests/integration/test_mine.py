"""`errkb mine` on packages written by the test: each real message finds its record.

The package below is written to a folder, an sdist and a wheel, mined, then imported and run:
every function raises (or warns, or logs) its real message, and errkb, given only the mined
pack, must name the record at the line the source marks with ``# S:<key>``.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import sys
import tarfile
import warnings
import zipfile
from pathlib import Path

import pytest

import errkb
from errkb.mine import mine, write_pack
from errkb.registry import Registry
from tests.helpers import run_cli

ERRORS = '''
class EngineError(RuntimeError):
    """Raised by the engine."""
'''

# Every form the Python reader understands, one function each; `S:` marks the line that a
# record must name.
ENGINE = """
import logging
import warnings

from minepkg.errors import EngineError

logger = logging.getLogger(__name__)


def _message(blocks, tokens):
    return f"the block size {blocks} does not divide the cache of {tokens} tokens evenly"


class ConfigError(ValueError):
    def __init__(self, name):
        super().__init__(f"the configuration option {name!r} is not known to this engine")  # S:super


def literal():
    raise ValueError("the scheduler queue was closed before the request arrived")  # S:literal


def fstring(fraction, workers):
    if fraction > 0.5:
        if workers > 0:
            raise ValueError(  # S:fstring
                f"the memory fraction {fraction:.2f} is larger than allowed for "
                f"{workers:,} workers of the pool"
            )


def percent(n, name):
    raise RuntimeError("cannot start the engine: %d workers of pool %s are busy" % (n, name))  # S:percent


def dotformat(name, size):
    raise EngineError(  # S:format
        "engine {} failed to reserve {size:d} bytes of device memory".format(name, size=size)
    )


def concat(kind):
    raise TypeError("the tokenizer of kind " + kind + " cannot decode byte sequences")  # S:concat


def assigned(path):
    msg = f"no weights were found in {path}; expected safetensors or bin files"
    raise FileNotFoundError(msg)  # S:assigned


def built_later(step):
    error = EngineError(f"the engine stopped at step {step} because the watchdog fired")
    logger.info("stopping")
    raise error  # S:built


def helper(blocks, tokens):
    raise ValueError(_message(blocks, tokens))  # S:helper


def subclass(name):
    raise ConfigError(name)


def asserted(width):
    assert width % 8 == 0, f"the tensor width {width} must be a multiple of eight lanes"  # S:assert


def warned(option):
    warnings.warn(f"the option {option} is deprecated and goes away next release", DeprecationWarning)  # S:warn


def logged(worker):
    logger.error("worker %s could not reach the scheduler after three retries", worker)  # S:log


def short():
    raise ValueError("bad value")


def imitation(obj, name):
    raise AttributeError(f"'{type(obj).__name__}' object has no attribute '{name}'")
"""

CHECKS = """
import torch


def checked(n):
    torch._check(n > 0, lambda: f"the number of speculative tokens must be positive, got {n}")  # S:check


def checked_value(n):
    torch._check_value(n < 100, lambda: f"the beam width {n} exceeds what the sampler supports")  # S:check_value
"""

# (key, call, kind): how to make each marked site emit its real message.
CALLS = [
    ("literal", "literal()", "raise"),
    ("fstring", "fstring(0.75, 1024)", "raise"),
    ("percent", "percent(3, 'gpu')", "raise"),
    ("format", "dotformat('e1', 4096)", "raise"),
    ("concat", "concat('bpe')", "raise"),
    ("assigned", "assigned('/models/x')", "raise"),
    ("built", "built_later(7)", "raise"),
    ("helper", "helper(16, 100)", "raise"),
    ("super", "subclass('max_len')", "raise"),
    ("assert", "asserted(12)", "raise"),
    ("warn", "warned('--legacy')", "warn"),
    ("log", "logged('w3')", "log"),
    ("check", "checked(0)", "raise"),
    ("check_value", "checked_value(300)", "raise"),
]

PYPROJECT = """
[project]
name = "MinePkg"
version = "{version}"

[project.urls]
Source = "https://github.com/example-org/minepkg"
"""


def write_package(root: Path, version: str, engine: str = ENGINE) -> Path:
    """A source folder of minepkg at ``version``."""
    (root / "minepkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT.format(version=version))
    (root / "minepkg" / "__init__.py").write_text("")
    (root / "minepkg" / "errors.py").write_text(ERRORS)
    (root / "minepkg" / "engine.py").write_text(engine)
    (root / "minepkg" / "checks.py").write_text(CHECKS)
    return root


def marked_lines(source: str) -> dict[str, int]:
    """The line of each ``# S:key`` marker."""
    found = {}
    for n, line in enumerate(source.splitlines(), 1):
        if "# S:" in line:
            found[line.rpartition("# S:")[2].strip()] = n
    return found


def trigger(call: str) -> tuple[str, BaseException | None, str]:
    """Run ``minepkg`` code; returns (kind seen, the exception, the warning or log text)."""
    import importlib

    module = "checks" if call.startswith("checked") else "engine"
    namespace = {module: importlib.import_module(f"minepkg.{module}")}
    target = f"{module}.{call}"
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("minepkg.engine").addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            eval(target, namespace)
    except Exception as exc:
        return "raise", exc, ""
    finally:
        logging.getLogger("minepkg.engine").removeHandler(handler)
    if caught:
        w = caught[0]
        return "warn", None, f"{w.category.__name__}: {w.message}"
    if records:
        return "log", None, records[0].getMessage()
    return "none", None, ""


@pytest.fixture
def minepkg_importable(monkeypatch):
    """Make ``minepkg`` importable from a folder, and forget it afterwards."""

    def use(root: Path) -> None:
        monkeypatch.syspath_prepend(str(root))
        for name in [m for m in sys.modules if m == "minepkg" or m.startswith("minepkg.")]:
            del sys.modules[name]

    yield use
    for name in [m for m in sys.modules if m == "minepkg" or m.startswith("minepkg.")]:
        del sys.modules[name]


def registry_of(pack: Path) -> Registry:
    return Registry.from_paths([pack], builtin=False, env=False, entry_points=False)


def test_every_form_finds_its_record_at_the_right_line(tmp_path, minepkg_importable):
    """Each real message the package emits is matched to the record of its own file and line."""
    pytest.importorskip("torch")
    root = write_package(tmp_path / "src", "1.0.0")
    result = mine([str(root)])
    pack = tmp_path / "minepkg.jsonl"
    write_pack(result.records, pack, "jsonl")
    registry = registry_of(pack)
    lines = {
        "minepkg/engine.py": marked_lines(ENGINE),
        "minepkg/checks.py": marked_lines(CHECKS),
    }
    # Every record the pack holds is one of the sites run below: none is left untested.
    expected = {
        ("minepkg/checks.py" if key.startswith("check") else "minepkg/engine.py", line)
        for file_lines in lines.values()
        for key, line in file_lines.items()
    }
    assert expected == {(r["filePath"], r["lineNumber"]) for r in result.records}
    assert {key for key, _, _ in CALLS} == {k for f in lines.values() for k in f}
    minepkg_importable(root)
    for key, call, kind in CALLS:
        seen, exc, text = trigger(call)
        assert kind == seen, call
        if exc is not None:
            diagnosis = errkb.diagnose(exc, registry=registry)
        else:
            diagnosis = errkb.explain(text, registry=registry)
        assert diagnosis is not None, (key, str(exc) if exc else text)
        record = diagnosis.top.record
        file = "minepkg/checks.py" if key.startswith("check") else "minepkg/engine.py"
        assert (file, lines[file][key]) == (record.file_path, record.line_number), key
        assert "mined" in record.tags


def test_records_carry_class_function_condition_and_link(tmp_path):
    """The record of a guarded f-string raise has its class, function, condition and link."""
    root = write_package(tmp_path / "src", "1.0.0")
    records = {r["lineNumber"]: r for r in mine([str(root)]).records}
    line = marked_lines(ENGINE)["fstring"]
    record = records[line]
    assert "ValueError" == record["errorClass"]
    assert "minepkg.errors.EngineError" == records[marked_lines(ENGINE)["format"]]["errorClass"]
    assert "minepkg.engine.ConfigError" == records[marked_lines(ENGINE)["super"]]["errorClass"]
    assert "Raised by fstring when fraction > 0.5 and workers > 0." == record["documentation"]
    assert ("minepkg/engine.py", line) == (record["filePath"], record["lineNumber"])
    start, end = record["sourceCodeStart"], record["sourceCodeEnd"]
    assert (
        f"https://github.com/example-org/minepkg/blob/v1.0.0/minepkg/engine.py#L{start}-L{end}"
        == record["githubUrl"]
    )
    assert ENGINE.splitlines()[start - 1 : end] == record["sourceCode"].splitlines()
    assert (
        "the memory fraction {fraction} is larger than allowed for {workers} workers of the pool"
        == record["errorMessage"]
    )


def test_generic_templates_are_dropped_and_counted(tmp_path):
    """A builtin message's imitation and a short message make no record; the summary counts them."""
    root = write_package(tmp_path / "src", "1.0.0")
    result = mine([str(root)])
    messages = [r["errorMessage"] for r in result.records]
    assert [] == [m for m in messages if "object has no attribute" in m or m == "bad value"]
    assert 1 == result.summary["dropped"]["builtin-imitation"]
    assert 1 == result.summary["dropped"]["too-short"]


# --- two releases -----------------------------------------------------------------------

RELEASE_1 = """
def moved():
    raise ValueError("the cache engine has no free blocks left for this sequence")


def reworded(n):
    raise ValueError(f"the prompt has {n} tokens, more than the model accepts")


def removed():
    raise RuntimeError("the legacy block manager cannot swap sequences to the host")
"""

RELEASE_2 = """
import os


# The body moved down by a few lines in this release.
def moved():
    raise ValueError("the cache engine has no free blocks left for this sequence")


def reworded(n):
    raise ValueError(f"the prompt of {n} tokens is longer than the model's context window")


def added():
    raise RuntimeError("the speculative decoder needs a draft model to be configured")
"""


def release(root: Path, version: str, engine: str) -> Path:
    (root / "minepkg").mkdir(parents=True)
    (root / "pyproject.toml").write_text(PYPROJECT.format(version=version))
    (root / "minepkg" / "__init__.py").write_text("")
    (root / "minepkg" / "engine.py").write_text(engine)
    return root


def test_two_releases_give_version_ranges_and_sites(tmp_path, minepkg_importable):
    """A moved message keeps one record with both sites; reworded and removed ones end at 1.0."""
    old = release(tmp_path / "old", "1.0", RELEASE_1)
    new = release(tmp_path / "new", "2.0", RELEASE_2)
    # Given newest first: the order comes from the versions, not the command line.
    result = mine([str(new), str(old)])
    by_message = {r["errorMessage"]: r for r in result.records}
    moved = by_message["the cache engine has no free blocks left for this sequence"]
    assert {
        "distribution": "minepkg",
        "first": "1.0",
        "checked": "2.0",
        "sites": {"1.0": "minepkg/engine.py:3", "2.0": ":7"},
    } == moved["versions"]
    assert 7 == moved["lineNumber"]
    old_wording = by_message["the prompt has {n} tokens, more than the model accepts"]
    assert {"first": "1.0", "last": "1.0"} == {
        k: old_wording["versions"].get(k) for k in ("first", "last")
    }
    removed = by_message["the legacy block manager cannot swap sequences to the host"]
    assert ("1.0", {"1.0": "minepkg/engine.py:11"}) == (
        removed["versions"]["last"],
        removed["versions"]["sites"],
    )
    added = by_message["the speculative decoder needs a draft model to be configured"]
    assert ("2.0", None) == (added["versions"]["first"], added["versions"].get("last"))
    new_wording = by_message["the prompt of {n} tokens is longer than the model's context window"]
    pack = tmp_path / "p.jsonl"
    write_pack(result.records, pack, "jsonl")
    registry = registry_of(pack)
    # The real messages of each release find their own record.
    for root, call, want in (
        (old, "reworded(5000)", old_wording),
        (new, "reworded(5000)", new_wording),
        (old, "removed()", removed),
    ):
        minepkg_importable(root)
        _, exc, _ = trigger(call)
        assert exc is not None
        diagnosis = errkb.diagnose(exc, registry=registry)
        assert diagnosis is not None
        assert want["id"] == diagnosis.top.record.id


# --- archives ---------------------------------------------------------------------------


def build_wheel(root: Path, out: Path, version: str) -> Path:
    """A wheel of the folder: its package files and a .dist-info, zipped as pip would see it."""
    wheel = out / f"minepkg-{version}-py3-none-any.whl"
    meta = (
        f"Metadata-Version: 2.1\nName: MinePkg\nVersion: {version}\n"
        "Project-URL: Source, https://github.com/example-org/minepkg\n"
    )
    with zipfile.ZipFile(wheel, "w") as zf:
        for file in sorted((root / "minepkg").rglob("*.py")):
            zf.write(file, file.relative_to(root).as_posix())
        zf.writestr(f"minepkg-{version}.dist-info/METADATA", meta)
        zf.writestr(f"minepkg-{version}.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    return wheel


def build_sdist(root: Path, out: Path, version: str) -> Path:
    """An sdist of the folder: a tar.gz with a top folder and PKG-INFO."""
    sdist = out / f"minepkg-{version}.tar.gz"
    top = f"minepkg-{version}"
    with tarfile.open(sdist, "w:gz") as tf:
        tf.add(root, arcname=top)
        info = f"Metadata-Version: 2.1\nName: MinePkg\nVersion: {version}\n".encode()
        member = tarfile.TarInfo(f"{top}/PKG-INFO")
        member.size = len(info)
        tf.addfile(member, io.BytesIO(info))
    return sdist


def test_wheel_and_sdist_give_what_the_folder_gives(tmp_path):
    """Read as archives (never installed), a wheel and an sdist give the folder's records."""
    root = write_package(tmp_path / "src", "1.0.0")
    wheel = build_wheel(root, tmp_path, "1.0.0")
    sdist = build_sdist(root, tmp_path, "1.0.0")

    def sites(given: Path) -> list[tuple[str, str, int]]:
        return [(r["id"], r["filePath"], r["lineNumber"]) for r in mine([str(given)]).records]

    expected = sites(root)
    assert len(expected) >= len(CALLS)
    assert expected == sites(wheel)
    assert expected == sites(sdist)
    summary = mine([str(wheel)]).summary["sources"][0]
    assert ("minepkg", "1.0.0", "wheel") == (
        summary["distribution"],
        summary["version"],
        summary["archive"],
    )


def test_installed_distribution_is_read_from_its_files():
    """An installed distribution's name gives its version and its .py files."""
    from importlib.metadata import version

    from errkb.mine import open_source

    source = open_source("attrs")
    assert (version("attrs"), "installed") == (source.version, source.archive)
    assert any(path == "attr/exceptions.py" for path, _ in source.python_files())


# --- the command ------------------------------------------------------------------------


def test_cli_writes_a_gzip_pack_that_explains_a_message(tmp_path):
    """`errkb mine` in a child process writes a .jsonl.gz pack and its summary; it loads."""
    root = write_package(tmp_path / "src", "1.0.0")
    pack, summary = tmp_path / "out" / "minepkg.jsonl.gz", tmp_path / "summary.json"
    done = run_cli("mine", str(root), "--output", str(pack), "--summary", str(summary))
    assert 0 == done.returncode, done.stderr
    written = json.loads(summary.read_text())
    lines = gzip.decompress(pack.read_bytes()).decode().splitlines()
    assert written["records"] == len(lines)
    assert pack.stat().st_size == written["bytes"]
    assert f"{written['records']} records" in done.stdout.decode()
    message = "ValueError: the scheduler queue was closed before the request arrived"
    shown = run_cli("explain", "--records", str(pack), "--no-probes", "--json", message)
    assert 0 == shown.returncode, shown.stderr
    top = json.loads(shown.stdout)["matches"][0]
    assert ("minepkg/engine.py", marked_lines(ENGINE)["literal"]) == (
        top["upstream"]["file"],
        top["upstream"]["line"],
    )


def test_cli_exits_2_for_a_source_that_is_not_there(tmp_path):
    """A SOURCE that is no file, folder or installed distribution is a usage error."""
    done = run_cli("mine", str(tmp_path / "nothing-here"), "--output", str(tmp_path / "p.jsonl"))
    assert 2 == done.returncode
    assert b"no installed distribution of that name" in done.stderr
    assert not (tmp_path / "p.jsonl").exists()


def test_cli_help_names_the_sources():
    """The command is registered with the others."""
    done = run_cli("mine", "--help")
    assert 0 == done.returncode
    assert b"SOURCE" in done.stdout
