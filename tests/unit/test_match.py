from __future__ import annotations

import itertools

import pytest
from helpers import hand_written_folders
from hypothesis import given
from hypothesis import strategies as st

from errkb.match import MODULE_ALIASES, ClassSpec, Matcher, typed
from errkb.records import load_paths
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
    rank above a record of another package, which is still found (never hidden by a name);
    the two likely ones tie, and keep the registry's order."""
    m = _matcher(
        record_dict(id="rt", messagePattern="boom", errorClass="RuntimeError"),
        record_dict(id="pkg", messagePattern="boom", errorClass="acme.BaseError"),
        record_dict(id="other", messagePattern="boom", errorClass="zzz.BaseError"),
        record_dict(id="own", messagePattern="boom", errorClass="acme.errors.SpecificError"),
    )
    assert ["own", "rt", "pkg", "other"] == [
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


# --- Classes as tracebacks print them, against the shipped records --------------------------------

SHIPPED = [r for r in load_paths(hand_written_folders()).records if not r.retired]
SHIPPED_BY_ID = {r.id: r for r in SHIPPED}
WITH_CLASS = [r for r in SHIPPED if r.error_class]
#: A class no process can resolve: it must never hide a record whose message matches.
UNKNOWN_CLASS = "nosuchpkg.SomeError"
#: How a class name relates to a record's class, worst to best (see errkb.match).
TIERS = ("unresolved", "base", "alias", "exact")


@pytest.fixture(scope="module")
def shipped():
    """One matcher over the shipped records."""
    return Matcher(SHIPPED)


def _class_names(record) -> dict[str, str]:
    """Every name a traceback may print for the record's class, with the tier it must rank at.

    The short name and the qualified name are exact; a module alias from MODULE_ALIASES
    (``torch.cuda.OutOfMemoryError`` for ``torch.OutOfMemoryError``, ``safetensors_rust`` for
    ``safetensors._safetensors_rust``, ``pickle`` for ``_pickle``) is an alias, unless this
    process has imported the module, which resolves the name to the class itself (exact); a
    class the record lists in ``errorClasses`` is base; an unknown name is unresolved, except
    for a fallback record (Python's own words under Python's own classes only: an unknown class
    quoting them is another library's error; tests/unit/test_python_import.py).
    """
    module, _, name = record.error_class.rpartition(".")
    names = {name: "exact", f"{module or 'builtins'}.{name}": "exact"}
    for printed, canonical in MODULE_ALIASES.items():
        if module == canonical:
            names.setdefault(f"{printed}.{name}", "alias")
        elif module == printed or module.startswith(printed + "."):
            names.setdefault(f"{canonical}{module[len(printed) :]}.{name}", "alias")
    for other in record.error_classes:
        names.setdefault(other, "base")
    if "fallback" not in record.tags:
        names[UNKNOWN_CLASS] = "unresolved"
    return {
        n: "exact" if tier == "alias" and ClassSpec.of(n).resolved else tier
        for n, tier in names.items()
    }


def _own_score(matcher, message, error_class, record_id):
    return next(
        (m.score for m in matcher.match(message, error_class) if m.record.id == record_id), None
    )


@pytest.mark.parametrize("record", WITH_CLASS, ids=lambda r: r.id)
def test_a_class_name_never_loses_a_match_the_message_alone_finds(shipped, record):
    """Short, qualified, aliased, declared or unknown: naming the class keeps the record found."""
    assert [] == [
        f"{record.id}: example {i} is lost with class {name!r}"
        for i, example in enumerate(record.examples)
        if _own_score(shipped, example, None, record.id) is not None
        for name in _class_names(record)
        if _own_score(shipped, example, name, record.id) is None
    ]


@pytest.mark.parametrize("record", WITH_CLASS, ids=lambda r: r.id)
def test_class_names_rank_exact_over_alias_over_base_over_unresolved(shipped, record):
    """The same record on the same message scores by how the printed class relates to its own."""
    names = _class_names(record)
    problems = []
    for i, example in enumerate(record.examples):
        scores: dict[str, set[float | None]] = {}
        for name, tier in names.items():
            scores.setdefault(tier, set()).add(_own_score(shipped, example, name, record.id))
        present = [tier for tier in TIERS if tier in scores]
        problems += [
            f"example {i}: {tier} names score differently: {sorted(scores[tier], key=str)}"
            for tier in present
            if len(scores[tier]) != 1 or None in scores[tier]
        ]
        problems += [
            f"example {i}: {worse} {scores[worse]} does not rank below {better} {scores[better]}"
            for worse, better in itertools.pairwise(present)
            if None not in scores[worse] | scores[better]
            and not max(scores[worse]) < min(scores[better])
        ]
    assert [] == problems, f"{record.id}: {names}"


@pytest.mark.parametrize(
    ("printed", "record_id"),
    [
        ("safetensors_rust.SafetensorError", "safetensors-header-too-large"),
        ("DistBackendError", "torch-nccl-error"),
        ("GatedRepoError", "huggingface-hub-gated-repo"),
        ("LocalEntryNotFoundError", "huggingface-hub-local-files-only-cache-miss"),
        ("LocalEntryNotFoundError", "huggingface-hub-local-entry-not-found-connection"),
        ("HfHubHTTPError", "huggingface-hub-unauthorized-invalid-token"),
        ("torch.cuda.OutOfMemoryError", "torch-cuda-out-of-memory"),
        ("RuntimeError", "torch-cuda-out-of-memory"),
    ],
)
def test_classes_as_tracebacks_print_them_put_their_record_first(shipped, printed, record_id):
    """Issue 13's cases: an old module name, a bare short name, or the pre-1.13 base class."""
    for example in SHIPPED_BY_ID[record_id].examples:
        assert record_id == shipped.match(example, printed)[0].record.id, (printed, example)


def test_solutions_name_captures_filled_by_errkb_never_evaluated():
    """{name} takes the capture, {{ and }} are braces, a missing capture is a placeholder."""
    from errkb._patterns import fill_template

    text = "in_features={mat1_cols} (built for {mat2_rows}); sd = {{k: v}}; {gone}"
    assert "in_features=2048 (built for 512); sd = {k: v}; <gone>" == fill_template(
        text, {"mat1_cols": 2048, "mat2_rows": 512, "gone": None}
    )
    assert "{__import__('os')}" == fill_template("{__import__('os')}", {})


def test_validate_names_a_solution_capture_the_pattern_lacks():
    """A {name} that is no group of the pattern, or a lone brace, is a record problem."""
    from errkb.records import record_from_dict

    _, problems = record_from_dict(record_dict(solutions=["Set it to {y}.", "A dict {k: v}."]))
    lines = [p.line for p in problems]
    assert any("{y} names no capture group of the pattern (groups: x)" in line for line in lines)
    assert any("a lone '{'" in line for line in lines)


# Records mined from a message Python words itself (issue 21, items 5 and 6).

_TRANSFORMERS_FRAME = "/venv/lib/python3.9/site-packages/transformers/models/x/modeling_x.py"


def _skew(rid, pattern, name, error_class="TypeError", documentation=None, solutions=(), **skew):
    """A mined skew record of transformers (its library, by its repository)."""
    fields = {"documentation": documentation} if documentation else {}
    return record_dict(
        id=rid,
        repo="huggingface/transformers",
        messagePattern=pattern,
        errorClass=error_class,
        tags=["mined", "skew"],
        skew={"distribution": "transformers", "name": name, "change": "removed", **skew},
        solutions=list(solutions),
        **fields,
    )


SEGGPT_LABELS = _skew(
    "seggpt-labels",
    r"(?<![\w.])(?:SegGptModel\.)?forward\(\) got an unexpected keyword argument 'labels'",
    "transformers.models.seggpt.modeling_seggpt.SegGptModel.forward(labels)",
)


def test_a_record_in_pythons_words_never_matches_by_its_literal_run():
    """A user's ``MyModel.forward()`` holds the record's longest literal run, not its class."""
    m = _matcher(SEGGPT_LABELS)
    assert [] == m.match("MyModel.forward() got an unexpected keyword argument 'labels'")
    assert [] == m.match(
        "MyModel.forward() got an unexpected keyword argument 'labels'",
        None,
        files=[_TRANSFORMERS_FRAME],
    )
    assert ["seggpt-labels"] == [
        x.record.id
        for x in m.match("SegGptModel.forward() got an unexpected keyword argument 'labels'")
    ]


def test_a_bare_method_matches_only_with_a_frame_in_the_library():
    """Python 3.9 prints ``forward()``, no class: only a transformers frame vouches for it."""
    m = _matcher(SEGGPT_LABELS)
    message = "forward() got an unexpected keyword argument 'labels'"
    assert [] == m.match(message, "TypeError")
    assert [] == m.match(message, "TypeError", files=["/home/me/train.py", "/x/vllm/engine.py"])
    assert ["seggpt-labels"] == [
        x.record.id for x in m.match(message, "TypeError", files=[_TRANSFORMERS_FRAME])
    ]


def test_a_frame_in_the_records_module_ranks_it_first():
    """Of the records a bare ``forward()`` may be, the one whose module the traceback passes
    through (``modeling_llama.py``) ranks first: the skew record's module is its raise site."""
    llama = _skew(
        "llama-labels",
        r"(?<![\w.])(?:LlamaForCausalLM\.)?forward\(\) got an unexpected keyword argument 'labels'",
        "transformers.models.llama.modeling_llama.LlamaForCausalLM.forward(labels)",
    )
    m = _matcher(SEGGPT_LABELS, llama)
    frame = "/venv/site-packages/transformers/models/llama/modeling_llama.py"
    found = m.match("forward() got an unexpected keyword argument 'labels'", None, files=[frame])
    assert ["llama-labels", "seggpt-labels"] == [x.record.id for x in found]
    assert found[0].score > found[1].score  # not by id alone


def test_a_module_level_function_is_named_bare():
    """A function of a module prints bare on every Python: its own name is what it names."""
    m = _matcher(
        _skew(
            "set-seed",
            r"(?<![\w.])set_seed\(\) got an unexpected keyword argument 'deterministic'",
            "transformers.trainer_utils.set_seed(deterministic)",
        )
    )
    assert ["set-seed"] == [
        x.record.id
        for x in m.match("set_seed() got an unexpected keyword argument 'deterministic'")
    ]


def test_a_message_cut_inside_a_bare_method_is_not_claimed():
    """``forward() missing 1 ...: 'x'`` is a cut match of a record that requires
    ``pixel_values`` (the list of names may go on); it names no class, so it is not claimed."""
    m = _matcher(
        _skew(
            "pixel-values",
            r"(?<![\w.])(?:Data2VecVisionModel\.)?forward\(\) missing \d+ required positional "
            r"arguments?: (?:'[^']*'(?:, | and |,? and ))*'pixel_values'",
            "transformers.models.data2vec.Data2VecVisionModel.forward(pixel_values)",
            change="required",
        )
    )
    assert [] == m.match("forward() missing 1 required positional argument: 'x'", "TypeError")
    qualified = (
        "Data2VecVisionModel.forward() missing 1 required positional argument: 'pixel_values'"
    )
    assert ["pixel-values"] == [x.record.id for x in m.match(qualified, "TypeError")]


CONTRASTIVE = _skew(
    "contrastive",
    r"(?:type object )?'(?P<cls>\w+)'(?: object)? has no attribute 'contrastive_search'",
    "transformers.generation.utils.GenerationMixin.contrastive_search",
    "AttributeError",
    documentation="`contrastive_search` was removed from `LlamaModel` in transformers 4.46.3.",
    classes=["transformers.LlamaModel", "transformers.LlamaForCausalLM"],
)


_USER_CODE_MATCHER = _matcher(SEGGPT_LABELS, CONTRASTIVE)


_COVERED = {"SegGptModel", "LlamaModel", "LlamaForCausalLM"}


@given(
    cls=st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,24}", fullmatch=True).filter(
        lambda c: c not in _COVERED
    ),
    wording=st.sampled_from(
        [
            "{}.forward() got an unexpected keyword argument 'labels'",
            "TypeError: {}.forward() got an unexpected keyword argument 'labels'",
            "'{}' object has no attribute 'contrastive_search'",
            "type object '{}' has no attribute 'contrastive_search'",
            "{}: forward() got an unexpected keyword argument 'labels'",
        ]
    ),
)
def test_no_class_but_the_records_own_is_claimed(cls, wording):
    """Whatever a user's class is called, in whichever wording, no record claims it."""
    assert [] == _USER_CODE_MATCHER.match(wording.format(cls))


