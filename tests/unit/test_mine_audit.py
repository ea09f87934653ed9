"""The audit of the mined packs (errkb.mine._audit): its pieces, on texts and archives built here."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile
from typing import TYPE_CHECKING

import pytest
from packaging.requirements import Requirement

from errkb.mine import _audit
from errkb.mine._audit import (
    Feature,
    condition_verdict,
    failure_forms,
    has_feature,
    literal_pieces,
    native_literals,
    pieces_in_order,
    python_literals,
    resolve_pin,
    site_condition,
    split_template,
)

if TYPE_CHECKING:
    from pathlib import Path


# ---------------------------------------------------------------------------- templates


def test_holes_with_calls_and_conversions_are_one_hole_each() -> None:
    """Brace matching keeps `{device_type.upper()}`, `{x!r}` and `{d['}']}` whole."""
    message = "Got {device_type.upper()} and {x!r}, key {d['}']} done"
    assert ["Got ", " and ", ", key ", " done"] == split_template(message)


def test_nested_braces_and_unclosed_brace() -> None:
    """A hole holding a dict literal is one hole; a `{` that never closes is text."""
    assert ["a ", " b {c"] == split_template("a {f({1: 2})} b {c")


def test_literal_pieces_collapse_whitespace_and_drop_short_ones() -> None:
    """Pieces are whitespace-collapsed, stripped and kept from the minimum length on."""
    assert ["Expected a", ", got the value"] == literal_pieces(
        "Expected  a\n{x} to {y}, got the value", 3
    )


def test_pieces_must_come_in_order() -> None:
    """`pieces_in_order` fails when a later piece only occurs before an earlier one."""
    assert pieces_in_order(["ab", "cd"], "xx ab yy cd")
    assert not pieces_in_order(["cd", "ab"], "xx ab yy cd")


# ---------------------------------------------------------------------------- literals

PYTHON = """\
def f(x, device_type):
    msg = (
        "a message assigned "
        "above the raise"
    )
    if x:
        raise ValueError(
            f"Expected {device_type.upper()} to be "  # comment between
            f'{{literal}} braces and {x!r}\\n'
            "an implicit concatenation"
        )
    raise RuntimeError(msg)
"""


def test_python_literals_join_implicit_concatenation_and_fstrings() -> None:
    """f-strings give their text with holes apart, `{{` is a brace, adjacent parts join."""
    text = python_literals(PYTHON, 7)
    assert "to be {literal} braces and" in text
    assert pieces_in_order(
        literal_pieces("Expected {d} to be {{literal}} braces and {x!r}\nan implicit", 3), text
    )


def test_self_documenting_fstring_holes_print_their_text() -> None:
    """`f"{x=}"` prints `x=` before the value, so the literal text holds it."""
    text = python_literals('raise ValueError(f"Weight {size=} and {group = !r} differ")\n', 1)
    assert pieces_in_order(["Weight size=", "and group =", "differ"], text)
    assert "a " + "\x00" in python_literals('raise E(f"a {x == y} b")\n', 1)


def test_python_window_starts_two_lines_above() -> None:
    """The window of line 12 starts at line 10: the message assigned at line 3 is outside,
    and the enclosing function's start brings it in."""
    assert "a message assigned" not in python_literals(PYTHON, 12)
    wider = python_literals(PYTHON, 12, _audit.function_start(PYTHON, 12))
    assert "a message assigned above the raise" in wider


def test_a_message_a_helper_returns_is_looked_for_in_the_module() -> None:
    """`raise X(_summary(e))`: the literals lie in `_summary`, anywhere in the file."""
    text = 'def _summary(e):\n    return f"## Exception summary {e}"\n' + "\n" * 60
    text += "def f(e):\n    raise ValueError(_summary(e))\n"
    line = text.count("\n")
    assert _audit._calls_a_helper(text, line, line)
    assert not _audit._calls_a_helper(text, 2, 2)


