from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])


@pytest.mark.skipif(not (ROOT / "docs").is_dir(), reason="needs the source tree")
@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page):
    """Every relative link in the README and docs points at a file that exists."""
    broken = [
        target
        for target in LINK.findall(page.read_text(encoding="utf-8"))
        if "://" not in target and not (page.parent / target).exists()
    ]
    assert [] == broken


@pytest.mark.skipif(not (ROOT / "docs" / "errors").is_dir(), reason="needs the source tree")
def test_error_index_is_current():
    """docs/errors is what the generator makes from records/ (else run `nox -s docs -- --write`)."""
    from errkb._docgen import main

    assert 0 == main(["--check", "--records", str(ROOT / "records"), str(ROOT / "docs" / "errors")])


def test_record_prose_is_shown_not_read_as_markdown():
    """A ChatTTS prompt "[oral_2][laugh_0]" is no link, "<lib>" no tag; code spans stay."""
    from errkb._docgen import _md

    shown = _md("prompt '[oral_2][laugh_0]' needs <lib> *here*, see `x[0] < y`")
    assert shown == r"prompt '\[oral_2\]\[laugh_0\]' needs &lt;lib&gt; \*here\*, see `x[0] < y`"