def test_the_classes_a_record_covers_are_read_from_skew_classes():
    """A pattern that takes any class name covers only the classes ``skew.classes`` lists; a
    user's class needs a frame in the library."""
    m = _matcher(CONTRASTIVE)
    assert [] == m.match("'MyModel' object has no attribute 'contrastive_search'")
    found = m.match("'LlamaForCausalLM' object has no attribute 'contrastive_search'")
    assert ["contrastive"] == [x.record.id for x in found]
    framed = m.match(
        "'MyModel' object has no attribute 'contrastive_search'", None, files=[_TRANSFORMERS_FRAME]
    )
    assert ["contrastive"] == [x.record.id for x in framed]
    # A class the record does not cover is never written into its text.
    assert CONTRASTIVE["documentation"] == framed[0].record.documentation


def test_the_class_shown_is_the_class_in_the_message():
    """The record's text names the message's class where it named another class it covers."""
    [match] = _matcher(CONTRASTIVE).match(
        "AttributeError: 'LlamaForCausalLM' object has no attribute 'contrastive_search'"
    )
    assert (
        "`contrastive_search` was removed from `LlamaForCausalLM` in transformers 4.46.3."
        == match.record.documentation
    )


def test_a_documentation_that_names_a_capture_is_filled():
    """A record whose text names its class capture (``{cls}``) reads the message's class."""
    record = dict(
        CONTRASTIVE,
        documentation="`contrastive_search` was removed from `{cls}` in transformers 4.46.3.",
    )
    [match] = _matcher(record).match("'LlamaModel' object has no attribute 'contrastive_search'")
    assert (
        "`contrastive_search` was removed from `LlamaModel` in transformers 4.46.3."
        == match.record.documentation
    )


