"""The fleet's HTML report: one page that needs nothing else, whose figures are the result's,
and whose text from logs stays text.

Results are built from log events (tests/fleet_results.py), so every figure the page shows is
checked against what the events add up to. The page is read back with the standard library's
HTML parser, as a browser's tokenizer would read it.
"""

from __future__ import annotations

import base64
import hashlib
import html.parser
import re
from collections import Counter
from pathlib import Path

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
from helpers import NO_BLOCKS_MESSAGE, SEED_MESSAGE
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from errkb.fleet._html import COLOURS, MAX_BARS, MAX_SHAPES, write_html
from errkb.fleet._state import running
from errkb.fleet._summary import shown

FAILED = {"s3://logs/node-9/app.log.gz": "truncated gzip: Compressed file ended early"}


class _Page(html.parser.HTMLParser):
    """Every element's tag and attributes, the text of each <script> and <style>, the text of
    each table's cells, and each timeline's bars (its label, and each bar's box and title)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.raw: dict[str, list[str]] = {"script": [], "style": []}
        self.bars: list[dict[str, str]] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.text: list[str] = []
        self._open: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._chart: str | None = None

    def handle_starttag(self, tag, attrs):
        found = dict(attrs)
        self.elements.append((tag, found))
        if tag in ("script", "style"):
            self._open.append(tag)
            self.raw[tag].append("")
        if tag == "svg" and found.get("class") == "timeline":
            self._chart = found.get("aria-label") or ""
        if tag == "rect" and self._chart is not None:
            self.bars.append({"chart": self._chart, "title": "", **found})
        if tag == "title" and self._chart is not None:
            self._open.append(tag)
        if tag == "table":
            self._table = found.get("id") or ""
            self.tables[self._table] = []
        if tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        if tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if self._open and self._open[-1] == tag:
            self._open.pop()
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        if tag == "table":
            self._table = None
        if tag == "svg":
            self._chart = None

    def handle_data(self, data):
        self.text.append(data)
        if self._open and self._open[-1] == "title":
            self.bars[-1]["title"] += data
        elif self._open:
            self.raw[self._open[-1]][-1] += data
        if self._cell is not None:
            self._cell.append(data)


def _page(tmp_path: Path, result: dict) -> tuple[str, _Page]:
    path = tmp_path / "fleet.html"
    write_html(result, path)
    source = path.read_text(encoding="utf-8")
    parsed = _Page()
    parsed.feed(source)
    return source, parsed


@pytest.fixture(scope="module")
def events() -> list[Event]:
    return fleet_events()


@pytest.fixture(scope="module")
def result(events) -> dict:
    return fleet_result(events, failed=FAILED)


def _csp(page: _Page) -> str:
    (meta,) = [a for t, a in page.elements if t == "meta" and a.get("http-equiv")]
    assert "Content-Security-Policy" == meta["http-equiv"]
    return meta["content"] or ""


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_policy_allows_nothing_but_the_pages_own_script_and_style(tmp_path, result):
    """default-src 'none', and the one script and style sheet allowed by their hashes."""
    _, page = _page(tmp_path, result)
    directives = dict(d.strip().split(" ", 1) for d in _csp(page).split(";"))
    assert "'none'" == directives["default-src"]
    assert [_sha256(s) for s in page.raw["script"]] == [directives["script-src"]]
    assert [_sha256(s) for s in page.raw["style"]] == [directives["style-src"]]
    assert "'none'" == directives["base-uri"]


def test_nothing_on_the_page_fetches_or_runs_anything(tmp_path, result):
    """No src, href to elsewhere, inline handler, style attribute, or script but the page's."""
    _, page = _page(tmp_path, result)
    attributes = [(t, k, v) for t, a in page.elements for k, v in a.items()]
    assert [] == [a for a in attributes if a[1].startswith("on") or a[1] in ("src", "style")]
    assert [] == [a for a in attributes if a[1] == "href" and not (a[2] or "").startswith("#")]
    assert ["script"] == [t for t, _ in page.elements if t in ("script", "img", "iframe", "link")]


def test_hostile_text_from_logs_shows_as_itself(tmp_path, result):
    """A host, a log prefix and a shape full of markup are on the page as text, whole."""
    source, page = _page(tmp_path, result)
    text = "".join(page.text)
    assert HOSTILE_HOST in text
    assert HOSTILE_PREFIX in text
    assert HOSTILE_SHAPE.split("(1)")[0] in result["unknown"][0]["shape"]
    assert result["unknown"][0]["shape"] in text
    assert "</script><img" not in source
    assert 1 == source.count("<script>")


