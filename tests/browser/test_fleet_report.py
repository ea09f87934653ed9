"""The fleet's HTML report in a real browser: Debian's headless Chromium driven by selenium.

The page is written by ``errkb.fleet._html.write_html`` from a result built from log events
(tests/fleet_results.py) and opened from disk, as a user opens it. Hostile text in the events
names a canary server on loopback: were any of it to become markup, the browser would ask the
canary for it. The page's requests are read from Chromium's performance log (the DevTools
protocol's Network events), and CSP violations from a listener added before the page's own
script. Screenshots go to ERRKB_SCREENSHOTS (default build/console-screenshots); docs/img holds
the committed copy.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from pathlib import Path

import pytest
from chromium import chrome, chromium_or_skip
from fleet_results import Event, fleet_events, fleet_result
from helpers import NO_BLOCKS_MESSAGE
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from errkb.fleet._html import write_html

SCREENSHOTS = Path(os.environ.get("ERRKB_SCREENSHOTS", "build/console-screenshots"))
WAIT = 30
FAILED = {"s3://fleet-logs/node-9/2026-12-02.log.gz": "truncated gzip: the stream ended early"}
# Runs before any script of the page: every CSP violation the page causes is kept.
WATCH = (
    "window.__violations = [];"
    "document.addEventListener('securitypolicyviolation', function (e) {"
    "  window.__violations.push(e.violatedDirective + ' ' + e.blockedURI); });"
)


class _Canary(http.server.BaseHTTPRequestHandler):
    asked: list[str]

    def do_GET(self):
        self.asked.append(self.path)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def canary():
    """A server on loopback that only counts what it is asked for."""
    _Canary.asked = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Canary)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", _Canary.asked
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def result(canary):
    base, _ = canary
    lure = (
        f'<img src="{base}/img.png"><script src="{base}/x.js"></script>'
        f'<link rel="stylesheet" href="{base}/s.css"><iframe src="{base}/frame"></iframe>'
    )
    events = [
        *fleet_events(),
        Event(
            f'node-4<img src="{base}/host.png">',
            "2026-12-02T11:40:00Z",
            f"{lure} ValueError: {NO_BLOCKS_MESSAGE}",
        ),
        Event("node-1", "2026-12-02T12:10:00Z", f"RuntimeError: {lure} after 3 retries"),
    ]
    return fleet_result(events, failed=FAILED)


@pytest.fixture(scope="module")
def page(tmp_path_factory, result) -> str:
    path = tmp_path_factory.mktemp("fleet") / "fleet.html"
    write_html(result, path)
    return path.as_uri()


@pytest.fixture(scope="module")
def driver(request, tmp_path_factory):
    chromium_or_skip(request.config)
    browser = chrome(
        tmp_path_factory.mktemp("chromium-profile"), {"browser": "ALL", "performance": "ALL"}
    )
    browser.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": WATCH})
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture
def opened(driver, page):
    """The report, freshly loaded, its logs read from this load on."""
    driver.get_log("performance")
    driver.get_log("browser")
    driver.get(page)
    WebDriverWait(driver, WAIT).until(
        lambda d: d.execute_script("return document.documentElement.dataset.ready") == "true"
    )
    return driver


def _column(driver, table: str, index: int) -> list[str]:
    return driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0] + ' tbody tr'),"
        " r => r.cells[arguments[1]].innerText)",
        f"#{table}",
        index,
    )


def test_each_error_has_a_timeline_drawn_at_its_size(opened, result):
    """One SVG per error, as wide as its card, its aspect the viewBox's; every bar has an area."""
    charts = opened.find_elements(By.CSS_SELECTOR, "svg.timeline")
    assert [g["id"] for g in result["groups"]] == [
        c.get_attribute("aria-label").split(":")[0] for c in charts
    ]
    for chart in charts:
        box = chart.rect
        card = opened.execute_script(
            "return arguments[0].closest('section').getBoundingClientRect().width", chart
        )
        assert card - 40 < box["width"] <= card
        assert 960 / 150 == pytest.approx(box["width"] / box["height"], rel=0.02)
        bars = chart.find_elements(By.CSS_SELECTOR, "rect")
        assert bars
        sizes = [b.rect for b in bars]
        assert all(s["width"] > 0 and s["height"] > 0 for s in sizes)
        # Every stack stands on the axis, drawn 26 of the viewBox's 150 units above the bottom.
        baseline = box["y"] + box["height"] * (150 - 26) / 150
        stacks: dict[int, float] = {}
        for s in sizes:
            stacks[round(s["x"])] = max(stacks.get(round(s["x"]), 0), s["y"] + s["height"])
        assert all(abs(baseline - bottom) < 1 for bottom in stacks.values())


def test_a_bars_tooltip_names_its_hour_host_and_count(opened, result):
    """The browser's tooltip for a bar (its SVG title) says which hour, which host, how many."""
    first = result["groups"][0]
    bucket, host, count = max(first["timeline"], key=lambda t: t[2])
    titles = opened.execute_script(
        "return Array.from(document.querySelectorAll('svg.timeline')[0].querySelectorAll('rect > title'),"
        " t => t.textContent)"
    )
    start = bucket.replace("T", " ").removesuffix("Z")
    assert any(t.startswith(start) and t.endswith(f": {host}: {count}") for t in titles)


def test_clicking_a_header_sorts_the_table(opened, result):
    """Error sorts by title A to Z, Count from most to fewest and then back; Last seen by time."""
    headers = {
        b.text.rstrip(" ▲▼"): b
        for b in opened.find_elements(By.CSS_SELECTOR, "#errors-table th button")
    }
    titles = [g["title"] for g in result["groups"]]
    headers["Error"].click()
    assert sorted(titles, key=str.lower) == [
        t.split("\n")[0] for t in _column(opened, "errors-table", 1)
    ]
    headers["Count"].click()
    counts = [f"{g['count']:,}" for g in result["groups"]]
    assert counts == _column(opened, "errors-table", 0)
    headers["Count"].click()
    assert counts[::-1] == _column(opened, "errors-table", 0)
    assert "ascending" == headers["Count"].find_element(By.XPATH, "..").get_attribute("aria-sort")
    headers["Last seen (UTC)"].click()
    last = sorted(g["last_seen"].replace("T", " ").removesuffix("Z") for g in result["groups"])
    assert last == _column(opened, "errors-table", 4)


def test_the_unknown_shapes_table_sorts_too(opened, result):
    """The shapes sort by their text on a click of Shape."""
    opened.find_element(By.XPATH, "//table[@id='unknown-table']//button[text()='Shape']").click()
    shown = _column(opened, "unknown-table", 1)
    assert sorted(shown, key=str.lower) == shown
    assert len(result["unknown"]) == len(shown)


def test_nothing_is_fetched_and_nothing_is_refused(opened, page, canary):
    """The only request is the page itself; the lures reach no server; no CSP violation."""
    _, asked = canary
    events = [json.loads(e["message"])["message"] for e in opened.get_log("performance")]
    requested = [
        e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"
    ]
    assert [page] == requested
    assert [] == asked
    assert [] == opened.execute_script("return window.__violations")
    assert None is opened.execute_script("return window.__pwned")
    assert [] == [e for e in opened.get_log("browser") if e["level"] == "SEVERE"]


def test_screenshot(opened):
    """The report as a reader first sees it (docs/img/fleet-report.png is this, committed)."""
    metrics = {"width": 1280, "height": 1500, "deviceScaleFactor": 1, "mobile": False}
    opened.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        assert opened.save_screenshot(str(SCREENSHOTS / "fleet-report.png"))
    finally:
        opened.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
