"""Rendering: untrusted text never reaches the terminal raw, with colour on or off."""

from __future__ import annotations

import io
import re
import textwrap

import attrs
import pytest
from helpers import SEED_MESSAGE
from hypothesis import given, settings
from hypothesis import strategies as st

import errkb
from errkb import Options
from errkb.render import render
from errkb.testing import FakeMeasurements, record_dict, registry_from_dicts

ATTACKS = {
    "csi": "\x1b[2J\x1b[31m",
    "osc8": "\x1b]8;;https://evil.example\x07click\x1b]8;;\x07",
    "osc52": "\x1b]52;c;cm0gLXJmIC8=\x07",
    "bel": "\x07",
    "cr": "\roverwrite",
    "backspace": "abc\x08\x08\x08",
    "bidi": "\u202egnp.exe",
    "c1-csi": "\x9b31m",
}
RAW = [b"\x1b", b"\x07", b"\r", b"\x08", "\u202e".encode(), "\x9b".encode()]
EVIL = "".join(ATTACKS.values()) + " [bold red]markup[/bold red]"


_SGR = re.compile(rb"\x1b\[[0-9;]*m")


def _assert_nothing_raw(raw: bytes, color: bool) -> None:
    """No attack byte is in the output; with colour, only errkb's own SGR codes carry an ESC."""
    assert b"\x1b[2J\x1b[31m" not in raw  # the attack's own CSI pair, verbatim
    assert b"\\x1b[2J" in raw  # ... shown escaped instead
    if color:
        raw = _SGR.sub(b"", raw)
    for seq in RAW:
        assert seq not in raw, seq


def _registry():
    return registry_from_dicts(
        [
            record_dict(
                id="acme-evil",
                slug="evil",
                title="title " + EVIL,
                messagePattern=r"boom (?P<what>.+)",
                documentation="doc " + EVIL,
                commonSituations="situations " + EVIL,
                solutions=["solution " + EVIL],
                exampleFix="# before\nx = 1\n# after\nx = 2  " + EVIL,
                filePath="acme/" + EVIL,
                githubUrl="https://example.invalid/" + EVIL,
            )
        ]
    )


@pytest.mark.parametrize("color", [False, True])
def test_hostile_message_and_record_fields_are_escaped(color):
    """Escapes in the message (captures) and in every record field come out escaped."""
    diagnosis = errkb.explain("boom " + EVIL, registry=_registry())
    out = io.StringIO()
    render(diagnosis, Options(file=out, color=color, width=100))
    _assert_nothing_raw(out.getvalue().encode(), color)
    text = out.getvalue()
    assert "\\x1b]52;c;cm0gLXJmIC8=\\x07" in text  # shown escaped, readable
    assert "[bold red]markup[/bold red]" in text  # shown as text, not interpreted


@pytest.mark.parametrize("color", [False, True])
def test_hostile_frame_values_are_escaped(tmp_path, color):
    """Escapes in the user's source (shown in the rewritten call) and in engine values."""
    app = tmp_path / "app.py"
    app.write_text(
        textwrap.dedent(
            f"""
            class CacheConfig:
                block_size = 16
                gpu_memory_utilization = 0.5
                cache_dtype = {EVIL!r}
                num_gpu_blocks = 768


            class LLM:
                def __init__(self, model, max_model_len):
                    self.cache_config = CacheConfig()
                    raise ValueError({SEED_MESSAGE!r})


            def start():
                return LLM(model="{EVIL.encode("unicode_escape").decode()}", max_model_len=32768)
            """
        )
        .replace("\\x1b", "\x1b")
        .replace("\\x07", "\x07")
    )
    namespace: dict = {}
    exec(compile(app.read_text(), str(app), "exec"), namespace)
    try:
        namespace["start"]()
    except ValueError as exc:
        diagnosis = errkb.diagnose(exc, options=Options(measurements=FakeMeasurements(gpus=[])))
    out = io.StringIO()
    render(diagnosis, Options(file=out, color=color, width=120))
    raw = out.getvalue().encode()
    assert f"Example fix ({app}:".encode() in raw
    _assert_nothing_raw(raw, color)


def test_plain_render_into_a_string_console():
    """The plain form at width 100: heading, the fix, the record id, a rule of box characters."""
    diagnosis = errkb.explain(SEED_MESSAGE)
    out = io.StringIO()
    render(diagnosis, Options(file=out, color=False, width=100, probes=False))
    text = out.getvalue()
    assert text.startswith("\u2500" * 100 + "\nerrkb: ")
    assert (
        "more: errkb show vllm-kv-cache-max-seq-len | matched a message (exception 1 of 1)" in text
    )
    assert "\nFix: Lower max_model_len " in text