def test_the_errors_table_has_each_errors_figures(tmp_path, events, result):
    """Counts, first and last times and the number of hosts are those the events add up to."""
    _, page = _page(tmp_path, result)
    header, *rows = page.tables["errors-table"]
    assert ["Count", "Error", "Severity"] == header[:3]
    expected = []
    for g in result["groups"]:
        mine = [e for e in events if _same_record(e, g)]
        times = sorted(e.time for e in mine if e.time)
        expected.append(
            [
                f"{len(mine):,}",
                times[0].replace("T", " ").rstrip("Z"),
                times[-1].replace("T", " ").rstrip("Z"),
                str(len({e.host for e in mine})),
            ]
        )
    assert expected == [[r[0], r[3], r[4], r[5]] for r in rows]


def _same_record(event: Event, group: dict) -> bool:
    known = {
        "vllm-kv-cache-max-seq-len": SEED_MESSAGE,
        "vllm-no-cache-blocks": NO_BLOCKS_MESSAGE,
        "torch-cuda-out-of-memory": "CUDA out of memory.",
    }
    return known[group["id"]] in event.line


def test_each_timeline_draws_every_timed_line_once(tmp_path, events, result):
    """The bars' titles of an error add up to its lines that had a time, host by host."""
    _, page = _page(tmp_path, result)
    for g in result["groups"]:
        timed = Counter(e.host for e in events if e.time and _same_record(e, g))
        drawn: Counter[str] = Counter()
        for bar in _bars(page, g["id"]):
            _, host, count = re.fullmatch(r"(.+? UTC): (.+): ([\d,]+)", bar["title"]).groups()
            drawn[host] += int(count.replace(",", ""))
        assert dict(timed) == dict(drawn)


def _bars(page: _Page, rid: str) -> list[dict[str, str]]:
    return [b for b in page.bars if b["chart"].startswith(f"{rid}:")]


def test_the_tallest_stack_fills_the_chart_and_the_rest_are_in_proportion(tmp_path, result):
    """A stack's height over its count is the same for every stack of a chart."""
    _, page = _page(tmp_path, result)
    for g in result["groups"]:
        stacks: dict[str, list[float]] = {}
        for bar in _bars(page, g["id"]):
            count = int(bar["title"].rpartition(": ")[2].replace(",", ""))
            stack = stacks.setdefault(bar["x"], [0.0, 0])
            stack[0] += float(bar["height"])
            stack[1] += count
        top = max(count for _, count in stacks.values())
        per_line = {round(height / count, 6) for height, count in stacks.values()}
        assert 1 == len(per_line)
        plot_height = 150 - 8 - 26  # the viewBox's height less its top and bottom margins
        assert plot_height / top == pytest.approx(per_line.pop(), abs=1e-4)


def test_a_long_span_is_binned_into_at_most_max_bars(tmp_path):
    """Sixty days of hourly lines are drawn in at most MAX_BARS bars, and the page says how wide."""
    events = [
        Event(
            "node-0",
            f"2026-{10 + day // 30:02d}-{1 + day % 30:02d}T{hour:02d}:00:00Z",
            f"ValueError: {SEED_MESSAGE}",
        )
        for day in range(60)
        for hour in range(0, 24, 5)
    ]
    _, page = _page(tmp_path, fleet_result(events))
    xs = {b["x"] for b in page.bars if "x" in b}
    assert 0 < len(xs) <= MAX_BARS
    said = re.search(r"Each bar is (\d+) hours", "".join(page.text))
    assert said is not None
    span_hours = 60 * 24
    assert span_hours / int(said.group(1)) <= MAX_BARS


def test_an_error_with_no_time_says_it_has_no_bar(tmp_path):
    """Lines without a time are counted in the table, and the card says why it has no chart."""
    _, page = _page(tmp_path, fleet_result([Event("node-0", None, f"ValueError: {SEED_MESSAGE}")]))
    assert "1" == page.tables["errors-table"][1][0]
    assert "No line of this error had a time." in "".join(page.text)
    assert [] == page.bars


def test_past_the_palette_hosts_share_one_grey_named_in_its_tooltip(tmp_path):
    """Twelve hosts: the eight with the most lines get colours, the other four one grey bar
    whose tooltip names them, and the legend counts them."""
    line = f"ValueError: {SEED_MESSAGE}"
    events = [
        Event(f"node-{i:02d}", "2026-12-01T00:00:00Z", line)
        for i in range(12)
        for _ in range(i + 1)
    ]
    _, page = _page(tmp_path, fleet_result(events))
    bars = _bars(page, "vllm-kv-cache-max-seq-len")
    assert 9 == len({b["class"] for b in bars}) == len(bars)
    (grey,) = [b for b in bars if b["class"] == f"h{len(COLOURS)}"]
    assert grey["title"].endswith(": node-03 (4), node-02 (3), node-01 (2), node-00 (1): 10")
    assert "4 other hosts" in "".join(page.text)


