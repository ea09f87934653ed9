"""The fleet's Markdown report: a table a ticket shows as a table, whatever the logs held.

The output is rendered by a real CommonMark parser with GitHub's tables (markdown-it-py, which
rich brings), raw HTML allowed, as GitHub's renderer sees it before its own sanitizer. The
cells are read back with the standard library's HTML parser and compared with the result.
"""

from __future__ import annotations

import html.parser

import pytest
from fleet_results import (
    HOSTILE_HOST,
    HOSTILE_PREFIX,
    HOSTILE_SHAPE,
    Event,
    fleet_events,
    fleet_result,
    one_of_everything,
    scanned_result,
)
from helpers import SEED_MESSAGE
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from errkb.fleet._markdown import EXAMPLE, markdown
from errkb.fleet._state import running
from errkb.fleet._summary import shown

#: The elements the report's own Markdown renders to: anything else came from the text.
REPORT_TAGS = {"h3", "p", "table", "thead", "tbody", "tr", "th", "td", "ul", "li", "strong", "em"}
FAILED = {
    "s3://logs/node-9/app.log.gz": "truncated gzip | `EOF` <b>",
    "/var/log/node-8/app.log": "permission denied",
}


class _Tables(html.parser.HTMLParser):
    """The text of every cell of every table, and every tag that is not part of a table."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self.tags: list[str] = []
        self.text: list[str] = []
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append("".join(self._cell))
            self._cell = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


def _rendered(text: str) -> _Tables:
    parsed = _Tables()
    parsed.feed(MarkdownIt("commonmark", {"html": True}).enable("table").render(text))
    return parsed


@pytest.fixture(scope="module")
def result() -> dict:
    return fleet_result(fleet_events(), failed=FAILED)


def test_each_error_is_one_row_of_seven_cells_with_its_figures(result):
    """Hostile pipes and backticks split no cell; the counts and hosts are the result's."""
    errors, _ = _rendered(markdown(result)).tables
    header, *rows = errors
    assert [
        "Count",
        "Error",
        "First seen (UTC)",
        "Last seen (UTC)",
        "Hosts",
        "Example",
        "Fix",
    ] == header
    assert [7] * len(result["groups"]) == [len(r) for r in rows]
    assert [f"{g['count']:,}" for g in result["groups"]] == [r[0] for r in rows]
    assert [f"{g['title']} ({g['id']})" for g in result["groups"]] == [r[1] for r in rows]
    assert [g["fix"] for g in result["groups"]] == [r[6] for r in rows]


def test_hostile_text_shows_as_itself_and_never_as_markup(result):
    """A host and a log prefix full of markup come out as their own text: no tag, no code."""
    text = markdown(result)
    parsed = _rendered(text)
    assert set(parsed.tags) <= REPORT_TAGS
    seen = "".join(parsed.text)
    assert f"{HOSTILE_HOST} (4)" in seen
    assert HOSTILE_PREFIX[: EXAMPLE - 1] in seen
    assert HOSTILE_SHAPE.split("(1)")[0] in result["unknown"][0]["shape"]
    assert result["unknown"][0]["shape"] in seen
    assert "truncated gzip | `EOF` <b>" in seen


def test_an_example_is_cut_to_fit_a_cell():
    """A long example line is cut at EXAMPLE characters, its cut marked."""
    line = f"ValueError: {SEED_MESSAGE}"
    errors, *_ = _rendered(markdown(fleet_result([Event("n", None, line)]))).tables
    example = errors[1][5]
    assert EXAMPLE == len(example)
    assert line.startswith(example.removesuffix("…"))


def test_long_lists_are_cut_and_say_what_was_left_out(result):
    """With top=1 only the first failed source and shape show, and the rest are counted."""
    text = markdown(result, top=1, kinds=2)
    shown = "".join(_rendered(text).text)
    left = result["groups"][2:]
    assert (
        f"Not shown: 1 of 3 known error kinds ({sum(g['count'] for g in left):,} errors)" in shown
    )
    assert "Not shown: 1 of 2 failed sources;" in shown
    assert "/var/log/node-8/app.log" not in shown
    rest = result["unknown"][1:]
    assert (
        f"Not shown: {len(rest)} of {len(result['unknown'])} shapes ({sum(u['count'] for u in rest)} lines)"
        in shown
    )


def test_a_clean_run_says_it_found_nothing():
    """No group, no failed source, no unknown shape: one line says so, and no table is drawn."""
    parsed = _rendered(markdown(fleet_result([Event("n", None, "INFO all good")])))
    assert [] == parsed.tables
    assert "No known error was found." in "".join(parsed.text)


def test_the_real_scans_result_names_its_hosts():
    """What scan_part and merge give: its count, and the host a log's path did not name."""
    errors, *_ = _rendered(markdown(scanned_result())).tables
    assert [["3", "node-a (2), (no host) (1)"]] == [[r[0], r[4]] for r in errors[1:]]


def test_a_run_with_a_state_adds_the_totals_of_all_runs(result):
    """With --state's running totals, an All runs column gives each error's total."""
    twice = {**result, "running": running(running(None, result), result)}
    errors, *_ = _rendered(markdown(twice)).tables
    assert ["Count", "All runs", "Error"] == errors[0][:3]
    assert [[f"{g['count']:,}", f"{2 * g['count']:,}"] for g in result["groups"]] == [
        r[:2] for r in errors[1:]
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.text(
        alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("\n\tÄß€"),
        max_size=60,
    )
)
def test_any_text_stays_in_its_cell_as_itself(text):
    """Whatever a log line holds, each table keeps its cells, no markup comes out, and the Fix
    cell shows the text: cleaned, its line ends as spaces."""
    parsed = _rendered(markdown(one_of_everything(text)))
    assert set(parsed.tags) <= REPORT_TAGS
    errors, shapes = parsed.tables
    assert [7, 7] == [len(r) for r in errors]
    assert [3, 3] == [len(r) for r in shapes]
    flat = " ".join(shown(text).split("\n")).strip()
    assert (flat if text else "-") == errors[1][6]
