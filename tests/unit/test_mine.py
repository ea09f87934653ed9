"""The miner's parts: the Python reader's forms, templates as patterns, the specificity rule."""

from __future__ import annotations

import ast
import gzip
import json
from collections import Counter

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

from errkb.mine import Hole, mine
from errkb.mine._python import _Reader, module_of, read_python
from errkb.mine._template import error_message, message_pattern, why_too_generic
from errkb.records._schema import library_of
from errkb.registry import Registry


def sites(source: str, path: str = "pkg/mod.py"):
    dropped: Counter[str] = Counter()
    found = read_python(source, path, distribution="pkg", version="1.0", dropped=dropped)
    return found, dropped


def write_tree(root, files: dict[str, str]) -> None:
    """Write each file of ``files`` (relative path -> text) under ``root``."""
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def only(source: str, path: str = "pkg/mod.py"):
    found, _ = sites(source, path)
    assert 1 == len(found), found
    return found[0]


def test_percent_with_a_mapping_names_its_holes():
    """``"%(n)d ... %(name)s" % {...}`` gives a number hole and a text hole, by key."""
    site = only('raise ValueError("%(n)d blocks for %(name)s" % {"n": k, "name": m})')
    assert (Hole("k", number=True), " blocks for ", Hole("m")) == site.template


def test_format_with_indexes_and_keywords():
    """``.format`` with ``{1}``, ``{0}`` and ``{key:.1f}`` takes each argument's expression."""
    site = only('raise ValueError("{1} then {0} at {rate:.1f}".format(a, b.c, rate=r))')
    assert (Hole("b.c"), " then ", Hole("a"), " at ", Hole("r", number=True)) == site.template


def test_augmented_message_and_plain_warning():
    """``msg += ...`` extends the message; a warning without a category is a UserWarning."""
    site = only('import warnings\nmsg = "first part"\nmsg += f" then {x}"\nwarnings.warn(msg)')
    assert ("first part", " then ", Hole("x")) == site.template
    assert ("UserWarning", "warn") == (site.error_class, site.kind)


def test_check_with_resolves_its_class_through_imports():
    """``torch._check_with(Cls, cond, lambda: ...)`` raises Cls, resolved to its module."""
    source = (
        "import torch\nfrom .errors import ShapeError\n"
        'torch._check_with(ShapeError, n > 0, lambda: f"rank {n} is not positive")\n'
    )
    site = only(source, "pkg/sub/mod.py")
    assert ("pkg.sub.errors.ShapeError", "check", "n <= 0") == (
        site.error_class,
        site.kind,
        site.condition,
    )


def test_relative_imports_resolve_from_the_package():
    """``from ..errors import E`` in ``pkg/sub/mod.py`` is ``pkg.errors.E``."""
    site = only('from ..errors import E\nraise E("x")', "src/pkg/sub/mod.py")
    assert "pkg.errors.E" == site.error_class


def test_module_of_drops_source_folders_and_init():
    """Paths in a source tree and in a wheel name the same module."""
    assert ["pkg.sub", "pkg.sub.mod", "tokenizers.x"] == [
        module_of("src/pkg/sub/__init__.py"),
        module_of("pkg/sub/mod.py"),
        module_of("bindings/python/py_src/tokenizers/x.py"),
    ]


def test_long_elif_chain_is_read():
    """Two thousand elifs (deeper than the recursion limit) still give the last branch's raise."""
    branches = "".join(f"elif x == {i}:\n    pass\n" for i in range(2000))
    site = only(f"if x < 0:\n    pass\n{branches}else:\n    raise ValueError('none of them')")
    assert site.condition is not None
    assert site.condition.endswith("and x != 1999")


def test_segments_equal_the_standard_library_s():
    """The reader's fast source segments are :func:`ast.get_source_segment`'s, on one line."""
    source = (
        'x = f"é {a + b:>{w}} ü"\r\nif (a\n    and b):\x0c\n    raise E("ß" +\n  c)\n'
        "y = {'k': [1,\n 2]}\n"
    )
    tree = ast.parse(source)
    reader = _Reader(source, "m.py", tree, "d", "1", 10, Counter())
    for node in ast.walk(tree):
        if hasattr(node, "end_col_offset"):
            expected = " ".join((ast.get_source_segment(source, node) or "").split())
            assert expected == reader.segment(node)