def test_a_card_says_how_many_lines_had_no_time(tmp_path):
    """Of three lines, one with no time: the card says so, and its bars add up to two."""
    line = f"ValueError: {SEED_MESSAGE}"
    events = [Event("n", "2026-12-01T00:00:00Z", line), Event("n", None, line)]
    events.append(Event("n", "2026-12-01T05:00:00Z", line))
    _, page = _page(tmp_path, fleet_result(events))
    assert "3 times (1 with no time, no bar)" in "".join(page.text)
    assert 2 == len(page.bars)


def test_a_secret_in_an_example_is_masked(tmp_path):
    """A token in a log line reaches the page masked."""
    token = "hf_" + "a1B2c3D4e5F6g7H8i9J0"
    line = f"ValueError: {SEED_MESSAGE} (signed in with {token})"
    source, _ = _page(tmp_path, fleet_result([Event("node-0", "2026-12-01T00:00:00Z", line)]))
    assert token not in source
    assert "hf_***" in source


def test_the_unknown_shapes_table_is_cut_and_says_so(tmp_path):
    """More than MAX_SHAPES shapes: the most frequent are listed, and the page says of how many."""
    many = MAX_SHAPES + 3
    events = [Event("node-0", None, f"RuntimeError: shape{'x' * i} failed") for i in range(many)]
    _, page = _page(tmp_path, fleet_result(events))
    assert MAX_SHAPES + 1 == len(page.tables["unknown-table"])
    assert f"The {MAX_SHAPES:,} most frequent of {many:,} shapes" in "".join(page.text)


def test_failed_sources_are_listed_with_why(tmp_path, result):
    """Each source that could not be read is in its table, with the reason the scan gave."""
    _, page = _page(tmp_path, result)
    assert [["Source", "Host", "Why"], [*FAILED, "(no host)", *FAILED.values()]] == page.tables[
        "failed-table"
    ]


def test_the_real_scans_result_is_drawn_with_its_hosts(tmp_path):
    """What scan_part and merge give is drawn: its count, and its bars by host, the lines of
    a log whose host is not known under "(no host)"."""
    result = scanned_result()
    _, page = _page(tmp_path, result)
    assert ["3"] == [row[0] for row in page.tables["errors-table"][1:]]
    drawn: Counter[str] = Counter()
    for bar in _bars(page, "vllm-no-cache-blocks"):
        _, host, count = re.fullmatch(r"(.+? UTC): (.+): ([\d,]+)", bar["title"]).groups()
        drawn[host] += int(count)
    assert {"node-a": 2, "(no host)": 1} == dict(drawn)


def test_a_run_with_a_state_shows_the_totals_of_all_runs(tmp_path, result):
    """With --state's running totals (the fleet's own arithmetic, run twice over the same
    result), an All runs column gives each error's total, and a line the totals of all."""
    twice = {**result, "running": running(running(None, result), result)}
    _, page = _page(tmp_path, twice)
    header, *rows = page.tables["errors-table"]
    assert ["Count", "All runs"] == header[:2]
    assert [[f"{g['count']:,}", f"{2 * g['count']:,}"] for g in result["groups"]] == [
        r[:2] for r in rows
    ]
    failures = sum(g["count"] for g in result["groups"])
    assert f"All runs with this state: {2 * failures:,} known errors in" in "".join(page.text)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.text(
        alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("\n\tÄß€"),
        min_size=1,
        max_size=60,
    )
)
def test_any_text_shows_as_itself_and_adds_no_element(tmp_path, text):
    """Whatever a log line holds, in every place of the result: the page has the elements and
    attributes it has with a plain word there, and the Fix shows the text, cleaned."""
    clean_tags, clean_attributes = _shape(tmp_path, "plain")
    _, page = _page(tmp_path, one_of_everything(text))
    assert clean_tags == [t for t, _ in page.elements]
    assert clean_attributes == [sorted(a) for _, a in page.elements]
    assert f"Fix: {shown(text)}" in "".join(page.text)


def _shape(tmp_path, text: str) -> tuple[list[str], list[list[str]]]:
    _, page = _page(tmp_path, one_of_everything(text))
    return [t for t, _ in page.elements], [sorted(a) for _, a in page.elements]