def test_ascii_fallback_has_no_box_characters():
    """ascii=True (a terminal without box characters): plain ASCII rules and borders."""
    diagnosis = errkb.explain(SEED_MESSAGE)
    for color in (False, True):
        out = io.StringIO()
        render(diagnosis, Options(file=out, color=color, ascii=True, width=100, probes=False))
        assert all(ord(ch) < 128 for ch in out.getvalue()), color


def _chain_diagnosis():
    registry = registry_from_dicts(
        [
            record_dict(id="gear-slipped", title="The gear slipped", messagePattern="gear slipped"),
            record_dict(id="belt-torn", title="The belt tore", messagePattern="belt torn"),
            record_dict(
                id="machine-wrapper",
                title="The machine stopped (see above)",
                messagePattern="machine stopped, see above",
                tags=["wrapper-error"],
            ),
        ]
    )
    try:
        try:
            try:
                raise ValueError("gear slipped")
            except ValueError as exc:
                raise RuntimeError("belt torn") from exc
        except RuntimeError as exc:
            raise RuntimeError("machine stopped, see above") from exc
    except RuntimeError as exc:
        return errkb.diagnose(exc, registry=registry, options=Options(probes=False))


def test_one_failure_is_one_block_with_what_it_led_to_and_its_wrapper_as_lines():
    """A chain is one failure: the root cause's block, then one line for each later exception."""
    from errkb.render import render_plain

    text = render_plain(_chain_diagnosis(), 100)
    assert ["errkb: The gear slipped [error]"] == [
        line for line in text.splitlines() if line.startswith("errkb: ") and "note:" not in line
    ]
    assert text.index("The gear slipped") < text.index("Which led to")
    assert "  - The belt tore  (belt-torn)" in text
    assert "Reported again by\n  - The machine stopped (see above)  (machine-wrapper)" in text
    assert "more: errkb show gear-slipped" in text
    assert "errkb show belt-torn" not in text  # no block (closing line) of its own


# -- the short form: the fix first, within the budget, no line wider than the terminal --------

_SGR_TEXT = re.compile(r"\x1b\[[0-9;]*m")


def _seed(model=None):
    given = {"model": str(model), "gpu_memory_bytes": 24 * 2**30} if model else {}
    diagnosis = errkb.explain(SEED_MESSAGE, options=Options(probes=False, given=given))
    # Notes about plugins other tests left installed are not this diagnosis' own.
    return attrs.evolve(diagnosis, notes=tuple(n for n in diagnosis.notes if "plugin" not in n))


def _shown(diagnosis, width, *, color=False, detail="short"):
    """The rendered lines, colour codes taken out."""
    out = io.StringIO()
    render(diagnosis, Options(file=out, color=color, width=width, detail=detail))
    return _SGR_TEXT.sub("", out.getvalue()).splitlines()


@pytest.mark.parametrize("with_model", [False, True])
def test_the_seeds_diagnosis_fits_in_30_lines_at_100_columns(llama_dir, with_model):
    """The whole short form, note included, is at most 30 lines, with or without a model."""
    lines = _shown(_seed(llama_dir if with_model else None), 100)
    assert len(lines) <= 30, "\n".join(lines)


@pytest.mark.parametrize("with_model", [False, True])
def test_the_fix_is_within_the_first_12_lines(llama_dir, with_model):
    """The computed fix, with its numbers, is the third line; the rewritten call follows it."""
    lines = _shown(_seed(llama_dir if with_model else None), 100)
    fix = next(i for i, line in enumerate(lines, 1) if line.startswith("Fix: "))
    assert 3 == fix
    assert lines[fix - 1].startswith("Fix: Lower max_model_len from 32768 to 12288")
    assert "max_model_len=12288)" in "\n".join(lines[:12])


def _wide_diagnoses(llama_dir):
    return [_seed(llama_dir), _seed(), _chain_diagnosis(), errkb.explain(_MAT1)]


@pytest.mark.parametrize("width", [60, 80, 100, 120])
@pytest.mark.parametrize("color", [False, True])
@pytest.mark.parametrize("detail", ["short", "long"])
def test_no_line_is_wider_than_the_terminal(llama_dir, width, color, detail):
    """Plain and rich, short and long, at 60 to 120 columns: every line fits, code included."""
    from rich.cells import cell_len

    for diagnosis in _wide_diagnoses(llama_dir):
        lines = _shown(diagnosis, width, color=color, detail=detail)
        too_wide = [line for line in lines if cell_len(line) > width]
        assert [] == too_wide