def test_excerpt_lines_follow_the_parser_s_line_count():
    """A form feed inside a line does not shift the excerpt (str.splitlines would)."""
    site = only("a = 1  # \x0c page\nb = 2\nraise ValueError('the third line raises it')\n")
    assert 3 == site.line
    assert "raise ValueError" in site.excerpt.split("\n")[site.line - site.excerpt_start]


# --- templates --------------------------------------------------------------------------


def test_named_groups_are_deduplicated_and_the_last_hole_runs_to_the_end():
    """Two holes named ``x`` become ``x`` and ``x_2``; an unnamed hole gets a plain group."""
    template = ("from ", Hole("a.x"), " to ", Hole("b.x"), " via ", Hole("f(y)"), ": ", Hole("why"))
    pattern = message_pattern(template)
    m = regex.search(pattern, "from 1 to 2 via z: out of memory on device 0")
    assert m is not None
    assert {"x": "1", "x_2": "2", "why": "out of memory on device 0"} == m.groupdict()
    assert "from {a.x} to {b.x} via {f(y)}: {why}" == error_message(template)


def test_number_holes_match_numbers_only():
    """A number hole matches ``1,024``, ``-0.75`` and ``1e-05`` but not a word."""
    pattern = message_pattern(("size ", Hole("n", number=True), " is too large"))
    for text in ("1,024", "-0.75", "1e-05"):
        assert regex.search(pattern, f"size {text} is too large") is not None
    assert regex.search(pattern, "size many is too large") is None


@given(
    st.lists(
        st.one_of(
            st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1),
            st.builds(Hole, st.sampled_from(["a", "b.c", "f(x)", ""]), st.booleans()),
        ),
        min_size=1,
        max_size=6,
    ),
    st.data(),
)
def test_pattern_matches_every_filled_message(parts, data):
    """Whatever fills the holes (numbers in number holes), the pattern finds the message."""
    message = []
    for part in parts:
        if isinstance(part, str):
            message.append(part)
        elif part.number:
            message.append(str(data.draw(st.integers())))
        else:
            message.append(data.draw(st.text(st.characters(categories=("L", "N")), min_size=1)))
    assert regex.search(message_pattern(tuple(parts)), "".join(message)) is not None


@pytest.mark.parametrize(
    ("template", "reason"),
    [
        (("'", Hole("type(o).__name__"), "' object has no attribute '", Hole("k"), "'"),
         "builtin-imitation"),
        ((Hole("f"), "() got an unexpected keyword argument '", Hole("k"), "'"),
         "builtin-imitation"),
        (("No module named '", Hole("m"), "' could be found anywhere here"), "builtin-imitation"),
        (("invalid value ", Hole("v")), "too-short"),
        (("==== ", Hole("a"), " ---- ", Hole("b"), " ++++ ", Hole("c"), " 123456"), "too-few-words"),
        (("the block size ", Hole("b"), " must divide the cache size"), None),
    ],
)  # fmt: skip
def test_specificity_rule(template, reason):
    """Builtin imitations and short or wordless templates are refused; a specific one is kept."""
    assert reason == why_too_generic(template)


# --- packs ------------------------------------------------------------------------------


def test_mined_pack_library_is_its_distribution():
    """Records of ``records/mined/<dist>.jsonl`` belong to the distribution, not to "mined"."""
    assert ["vllm", "torch", "chattts"] == [
        library_of("records/mined/vllm.jsonl:12", None),
        library_of("/x/errkb/_records/mined/torch.jsonl.gz:1", "pytorch/pytorch"),
        library_of("records/chattts/x.json", None),
    ]


def test_gzip_pack_loads_and_reads_bodies_on_demand(tmp_path):
    """A .jsonl.gz pack goes through the registry's pack path; a body is read by its offset."""
    package = tmp_path / "src" / "pkg"
    package.mkdir(parents=True)
    lines = [f"def f{i}():\n    raise ValueError('message number {i} of the pack is here')\n"
             for i in range(30)]  # fmt: skip
    (package / "mod.py").write_text("".join(lines))
    records = mine([str(tmp_path / "src")]).records
    pack = tmp_path / "p.jsonl.gz"
    pack.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    registry = Registry.from_paths([pack], builtin=False, env=False, entry_points=False)
    assert [] == list(registry.problems)
    assert 30 == len(registry)
    last = records[-1]
    assert last["sourceCode"] == registry.get(last["id"]).source_code