def test_a_list_of_classes_becomes_the_class_in_the_message():
    """ "`A`, `B` and 2 more no longer have `m`" reads "`C` no longer has `m`"; the base class
    named after it, and a call's class (`A.forward()`), are rewritten only if listed."""
    record = _skew(
        "list",
        r"(?:type object )?'(?:AModel|BModel|CModel|DModel)'(?: object)? has no attribute 'm'",
        "transformers.modeling_utils.PreTrainedModel.m",
        "AttributeError",
        documentation=(
            "`AModel`, `BModel` and 2 more no longer have `m` in transformers 4.52.4: they "
            "stopped inheriting it from `GenerationMixin`, which still defines it. See "
            "`AModel.m` and `transformers.AModel`."
        ),
        solutions=["Update the code, where these classes lack `m`."],
    )
    [match] = _matcher(record).match("'CModel' object has no attribute 'm'")
    assert (
        "`CModel` no longer has `m` in transformers 4.52.4: it stopped inheriting it from "
        "`GenerationMixin`, which still defines it. See `CModel.m` and `transformers.AModel`."
    ) == match.record.documentation
    assert ("Update the code, where `CModel` lacks `m`.",) == match.record.solutions


def test_an_import_of_a_name_the_record_does_not_name_is_not_claimed():
    """A mined record whose pattern takes any name from a module names none of them."""
    m = _matcher(
        record_dict(
            id="any-name",
            repo="huggingface/transformers",
            messagePattern=r"cannot import name '(?P<name>\w+)' from 'transformers'",
            errorClass="ImportError",
            tags=["mined"],
        ),
        _skew(
            "tfbert",
            r"cannot import name 'TFBertModel' from 'transformers'"
            r"|module 'transformers' has no attribute 'TFBertModel'",
            "transformers.TFBertModel",
            "ImportError",
        ),
    )
    assert [] == m.match("cannot import name 'MyModel' from 'transformers' (/x/__init__.py)")
    assert ["tfbert"] == [
        x.record.id for x in m.match("cannot import name 'TFBertModel' from 'transformers'")
    ]