def test_python_literals_survive_a_file_tokenize_refuses() -> None:
    """An unterminated triple quote after the window makes tokenize fail: the scanner reads it."""
    broken = 'x = 1\nraise ValueError("a plain message here")\ny = """never closed\n'
    assert "a plain message here" in python_literals(broken, 2)


CPP = r"""
void f(int n) {
  // "commented out message"
  TORCH_CHECK(n > 0 && n < 8, "Expected n in (0, 8), got ", n,
              ". \"Quoted\"\tand tabbed");
  char c = '"';
  auto s = "implicit " "concatenation";
}
"""


def test_native_literals_decode_escapes_and_skip_comments_and_chars() -> None:
    """C++ literals: escapes decoded, comments and a `'"'` char literal skipped."""
    text = native_literals(CPP, 4)
    assert "commented out" not in text
    assert "Expected n in (0, 8), got " in text
    assert '. "Quoted" and tabbed' in text
    assert "implicit concatenation" in text


def test_check_message_arguments_join_and_long_conditions_widen_the_window() -> None:
    """`TORCH_CHECK(c, "a ", "b")` says "a b"; a condition of 40 lines puts it further down."""
    lambda_lines = "      // the parameter's dtype\n" + "".join(
        f"      x{i} &&\n" for i in range(40)
    )
    text = f'TORCH_CHECK(\n{lambda_lines}      true,\n      "one ",\n      "message");\n'
    assert "one message" not in native_literals(text, 1)
    end = _audit.statement_end(text, 1, python=False)
    assert 45 == end
    assert "one message" in native_literals(text, 1, end=end)


def test_a_word_split_by_implicit_concatenation_is_still_found() -> None:
    """`"... set" "bnb_4bit ..."` reads `setbnb_4bit`, a word no line of the file holds."""
    release = _audit.Release({"pkg/m.py": ['warn("sharding of weights, set"\n  "bnb_4bit_x")\n']})
    assert release.has_message(["sharding of weights, setbnb_4bit_x"], native=False)


def test_rust_raw_strings_and_format_holes() -> None:
    """Rust: `r#"..."#` is read raw; `format!` holes stay as text between pieces."""
    rust = (
        'fn f() {\n  let e = r#"raw "quoted" text"#;\n  bail!("bad value {} for {name}", x);\n}\n'
    )
    text = native_literals(rust, 2, rust=True)
    assert 'raw "quoted" text' in text
    assert pieces_in_order(literal_pieces("bad value {} for {name}", 3), text)


# ---------------------------------------------------------------------------- pins


def test_pin_resolves_to_newest_matching_final_release() -> None:
    """`<X` picks the newest release below X, passing over pre-releases and yanked ones."""
    releases = ["1.0", "1.1", "1.2", "1.3rc1", "2.0"]
    assert "1.1" == resolve_pin(Requirement("pkg<2.0"), releases, yanked={"1.2"})
    assert "2.0" == resolve_pin(Requirement("pkg>=1.1"), releases)
    assert "1.2" == resolve_pin(Requirement("pkg<=1.2"), releases)


def test_pin_below_the_list_resolves_to_nothing() -> None:
    """A pin no listed release satisfies gives None (the audit counts it wrong)."""
    assert resolve_pin(Requirement("pkg<1.0"), ["1.0", "2.0"]) is None


def test_pins_are_read_from_solutions() -> None:
    """Every quoted `pip install` requirement is found."""
    pins = _audit.parse_pins(["Or: pip install 'pkg<2.0'.", "pip install 'pkg>=1.5' then"])
    assert ["pkg<2.0", "pkg>=1.5"] == [str(p) for p in pins]


# ---------------------------------------------------------------------------- presence

MODULE = """\
from .base import Base
try:
    from .fast import fast_path
except ImportError:
    fast_path = None

_import_structure = {"models": ["LazyModel"]}

for mode in ["fwd"]:
    lens = 1

def helper(a, b=1, *, c, d=None):
    pass

class Mid(Base):
    attr: int = 0

class Child(Mid):
    def method(self, x, *, k=2):
        pass
"""
BASE = "class Base:\n    def inherited(self):\n        pass\n"