# --- sources ----------------------------------------------------------------------------


def test_wheel_of_a_known_distribution_links_into_its_repository(tmp_path):
    """A transformers wheel's package paths link to ``src/`` at the ``v{version}`` tag."""
    import zipfile

    wheel = tmp_path / "transformers-4.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(
            "transformers/x.py",
            "def f():\n    raise ValueError('the known wheel raises this one')\n",
        )
        zf.writestr(
            "transformers-4.0.0.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: transformers\nVersion: 4.0.0\n",
        )
    (record,) = mine([str(wheel)]).records
    assert ("transformers/x.py", "huggingface/transformers") == (record["filePath"], record["repo"])
    assert record["githubUrl"].startswith(
        "https://github.com/huggingface/transformers/blob/v4.0.0/src/transformers/x.py#L1-L"
    )


def test_folder_version_from_setup_cfg(tmp_path):
    """A folder without pyproject.toml takes its name, version and URL from setup.cfg."""
    from errkb.mine import open_source

    (tmp_path / "setup.cfg").write_text(
        "[metadata]\nname = Some_Lib\nversion = 0.3.1\n"
        "project_urls =\n    Source = https://github.com/someone/some-lib.git\n"
    )
    source = open_source(str(tmp_path))
    assert ("some-lib", "0.3.1", "someone/some-lib") == (
        source.distribution,
        source.version,
        source.repo,
    )


def test_folder_without_metadata_has_no_version_and_no_link(tmp_path):
    """Unknown version: the record says nothing of releases and links nowhere."""
    (tmp_path / "m.py").write_text("raise ValueError('a folder with no metadata raises it')\n")
    (record,) = mine([str(tmp_path)]).records
    assert {"distribution": tmp_path.name.lower().replace("_", "-")} == record["versions"]
    assert "githubUrl" not in record


def test_reexported_class_is_followed_to_its_defining_module(tmp_path):
    """``from pkg import E`` where pkg only re-exports E names ``pkg.errors.E``."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from .errors import E\n")
    (package / "errors.py").write_text("class E(RuntimeError):\n    pass\n")
    (package / "mod.py").write_text(
        "from pkg import E\nraise E('the re-exported class is raised from here')\n"
    )
    (record,) = mine([str(tmp_path)]).records
    assert "pkg.errors.E" == record["errorClass"]


def test_an_sdists_scripts_outside_its_packages_are_not_mined(tmp_path):
    """CI scripts and tools of an sdist raise messages no user meets; setup.py's they do."""
    files = {
        "pkg/__init__.py": "",
        "pkg/core.py": "raise ValueError('the package itself raises this message')\n",
        ".buildkite/scripts/compare.py": "raise ValueError('a CI script raises this message')\n",
        "tools/report.py": "raise ValueError('a maintainer tool raises this message')\n",
        "setup.py": "raise RuntimeError('setup.py needs CUDA 11.7 or newer to build it')\n",
    }
    write_tree(tmp_path, files)
    found = sorted(r["filePath"] for r in mine([str(tmp_path)]).records)
    assert ["pkg/core.py", "setup.py"] == found


@pytest.mark.parametrize(
    ("statement", "condition"),
    [
        ('assert input_size == 2, "scores must be a 2D Tensor"', "input_size != 2"),
        ('assert n < limit, "n must be under the limit"', "n >= limit"),
        ('assert n <= limit, "n must be under the limit"', "n > limit"),
        ('assert x is None, "x must be None here"', "x is not None"),
        ('assert x is not None, "x must be given here"', "x is None"),
        ('assert k in table, "k must be in the table"', "k not in table"),
        ('assert k not in table, "k must be new here"', "k in table"),
        ('assert ready, "the engine must be ready"', "not ready"),
        ('assert self.cfg.ready(), "the engine must be ready"', "not self.cfg.ready()"),
        ('assert not closed, "the file must be open"', "closed"),
        ('assert a and b, "both must be set here"', "not (a and b)"),
        ('assert 0 <= i < n, "i must be in range"', "not (0 <= i < n)"),
        ('assert (a or b) == c, "a mismatch of settings"', "(a or b) != c"),
        ('torch._check(x.dim() == 2, lambda: "x must have two dims")', "x.dim() != 2"),
    ],
)
def test_a_check_states_the_condition_under_which_it_raises(statement, condition):
    """``assert cond`` and ``torch._check(cond)`` raise when cond is false: the site says so."""
    site = only(f"import torch\n{statement}\n")
    assert condition == site.condition