def test_a_hand_written_record_in_pythons_words_is_left_as_written():
    """Only mined records are held to the rule: a hand-written one says what it covers."""
    m = _matcher(
        record_dict(
            id="written",
            messagePattern=r"'(?P<cls>\w*Cache)' object has no attribute 'get_max_length'",
            errorClass="AttributeError",
        )
    )
    assert ["written"] == [
        x.record.id for x in m.match("'MyCache' object has no attribute 'get_max_length'")
    ]


def test_a_hand_written_skew_record_covers_what_its_pattern_matches():
    r"""A person's pattern states what it covers: ``(?:(?:Async)?EngineArgs\.)?__init__()``
    takes ``AsyncEngineArgs``, but not a user's ``MyThing.`` left outside its match, and not a
    bare ``__init__()`` without a vLLM frame."""
    m = _matcher(
        record_dict(
            id="task",
            repo="vllm-project/vllm",
            messagePattern=r"(?:(?:Async)?EngineArgs\.)?__init__\(\) got an unexpected keyword "
            r"argument 'task'",
            errorClass="TypeError",
            skew={"distribution": "vllm", "name": "vllm.EngineArgs(task)", "change": "removed"},
        )
    )
    for owner in ("EngineArgs.", "AsyncEngineArgs."):
        message = f"{owner}__init__() got an unexpected keyword argument 'task'"
        assert ["task"] == [x.record.id for x in m.match(message, "TypeError")]
    assert [] == m.match("MyThing.__init__() got an unexpected keyword argument 'task'")
    bare = "__init__() got an unexpected keyword argument 'task'"
    assert [] == m.match(bare, "TypeError")
    framed = m.match(bare, "TypeError", files=["/venv/site-packages/vllm/entrypoints/llm.py"])
    assert ["task"] == [x.record.id for x in framed]