def test_a_long_code_line_continues_with_a_backslash_and_still_compiles():
    """The example fix's code is wrapped with Python's line continuation, never cut."""
    from errkb.render._document import wrap_code

    line = (
        '    llm = LLM(model="meta-llama/Llama-3.1-8B-Instruct", gpu_memory_utilization=0.9, x=1)'
    )
    lines = wrap_code(line, 60)
    assert all(len(part) <= 60 for part in lines)
    assert lines[0].endswith(" \\")
    assert '"meta-llama/Llama-3.1-8B-Instruct"' in "\n".join(lines)  # no break inside a string
    compile("if True:\n" + "\n".join(lines), "<fix>", "exec")


def test_a_record_solution_about_computed_settings_is_merged_into_the_computed_one():
    """The record's "Cap the context: pass max_model_len" goes when errkb computed the length;
    the long form and the JSON keep it."""
    diagnosis = _seed()
    cap = "Cap the context: pass max_model_len"
    assert cap not in "\n".join(_shown(diagnosis, 100))
    assert cap in " ".join(" ".join(_shown(diagnosis, 100, detail="long")).split())
    assert any(s.text.startswith(cap) for s in diagnosis.top.solutions)
    assert "Give the cache more memory" in "\n".join(_shown(diagnosis, 100))  # another setting


def test_merging_drops_only_solutions_naming_nothing_but_computed_settings():
    """A solution naming a setting errkb did not compute, or none at all, stays."""
    from errkb.findings import Solution
    from errkb.render._document import short_solutions

    computed = Solution(text="Lower max_model_len to 12288.", settings={"max_model_len": 12288})
    same = Solution(text="Pass --max-model-len below the capacity.")
    other = Solution(text="Lower max_model_len or raise gpu_memory_utilization.")
    plain = Solution(text="Free the GPU.")
    assert (computed, other, plain) == short_solutions((computed, same, other, plain))
    # The diagnosis' order stands: an advisor that placed its solution after the record's own
    # keeps the record's first solution first.
    assert (other, plain, computed) == short_solutions((same, other, plain, computed))


_MAT1 = "RuntimeError: mat1 and mat2 shapes cannot be multiplied (4x2048 and 512x10)"


def test_captures_are_filled_into_the_fix():
    """The mat1/mat2 record's fix names the numbers of the message, not the names of captures."""
    lines = _shown(errkb.explain(_MAT1), 100)
    assert lines[2].startswith("Fix: Set the Linear layer's in_features=2048 ")
    assert "{mat1_cols}" not in "\n".join(lines)


def test_a_finding_without_facts_shows_its_captures_as_facts():
    """No advisor: the message's captures are the facts the solutions rest on.

    The shipped record names the releases that raise it, which makes the installed torch a fact;
    without ``versions`` (as in a dataset record) the captures are the only facts left.
    """
    from errkb.registry import default_registry

    shipped = default_registry().get("torch-mat1-mat2-shapes-cannot-be-multiplied").to_json()
    shipped["versions"] = None
    registry = registry_from_dicts([shipped])
    assert "  message: mat1_rows = 4; mat1_cols = 2048; mat2_rows = 512; mat2_cols = 10" in (
        _shown(errkb.explain(_MAT1, registry=registry), 100)
    )


def test_a_wrapper_is_one_line_of_its_root_causes_block_however_long_its_title():
    """The wrapper of a chain is one line under the root cause's block, even at 60 columns."""
    lines = _shown(_chain_diagnosis(), 60)
    at = lines.index("Reported again by")
    assert lines[at + 1].startswith("  - The machine stopped")
    assert lines[at + 1].endswith("(machine-wrapper)")
    assert lines[at + 2].startswith("\u2500")  # the closing rule: nothing more of the wrapper
    assert 1 == sum(line.startswith("errkb: ") and "note:" not in line for line in lines)


def test_the_long_form_adds_the_prose_and_the_short_form_leaves_it_out():
    """What happened, History, Likely situations, Upstream, Also matched: --long only."""
    short = "\n".join(_shown(_seed(), 100))
    long = "\n".join(_shown(_seed(), 100, detail="long"))
    for heading in ("What happened", "History", "Likely situations", "Upstream", "Also matched"):
        assert f"\n{heading}\n" in long, heading
        assert f"\n{heading}\n" not in short, heading


def test_the_short_form_order():
    """Title, fix, rewritten call, why, facts, other solutions, the record's id last."""
    lines = _shown(_seed(), 100)
    starts = [
        "errkb: ",
        "Fix: ",
        "Example fix",
        "Why: ",
        "Facts",
        "Other solutions",
        "\u2500\u2500 more",
    ]
    found = [next(i for i, line in enumerate(lines) if line.startswith(s)) for s in starts]
    assert sorted(found) == found