def test_an_else_branch_states_the_opposite_of_its_if():
    """``if a == b: ... else: raise`` raises when ``a != b``; ``if not x`` ... else, when x."""
    source = (
        "if a == b:\n    pass\nelse:\n    raise ValueError('the sizes are not the same')\n"
        "if not x:\n    pass\nelse:\n    raise ValueError('x was given, and it must not be')\n"
    )
    found, _ = sites(source)
    assert ["a != b", "x"] == [s.condition for s in found]


def test_conditions_that_bind_looser_than_and_are_parenthesised_when_joined():
    """``if a or b:`` around ``assert c`` reads ``(a or b) and not c``, never ``a or b and ...``."""
    source = (
        "if a or b:\n    assert c, 'c must hold when a or b'\nif a or b:\n    raise E('x y z')\n"
    )
    found, _ = sites(source)
    assert ["(a or b) and not c", "a or b"] == [s.condition for s in found]


def test_test_and_benchmark_files_are_not_mined(tmp_path):
    """tests/, benchmarks/, test_*.py, *_test.py and conftest.py raise nothing users meet."""
    files = {
        "pkg/__init__.py": "",
        "pkg/core.py": "raise ValueError('the package itself raises this message')\n",
        "pkg/tests/__init__.py": "raise ValueError('a test package raises this message')\n",
        "pkg/benchmarks/__init__.py": "raise ValueError('a benchmark raises this message')\n",
        "pkg/test_core.py": "raise ValueError('a test module raises this message')\n",
        "pkg/core_test.py": "raise ValueError('a test module raises this message too')\n",
        "pkg/conftest.py": "raise ValueError('a fixture module raises this message')\n",
    }
    write_tree(tmp_path, files)
    assert ["pkg/core.py"] == [r["filePath"] for r in mine([str(tmp_path)]).records]


def test_a_condition_too_long_to_show_is_left_out_of_the_sentence_not_cut(tmp_path):
    """A long condition gives "Raised by f." with no when-clause; a short one shows whole."""
    long_test = " and ".join(f"settings.option_number_{i} == {i}" for i in range(8))
    (tmp_path / "m.py").write_text(
        "def f():\n"
        f"    if {long_test}:\n        raise ValueError('a long condition raises this')\n"
        "    if n > 3:\n        raise ValueError('a short condition raises this')\n"
    )
    docs = sorted(r["documentation"] for r in mine([str(tmp_path)]).records)
    assert ["Raised by f when n > 3.", "Raised by f."] == docs


def test_without_excerpt_a_known_distribution_s_repo_and_link_are_left_to_the_loader(tmp_path):
    """No excerpt: the pack line carries no repo and no link; the loaded record has both."""
    import zipfile

    from errkb.records import record_from_dict

    wheels = []
    for version, blank in (("4.0.0", ""), ("4.1.0", "\n\n")):
        wheel = tmp_path / f"transformers-{version}-py3-none-any.whl"
        with zipfile.ZipFile(wheel, "w") as zf:
            zf.writestr(
                "transformers/x.py",
                f"{blank}def f():\n    raise ValueError('the known wheel raises this one')\n",
            )
            zf.writestr(
                f"transformers-{version}.dist-info/METADATA",
                f"Metadata-Version: 2.1\nName: transformers\nVersion: {version}\n",
            )
        wheels.append(str(wheel))
    (data,) = mine(wheels, excerpt_lines=0).records
    assert not {"repo", "githubUrl"} & set(data)
    record, problems = record_from_dict(data)
    assert [] == problems
    assert record is not None
    assert "huggingface/transformers" == record.repo
    # The newest site's release: 4.1.0 raises it on line 4.
    assert (
        "https://github.com/huggingface/transformers/blob/v4.1.0/src/transformers/x.py#L4"
        == record.github_url
    )