def test_a_check_macros_skeleton_is_claimed_only_through_its_library():
    """vLLM's mined ``CHECK_EQ({#a}, {#b}) failed. {a} vs {b}`` is the macro's definition, and
    flashinfer's macro prints the same words (vllm-project/vllm#7070): without a frame in vLLM
    the record does not match; with one it does, at its raise site's rank."""
    from errkb.registry import default_registry

    message = "RuntimeError: CHECK_EQ(paged_kv_indptr.size(0), batch_size + 1) failed. 1 vs 257"
    matcher = default_registry().matcher
    flashinfer = "/usr/lib/python3/site-packages/flashinfer/prefill.py"
    assert [] == [m.record.id for m in matcher.match(message, files=[flashinfer])]
    vllm = "/usr/lib/python3/site-packages/vllm/attention/backends/flashinfer.py"
    found = [m.record.id for m in matcher.match(message, files=[flashinfer, vllm])]
    assert found == ["mined-vllm-872c64612a6d"]


def test_ties_keep_the_registry_order_not_the_id_order():
    """Two records equal on every part rank in the order the registry holds them: an id says
    nothing of which is likelier."""
    m = _matcher(
        record_dict(id="zz-first", messagePattern="boom now"),
        record_dict(id="aa-second", messagePattern="boom now"),
    )
    assert ["zz-first", "aa-second"] == [x.record.id for x in m.match("boom now")]


def test_a_tie_goes_to_the_record_that_says_what_to_do():
    """Equal on every score part, the record with solutions ranks above the one without."""
    m = _matcher(
        record_dict(id="bare", messagePattern="boom now", solutions=[]),
        record_dict(id="helpful", messagePattern="boom now", solutions=["Do this."]),
    )
    assert ["helpful", "bare"] == [x.record.id for x in m.match("boom now")]


def test_a_tie_goes_to_the_record_still_raised():
    """Equal otherwise, a record the newest releases still raise ranks above one they stopped."""
    m = _matcher(
        record_dict(
            id="gone", messagePattern="boom now", versions={"distribution": "x", "last": "1.0"}
        ),
        record_dict(id="still", messagePattern="boom now", versions={"distribution": "x"}),
    )
    assert ["still", "gone"] == [x.record.id for x in m.match("boom now")]


def test_raise_site_in_the_innermost_frame_outranks_one_further_out():
    """Both files in the traceback: the one the exception was raised in scores higher."""
    m = _matcher(
        record_dict(id="outer", messagePattern="boom now", filePath="pkg/outer.py"),
        record_dict(id="inner", messagePattern="boom now", filePath="pkg/inner.py"),
    )
    files = ["/x/pkg/outer.py", "/x/pkg/inner.py"]
    found = m.match("boom now", files=files, raised_at=("/x/pkg/inner.py", "f"))
    assert ["inner", "outer"] == [x.record.id for x in found]
    assert [9.0, 6.0] == [x.site for x in found]


def test_a_file_of_versions_sites_is_the_records_raise_site():
    """A file where an older release raised it (versions.sites) counts as the record's own."""
    m = _matcher(
        record_dict(
            id="moved",
            messagePattern="boom now",
            filePath="pkg/new.py",
            versions={
                "distribution": "pkg",
                "sites": {"1.0": "pkg/old.py:3", "2.0": "pkg/new.py:9"},
            },
        )
    )
    [found] = m.match("boom now", files=["/x/pkg/old.py"], raised_at=("/x/pkg/old.py", "f"))
    assert 9.0 == found.site