def _files() -> dict[str, list[str]]:
    return {"pkg/__init__.py": [""], "pkg/mod.py": [MODULE], "pkg/base.py": [BASE]}


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("pkg.mod.helper", True),
        ("pkg.mod.fast_path", True),  # bound inside try/except
        ("pkg.mod.LazyModel", True),  # a quoted string of a lazy table
        ("pkg.mod.lens", True),  # assigned in a module-level loop
        ("pkg.mod.mode", True),  # the loop's own variable
        ("pkg.mod.gone", False),
        ("pkg.mod.Child.method", True),
        ("pkg.mod.Child.attr", True),  # from a base in the same file
        ("pkg.mod.Child.inherited", True),  # from a base imported from a sibling module
        ("pkg.mod.Child.gone", False),
        ("pkg.mod.Missing.method", False),
    ],
)
def test_presence_of_names_and_members(name: str, expected: bool) -> None:
    """Names at module level, quoted names, and members through same-package bases."""
    assert expected == has_feature(_files(), Feature(name=name))[0]


def test_all_alone_does_not_make_a_name_importable() -> None:
    """A quoted name counts in a lazy module only; `from .x import *` re-exports a name."""
    files = {
        "pkg/__init__.py": ["from .impl import *\n"],
        "pkg/impl.py": ["def shown(): pass\n"],
        "pkg/modular.py": ['__all__ = ["Gone"]\n'],
        "pkg/lazy.py": ['_import_structure = {"x": ["Lazy"]}\n'],
    }
    assert not has_feature(files, Feature(name="pkg.modular.Gone", level=True))[0]
    assert has_feature(files, Feature(name="pkg.lazy.Lazy", level=True))[0]
    assert has_feature(files, Feature(name="pkg.shown", level=True))[0]


def test_presence_of_keywords_and_required_parameters() -> None:
    """A keyword is present when the def takes it; `required` asks for no default."""
    files = _files()
    assert has_feature(files, Feature(name="pkg.mod.helper", keyword="d"))[0]
    assert not has_feature(files, Feature(name="pkg.mod.helper", keyword="z"))[0]
    assert has_feature(files, Feature(name="pkg.mod.helper", keyword="c", required=True))[0]
    assert not has_feature(files, Feature(name="pkg.mod.helper", keyword="b", required=True))[0]
    assert has_feature(files, Feature(name="pkg.mod.Child.method", keyword="k"))[0]


def test_presence_of_a_module_is_its_file() -> None:
    """`No module named` records: the module file, `pkg/x.py` or `pkg/x/__init__.py`."""
    assert has_feature(_files(), Feature(name="pkg.mod", module=True))[0]
    assert not has_feature(_files(), Feature(name="pkg.other", module=True))[0]


def test_lazy_package_names_come_from_the_modules_all() -> None:
    """A package built by `define_import_structure` has a name its modules' `__all__` lists."""
    files = {
        "tf/__init__.py": ["from .utils import define_import_structure\n"],
        "tf/models/bert/modeling_bert.py": ['__all__ = ["BertModel"]\n'],
    }
    assert has_feature(files, Feature(name="tf.BertModel", level=True))[0]
    assert not has_feature(files, Feature(name="tf.GoneModel", level=True))[0]


# ---------------------------------------------------------------------------- conditions


def test_failure_forms_invert_one_comparison() -> None:
    """`x < n` fails as `not (x < n)` or `x >= n`, whitespace removed."""
    assert "x>=n" in failure_forms("x < n", python=True)
    assert "not(x<n)" in failure_forms("x < n", python=True)