def test_html_follows_the_same_order():
    """The notebook's HTML shows the short form in the terminal's order."""
    from errkb.render import render_html

    html = render_html(_seed())
    marks = ["<strong>Fix</strong>", "<strong>Example fix", "<strong>Why</strong>", "<strong>Facts"]
    found = [html.index(m) for m in [*marks, "<strong>Other solutions"]]
    assert sorted(found) == found
    assert "What happened" not in html
    assert "What happened" in render_html(_seed(), detail="long")


def test_detail_must_be_short_or_long():
    """Options(detail=...) is checked when the options are made."""
    with pytest.raises(ValueError, match="detail"):
        Options(detail="medium")


def test_long_calls_fold_one_argument_a_line_never_with_a_backslash():
    """At narrow widths a call is folded as a formatter would fold it, and still parses."""
    import ast

    from errkb.render._document import fold_code

    code = 'llm = LLM(model="meta-llama/Llama-3.1-8B-Instruct", gpu_memory_utilization=0.9,\n          max_model_len=12288)'
    folded = fold_code(code, 50)
    assert folded == [
        "llm = LLM(",
        '    model="meta-llama/Llama-3.1-8B-Instruct",',
        "    gpu_memory_utilization=0.9,",
        "    max_model_len=12288,",
        ")",
    ]
    assert not any(line.endswith("\\") for line in folded)
    ast.parse("\n".join(folded))
    # Non-ASCII text keeps its place (ast's columns are bytes); **kwargs and a tail stay.
    code = 'x = make("naïve café façade", **options).run()'
    assert fold_code(code, 30) == [
        "x = make(",
        '    "naïve café façade",',
        "    **options,",
        ").run()",
    ]
    # A call with a comment inside, and a shell command, are broken with a continuation.
    commented = "f(aaaaaaaaaa,  # keep me\n  bbbbbbbbbbbbbbbbbbbb)"
    assert any(line.endswith("\\") for line in fold_code(commented, 20))
    shell = "vllm serve Qwen/Qwen2.5-14B-Instruct --gpu-memory-utilization 0.9"
    assert fold_code(shell, 40)[0].endswith("\\")
    assert fold_code("short = 1", 40) == ["short = 1"]


def _fit_by_trying_each_cut(text, width, lines, lead="", *, tail="", ascii_only=False):
    """fit() as it was written first: every sentence cut tried from the longest, then words."""
    from errkb.render._document import _SENTENCE_END, wrap

    wrapped = wrap(f"{text}  {tail}" if tail else text, width, lead)
    if len(wrapped) <= lines:
        return wrapped
    for end in reversed([m.start() for m in _SENTENCE_END.finditer(text)]):
        shorter = wrap(f"{text[:end]}  {tail}" if tail else text[:end], width, lead)
        if len(shorter) <= lines:
            return shorter
    mark = "..." if ascii_only else "\u2026"
    ending = f"{mark} {tail}" if tail else mark
    words = text.split(" ")
    while len(words) > 1 and len(wrap(" ".join(words) + ending, width, lead)) > lines:
        words.pop()
    kept = wrap(" ".join(words) + ending, width, lead)
    if len(kept) > lines:
        kept = kept[:lines]
        kept[-1] = kept[-1][: width - len(mark)] + mark
    return kept


_WORDS = st.sampled_from(
    ["Lower", "the", "length", "from", "32768", "to", "12288.", "It", "fits", "(now).", "A",
     "gpu_memory_utilization=0.95", "https://docs.vllm.ai/en/latest/serving/engine_args.html",
     "`max_model_len`", "is", "larger", "than", "what", "fits.", "Use", "fp8!", "OK?", "x" * 30,
     # what wrapping drops or keeps: a double space, a tab, a line break, glue, no-break space
     "", "a\tb", "line\nbreak", "glued\x1fwords", "no\u00a0break"]
)  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_WORDS, min_size=1, max_size=40).map(" ".join),
    st.integers(min_value=10, max_value=100),
    st.integers(min_value=1, max_value=5),
    st.sampled_from(["", "  ", "- "]),
    st.sampled_from(["", "[n=1]", "(see above)"]),
)
def test_fit_cuts_where_trying_every_cut_from_the_longest_would(text, width, lines, lead, tail):
    """fit() finds its cut by bisection (a longer text never wraps into fewer lines): the
    lines are those of trying each sentence cut, then each word cut, from the longest."""
    from errkb.render._document import fit

    for ascii_only in (False, True):
        expected = _fit_by_trying_each_cut(
            text, width, lines, lead, tail=tail, ascii_only=ascii_only
        )
        assert expected == fit(text, width, lines, lead, tail=tail, ascii_only=ascii_only)