@pytest.mark.parametrize(
    "file_path",
    ["src/pkg/inner.py", "bindings/python/py_src/pkg/inner.py", "pkg/inner.py"],
)
def test_a_repository_root_is_not_part_of_the_installed_path(file_path):
    """``src/`` (transformers, huggingface_hub, accelerate) and ``.../py_src/`` (safetensors,
    tokenizers) hold the package in the repository; an installed traceback shows no such root."""
    m = _matcher(record_dict(id="rooted", messagePattern="boom now", filePath=file_path))
    files = ["/venv/site-packages/pkg/inner.py"]
    [found] = m.match("boom now", files=files, raised_at=(files[0], "f"))
    assert 9.0 == found.site


def test_mined_record_at_the_raise_site_joins_the_hand_written_tier():
    """One library's words raised at two places: the frames name the mined one's file, so it
    ranks above the hand-written record of the other place; without frames it folds under it."""
    m = _matcher(
        record_dict(
            id="written", messagePattern="Target gone", filePath="lib/a.py", solutions=["x"]
        ),
        record_dict(
            id="mined-b",
            messagePattern="Target gone",
            filePath="lib/b.py",
            lineNumber=7,
            tags=["mined"],
        ),
    )
    framed = m.match(
        "Target gone", files=["/s/lib/a.py", "/s/lib/b.py"], raised_at=("/s/lib/b.py", "g")
    )
    assert ["mined-b", "written"] == [x.record.id for x in framed]
    [alone] = m.match("Target gone")
    assert "written" == alone.record.id
    assert ("lib/b.py:7",) == alone.also


def _sited(record_id, error_class, file, function):
    """A matcher of one record that names a raise site (and a message it never sees here)."""
    sites = [{"file": file, "function": function}]
    return _matcher(
        record_dict(
            id=record_id, messagePattern="not in it", errorClass=error_class, sitePatterns=sites
        )
    )


def test_site_pattern_matches_the_raise_site_when_the_message_does_not():
    """A bare AssertionError raised at a record's site pattern is that record's, by site."""
    m = _sited("checked", "AssertionError", "chat/core.py", "_infer")
    [found] = m.match(
        "", "AssertionError", files=["/x/chat/core.py"], raised_at=("/x/chat/core.py", "_infer")
    )
    assert ("checked", True) == (found.record.id, found.by_site)
    assert [] == m.match("", "AssertionError", raised_at=("/x/chat/core.py", "infer"))
    assert [] == m.match("", "KeyError", raised_at=("/x/chat/core.py", "_infer"))


def test_site_pattern_file_is_a_glob():
    """``*`` in a site's file stands for any characters: every model file of a folder."""
    m = _sited("loader", "KeyError", "lib/models/*.py", "load_weights")
    where = ("C:\\env\\lib\\models\\qwen2.py", "load_weights")
    assert ["loader"] == [
        x.record.id for x in m.match("'lm_head.weight'", "KeyError", raised_at=where)
    ]


def test_a_site_match_ranks_below_every_message_match():
    """A match of the message, even a mined one, outranks a match of the raise site alone."""
    m = _matcher(
        record_dict(
            id="by-site",
            messagePattern="never in the message",
            sitePatterns=[{"file": "lib/x.py", "function": "f"}],
        ),
        record_dict(id="mined-msg", messagePattern="real words here", tags=["mined"]),
    )
    found = m.match("real words here", raised_at=("/s/lib/x.py", "f"))
    assert [("mined-msg", False), ("by-site", True)] == [(x.record.id, x.by_site) for x in found]


# --- Whole searches skipped, folded matches left unmade (issue 25) ------------------------------

#: What a paste may put where a record's message has one space (a web page's no-break space too).
SPACES = (" ", "\n", "  ", " \n  ", "\t", "\xa0")


@given(
    st.sampled_from([text for r in SHIPPED for text in r.examples]),
    st.lists(st.sampled_from(SPACES), min_size=1, max_size=40),
    st.booleans(),
    st.floats(0.3, 1.0),
    st.booleans(),
)
def test_skipping_whole_searches_finds_what_searching_every_pattern_finds(
    text, spaces, ticks, kept, retail
):
    """Shipped records' own examples, wrapped, collapsed, without their backticks, cut short or
    with their last word changed: the indexed matcher, which searches a pattern whole only when
    the message holds the literals of its tail, finds what searching every pattern whole finds."""
    words = text.split(" ")
    text = "".join(w + spaces[i % len(spaces)] for i, w in enumerate(words[:-1])) + words[-1]
    text = text if ticks else text.replace("`", "")
    text = text[: max(1, int(len(text) * kept))]
    text = text.rsplit(" ", 1)[0] + " zzqx" if retail and " " in text else text
    naive = [(m.record.id, dict(m.captures), m.score) for m in NAIVE.match(text)]
    assert naive == [(m.record.id, dict(m.captures), m.score) for m in INDEXED.match(text)]


