"""Markdown diagnoses: the fix first, and nothing pasted or recorded can become markup.

The output is rendered to HTML by a real CommonMark parser (markdown-it-py, which rich brings)
with raw HTML allowed, as GitHub's renderer would see it before its own sanitizer: no tag,
attribute or link of the hostile text may come out.
"""

from __future__ import annotations

import re

import pytest
from helpers import SEED_MESSAGE
from markdown_it import MarkdownIt

import errkb
from errkb import Options
from errkb.render import render_markdown, render_record_markdown
from errkb.render._markdown import code_block, escape_markdown
from errkb.testing import record_dict, registry_from_dicts

HOSTILE = (
    "<script>alert(1)</script> <img src=x onerror=alert(2)> [click](javascript:alert(3)) "
    "![i](javascript:alert(4)) <javascript:alert(5)> *em* _em_ **b** # h @team #12 "
    "&lt;b&gt; <!-- c --> | a | b | ~~s~~"
)
FENCE_BREAKER = "````\n</pre><script>alert(6)</script>\n```"


def _html(markdown: str) -> str:
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def _hostile_registry():
    return registry_from_dicts(
        [
            record_dict(
                id="evil-record",
                title=f"Title {HOSTILE}",
                documentation=f"Docs {HOSTILE}",
                solutions=[f"Solution {HOSTILE}", "Second <b>bold</b>"],
                exampleFix=f"fix()  # {FENCE_BREAKER}",
                messagePattern=r"Something failed \((?P<x>\d+)\)\..*",
            )
        ]
    )


def test_a_hostile_paste_and_record_render_as_text_never_as_markup():
    registry = _hostile_registry()
    diagnosis = errkb.explain(
        f"Something failed (3). {HOSTILE}\n{FENCE_BREAKER}",
        options=Options(probes=False),
        registry=registry,
    )
    assert diagnosis is not None
    for detail in ("short", "long"):
        markdown = render_markdown(diagnosis, detail=detail)
        html = _html(markdown)
        assert "<script" not in html
        assert "<img" not in html
        assert 'href="javascript' not in html
        assert "<em>em</em>" not in html
        assert "<strong>b</strong>" not in html
        assert "<!--" not in html
        assert "<table" not in html
        assert "<h1>" not in html
        assert "<b>" not in html
        # The text is still all there, for a reader: escaped, not dropped.
        assert "alert(1)" in html
        assert "&lt;script&gt;" in html
        # What sits in a fenced block stays in it: the fence outlasts the pasted backticks.
        assert "</pre><script>" not in html


def test_the_record_alone_renders_inert_too():
    record = _hostile_registry().get("evil-record")
    html = _html(render_record_markdown(record))
    assert "<script" not in html
    assert "<img" not in html
    assert 'href="javascript' not in html
    assert "Title" in html


def test_the_fix_comes_first_then_the_facts_with_their_sources():
    diagnosis = errkb.explain(
        SEED_MESSAGE, options=Options(probes=False, given={"gpu_memory_bytes": 24 * 2**30})
    )
    assert diagnosis is not None
    markdown = render_markdown(diagnosis)
    fix, facts = markdown.index("**Fix**"), markdown.index("**Facts**")
    example = markdown.index("**Example fix")
    assert fix < example < facts
    assert markdown.index("**Other solutions**") > facts
    # The fix names its numbers as the record's settings do, and the facts their sources.
    assert "12288" in markdown[fix:example]
    assert "- given: gpu_memory_total = 24 GiB" in markdown
    assert "- message: " in markdown
    # The example fix is a fenced block a reader can copy.
    block = re.search(r"^(`{3,})\n(.*?)\n\1$", markdown, re.MULTILINE | re.DOTALL)
    assert block is not None
    assert "max_model_len=12288" in block.group(2)


@pytest.mark.parametrize(
    ("code", "fence"),
    [("plain", "```"), ("a ``` b", "````"), ("`````", "``````"), ("x`y", "```")],
)
def test_a_fence_is_longer_than_any_run_of_backticks_inside(code, fence):
    block = code_block(code)
    assert block == f"{fence}\n{code}\n{fence}"
    html = _html(block + "\n\nafter")
    assert "<p>after</p>" in html  # the block closed where it should, not before


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("max_model_len", "max_model_len"),  # an underscore inside a word opens nothing
        ("_x_", "\\_x\\_"),
        ("1. first", "1\\. first"),
        ("- item", "\\- item"),
        ("a\nb", "a b"),
        ("@team", "\\@team"),
    ],
)
def test_escaping_keeps_identifiers_readable(text, shown):
    assert escape_markdown(text) == shown
    assert "<ol>" not in _html(escape_markdown(text))
    assert "<ul>" not in _html(escape_markdown(text))


def test_markdown_never_cuts_a_solution():
    """Issue 22: a comment is read in full, so every solution is whole (the terminal's first
    screen cuts the other solutions to a line each; Markdown and JSON do not)."""
    d = errkb.explain(SEED_MESSAGE, options=Options(probes=False))
    markdown = render_markdown(d)
    assert "\u2026" not in markdown
    assert "..." not in markdown.replace("...)", "")
    whole = {escape_markdown(s["text"]) for s in d.to_dict()["solutions"]}
    others = markdown.split("**Other solutions**", 1)[1].split("\n\n*more", 1)[0]
    shown = [line[2:] for line in others.splitlines() if line.startswith("- ")]
    assert len(shown) >= 3
    assert set(shown) <= whole  # each one whole, as the record and the advisor wrote it