def test_no_inversion_for_joined_or_shifted_conditions() -> None:
    """Only a single top-level comparison is inverted; `<<` and `&&` are not comparisons."""
    assert 3 == len(failure_forms("a < b && c > d", python=False))
    assert ["not(a<<2==b)", "nota<<2==b", "!(a<<2==b)", "a<<2!=b"] == failure_forms(
        "a << 2 == b", python=False
    )


def test_check_documented_as_its_pass_condition_is_wrong() -> None:
    """A TORCH_CHECK's condition is what must hold: documenting it as the failure is wrong."""
    site = site_condition('  TORCH_CHECK(id < n, "out of scope!");\n', 1)
    assert ("check", "id < n") == site
    assert condition_verdict("Raised by f when id < n.", site, python=False)[0] is False
    assert condition_verdict("Raised by f when id >= n.", site, python=False)[0] is True
    assert condition_verdict("Raised by f when not (id < n).", site, python=False)[0] is True


def test_python_assert_and_torch_check() -> None:
    """`assert c, msg` and `torch._check(c, lambda: ...)` give `c`; `_check_with` its second."""
    assert ("check", "x is not None") == site_condition('assert x is not None, "need x"\n', 1)
    text = "torch._check(\n    a == b,\n    lambda: f'no {a}',\n)\n"
    assert ("check", "a == b") == site_condition(text, 1)
    assert ("check", "a") == site_condition("torch._check_with(ValueError, a, lambda: 'm')", 1)
    doc = "Raised through torch._check by f when a != b."
    assert condition_verdict(doc, ("check", "a == b"), python=True)[0] is True


def test_c10_messages_split_into_code_and_literals() -> None:
    """A check with no message: c10 writes `Expected <cond> to be true...` itself."""
    message = (
        "Expected x.is_contiguous() to be true, but got false.  (Could this error message be "
        "improved?  If so, please report an enhancement request to PyTorch.)"
    )
    assert ("x.is_contiguous()", "") == _audit.message_parts(message)
    assert ("", "plain {x}") == _audit.message_parts("plain {x}")


def test_macro_line_continuations_are_not_part_of_the_condition() -> None:
    """Inside a `#define`, `TORCH_CHECK(\\` continues on the next line."""
    text = "#define CHECK_CPU(x) TORCH_CHECK( \\\n      !x.is_cuda(), #x)\n"
    assert ("check", "!x.is_cuda()") == site_condition(text, 1)


def test_if_throw_condition_is_the_condition_itself() -> None:
    """For `if (c) { throw ...; }` the documentation must say `c`, not its negation."""
    text = 'if (n > 8) {\n  throw std::runtime_error("too many");\n}\n'
    site = site_condition(text, 2)
    assert ("if", "n > 8") == site
    assert condition_verdict("Raised by f when n > 8.", site, python=False)[0] is True
    assert condition_verdict("Raised by f when n <= 8.", site, python=False)[0] is False


def test_cut_documentation_is_not_checkable_when_it_cannot_tell() -> None:
    """A condition cut short (`....`) that matches no form is left unjudged."""
    site = ("check", "alpha > 0 and beta_value_long_name > 0")
    assert condition_verdict("Raised by f when gamma....", site, python=True)[0] is None


# ---------------------------------------------------------------------------- archives and a run


def _wheel(path: Path, files: dict[str, str]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)


def _sdist(path: Path, top: str, files: dict[str, str]) -> None:
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"{top}/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))


def test_sdist_paths_drop_the_top_folder_and_src(tmp_path: Path) -> None:
    """`pkg-1.0/src/pkg/x.py` is `pkg/x.py`, as records name it; a wheel keeps its paths."""
    _sdist(tmp_path / "pkg-1.0.tar.gz", "pkg-1.0", {"src/pkg/x.py": "a = 1\n", "csrc/k.cu": ""})
    assert {"pkg/x.py", "csrc/k.cu"} == set(
        _audit.read_archive(tmp_path / "pkg-1.0.tar.gz", (".py", ".cu"))
    )
    _wheel(tmp_path / "pkg-1.0-py3-none-any.whl", {"pkg/x.py": ""})
    assert ["pkg/x.py"] == list(
        _audit.read_archive(tmp_path / "pkg-1.0-py3-none-any.whl", (".py",))
    )