INDEXED, NAIVE = Matcher(SHIPPED), Matcher(SHIPPED, indexed=False)


def test_a_message_without_a_patterns_tail_is_not_searched_whole(monkeypatch):
    """vLLM's message cut before its advice holds the head of the record's pattern, not the
    rest: the record is found cut short, and its pattern is never searched whole."""
    import errkb.match

    searched = []
    real = errkb.match.search
    monkeypatch.setattr(
        errkb.match, "search", lambda c, *a: searched.append(c.pattern) or real(c, *a)
    )
    record = SHIPPED_BY_ID["vllm-kv-cache-max-seq-len"]
    cut = record.examples[0].partition(" Try increasing")[0] + " Try incr"
    [found] = Matcher([record]).match(cut)
    assert ("vllm-kv-cache-max-seq-len", {"max_model_len": 32768, "max_seq_len": 21344}) == (
        found.record.id,
        dict(found.captures),
    )
    assert [] == searched


def test_folded_mined_matches_keep_the_ranking_order_and_are_never_made(monkeypatch):
    """Two mined copies of a hand-written record's message fold under it, the more specific
    first, as the ranking orders them; their captures are never read (only the shown match's)."""
    import errkb.match

    read = []
    real = errkb.match._captures
    monkeypatch.setattr(errkb.match, "_captures", lambda hit: read.append(hit) or real(hit))
    # Read in this order, the less specific copy first.
    copies = (("a", r"(\w+) gone", 1), ("b", r"Target (\w+) gone", 2))
    m = _matcher(
        record_dict(id="written", messagePattern=r"Target (?P<t>\w+) gone", filePath="lib/w.py"),
        *(
            record_dict(
                id=f"mined-{name}",
                messagePattern=pattern,
                filePath=f"lib/{name}.py",
                lineNumber=line,
                tags=["mined"],
            )
            for name, pattern, line in copies
        ),
    )
    [found] = m.match("Target lm_head gone")
    assert ("written", ("lib/b.py:2", "lib/a.py:1"), {"t": "lm_head"}) == (
        found.record.id,
        found.also,
        dict(found.captures),
    )
    assert 1 == len(read)


def test_captures_are_typed_when_read_and_stand_for_a_dict():
    """A match's captures are typed on first reading (most matches are ranked, never read);
    they compare, print and pickle as the dict of typed groups."""
    import json
    import pickle

    registry = registry_from_dicts(
        [record_dict(id="n", messagePattern=r"blocks (?P<n>\d+) of (?P<size>[\d.]+) (\w+)")]
    )
    [match] = registry.matcher.match("blocks 12 of 0.5 GiB")
    expected = {"n": 12, "size": 0.5, 3: "GiB"}
    assert match.captures == expected
    assert dict(match.captures) == expected
    assert repr(match.captures) == repr(expected)
    assert pickle.loads(pickle.dumps(match.captures)) == expected
    assert json.dumps({str(k): v for k, v in match.captures.items()}) == json.dumps(
        {str(k): v for k, v in expected.items()}
    )


def test_a_builtin_class_spec_is_made_once_and_reads_each_records_level_once(monkeypatch):
    """A scan asks for ValueError's spec at every line that names it, and for the level of the
    same records again and again: both are kept, and give what a fresh reading gives."""
    import errkb.match

    spec = ClassSpec.of("ValueError")
    assert spec is ClassSpec.of(ValueError) is ClassSpec.of("builtins.ValueError")
    fresh = ClassSpec(mro=spec.mro, resolved=True)
    cases = [("ValueError", ()), ("Exception", ()), ("KeyError", ["ValueError"]), (None, ())]
    assert [spec.level(c, a) for c, a in cases] == [fresh.level(c, a) for c, a in cases]
    monkeypatch.setattr(errkb.match, "_relation", lambda *a: pytest.fail("read again"))
    assert [spec.level(c, a) for c, a in cases] == [fresh.level(c, tuple(a)) for c, a in cases]