def test_two_crates_stay_two_files(tmp_path: Path) -> None:
    """`rust/a/src/error.rs` and `rust/b/src/error.rs` keep their crate paths, as the miner
    writes a native site's path, so a site names one of them."""
    files = {"rust/a/src/error.rs": "a", "rust/b/src/error.rs": "b"}
    _sdist(tmp_path / "pkg-1.0.tar.gz", "pkg-1.0", files)
    assert {"rust/a/src/error.rs": ["a"], "rust/b/src/error.rs": ["b"]} == _audit.read_archive(
        tmp_path / "pkg-1.0.tar.gz", (".rs",)
    )


def _pack(tmp_path: Path, releases: dict[str, dict[str, str]], records: list[dict]) -> None:
    """A pack `pkg` with its pins and cache: one wheel per release."""
    cache, packs = tmp_path / "cache", tmp_path / "packs"
    cache.mkdir()
    packs.mkdir()
    pins = []
    for version, files in releases.items():
        name = f"pkg-{version}-py3-none-any.whl"
        _wheel(cache / name, files)
        pins.append(f'[[distribution.file]]\nversion = "{version}"\nurl = "https://x/{name}"\n')
    (packs / "sources.toml").write_text(
        '[[distribution]]\nname = "pkg"\npack = "pkg"\n' + "".join(pins), encoding="utf-8"
    )
    (packs / "releases.toml").write_text("", encoding="utf-8")
    (packs / "pkg.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records), encoding="utf-8"
    )


#: A message record whose first release is 1.2, raised at pkg/m.py:3 (RAISE).
RECORD = {
    "id": "mined-pkg-1",
    "errorMessage": "the value {x} is far too large here",
    "filePath": "pkg/m.py",
    "lineNumber": 3,
    "documentation": "Raised by f when x.",
    "tags": ["mined", "raise", "python"],
    "versions": {"distribution": "pkg", "first": "1.2", "checked": "1.2",
                 "sites": {"1.2": "pkg/m.py:3"}},
}  # fmt: skip
RAISE = 'def f(x):\n    if x:\n        raise ValueError(f"the value {x} is far too large here")\n'


def test_a_run_finds_a_first_release_that_is_too_late(tmp_path: Path) -> None:
    """Release 1.1 raises the message but the record says 1.2: `first` is wrong, the site right."""
    _pack(tmp_path, {"1.0": {"pkg/m.py": "x = 1\n"}, "1.1": {"pkg/m.py": RAISE},
                     "1.2": {"pkg/m.py": RAISE}}, [RECORD])  # fmt: skip
    report = _audit.run_audit(tmp_path / "packs", tmp_path / "cache")
    checks = report.tallies["pkg"]
    assert 1 == checks["site"]["right"]
    assert 1 == checks["template"]["right"]
    assert 1 == checks["first"]["wrong"]
    assert 1 == checks["last"]["right"]
    assert [("first", "1.1")] == [(f["check"], f["release"]) for f in report.failures]


def test_a_release_without_archive_before_first_leaves_it_unchecked(tmp_path: Path) -> None:
    """A pack release list that says 1.1 was not read: `first` = 1.2 cannot be checked."""
    _pack(tmp_path, {"1.0": {"pkg/m.py": "x = 1\n"}, "1.2": {"pkg/m.py": RAISE}}, [RECORD])
    listed = {"releases": ["1.0", "1.1", "1.2"], "mined": ["1.2"], "unread": {"1.1": "yanked"}}
    (tmp_path / "packs" / "pkg.releases").write_text(
        json.dumps({"schema": "errkb.releases/1", "distributions": {"pkg": listed}})
    )
    report = _audit.run_audit(tmp_path / "packs", tmp_path / "cache")
    assert {"unchecked": 1} == dict(report.tallies["pkg"]["first"])
    assert [] == report.failures


def test_a_run_checks_a_skew_record_and_its_pin(tmp_path: Path) -> None:
    """A name removed in 1.2 whose pin `<1.2` resolves to 1.1, which lacks it too: pin wrong."""
    record = {
        "id": "skew-pkg-1",
        "errorMessage": "cannot import name 'old' from 'pkg.m'",
        "solutions": ["pip install 'pkg<1.2'"],
        "tags": ["mined", "skew"],
        "versions": {"distribution": "pkg", "first": "1.2", "checked": "1.2"},
        "skew": {"distribution": "pkg", "name": "pkg.m.old", "change": "removed",
                 "changedIn": "1.2", "lastBefore": "1.0"},
    }  # fmt: skip
    _pack(tmp_path, {"1.0": {"pkg/m.py": "def old(): pass\n"}, "1.1": {"pkg/m.py": "x = 1\n"},
                     "1.2": {"pkg/m.py": "x = 1\n"}}, [record])  # fmt: skip
    report = _audit.run_audit(tmp_path / "packs", tmp_path / "cache")
    assert 1 == report.tallies["pkg"]["skew"]["right"]
    assert 1 == report.tallies["pkg"]["pins"]["wrong"]


def test_markdown_table_and_docs_markers(tmp_path: Path) -> None:
    """The table is written between the markers, the text around them kept."""
    doc = tmp_path / "mining.md"
    doc.write_text(f"before\n{_audit.MARKERS[0]}\nold\n{_audit.MARKERS[1]}\nafter\n")
    _audit.write_docs(doc, "| t |\n", "cmd")
    text = doc.read_text()
    assert text.startswith("before\n")
    assert text.endswith("after\n")
    assert "old" not in text
    assert "| t |" in text


def test_a_python_message_is_raised_only_where_its_class_is_named() -> None:
    """The same text in a docstring of another file, or raised by another class, is not it."""
    release = _audit.Release(
        {
            "pkg/debug.py": ['"""Pickling fails: Can\'t pickle local object \'f.<locals>.g\'"""\n'],
            "pkg/pickler.py": ['raise PicklingError(f"Can\'t pickle local object {obj!r}")\n'],
        }
    )
    pieces = ("Can't pickle local object ",)
    assert release.has_message(pieces, False, "", "PicklingError")
    assert not release.has_message(pieces, False, "", "CppWrapperCodegenError")
    only_doc = _audit.Release({"pkg/debug.py": release.files["pkg/debug.py"]})
    assert not only_doc.has_message(pieces, False, "", "PicklingError")


def test_a_check_that_always_fails_has_no_condition_of_its_own() -> None:
    """`TORCH_CHECK(false, ...)` under an `if`: the check's own condition is not judged."""
    text = 'if (t.device().type() != kCUDA) {\n  TORCH_CHECK(false, "expected a CUDA tensor");\n}\n'
    assert _audit.site_condition(text, 2) is None


def test_a_message_returned_or_raised_by_another_class_is_not_the_record_s() -> None:
    """The statement just above the text names the class: a returned message does not."""
    returned = 'def check(n):\n    return (False, f"Marlin does not support weight_bits = {n}. ")\n'
    other = 'def f(a):\n    raise NotImplementedError(\n        f"MultiModalParam is not supported for {a}"\n    )\n'
    same = 'def f(a):\n    raise ValueError(\n        f"MultiModalParam is not supported for {a}"\n    )\n'
    marlin = ("Marlin does not support weight_bits = ",)
    modal = ("MultiModalParam is not supported for ",)
    assert not _audit.Release({"m.py": [returned]}).has_message(marlin, False, "", "ValueError")
    assert not _audit.Release({"m.py": [other]}).has_message(modal, False, "", "ValueError")
    assert _audit.Release({"m.py": [same]}).has_message(modal, False, "", "ValueError")
