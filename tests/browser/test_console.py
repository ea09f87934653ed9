"""The support console in a real browser: Debian's headless Chromium driven by selenium.

The server runs in a child process on a free loopback port; the page's figures are compared
with the JSON the same server's API gives for the same input, never with numbers written here.
Layouts are measured in windows of a given size (the DevTools protocol sets the viewport), and
a page of another origin is served from another port of the test process. Screenshots go to
ERRKB_SCREENSHOTS (default build/console-screenshots); docs/img holds the committed copies.
"""

from __future__ import annotations

import contextlib
import html.parser
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest
from chromium import chrome, chromium_or_skip
from helpers import LLAMA, SEED_MESSAGE
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

PASTE = f"ValueError: {SEED_MESSAGE}"
HOSTILE = '<script>window.__pwned=1</script> <img src=x onerror="window.__pwned=1">'
SCREENSHOTS = Path(os.environ.get("ERRKB_SCREENSHOTS", "build/console-screenshots"))
WAIT = 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _server_command(port: int) -> list[str]:
    return [sys.executable, "-m", "errkb", "serve", "--host", "127.0.0.1", "--port", str(port)]


@dataclass(frozen=True)
class Served:
    """A server in a child process: its address, its process id and its log (with uvicorn's
    access log: one line a request, with its method, path and status)."""

    base: str
    pid: int
    log: Path

    def requests(self) -> list[tuple[str, str, int]]:
        """(method, path, status) of each request answered so far, in order."""
        lines = re.findall(r'"([A-Z]+) (\S+) HTTP/1\.1" (\d{3})', self.log.read_text())
        return [(method, path, int(status)) for method, path, status in lines]

    def cpu_seconds(self) -> float:
        """User and system CPU time of the server process so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def _serving(tmp_path: Path, token: str | None = None):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != "ERRKB_SERVE_TOKEN"}
    if token:
        env["ERRKB_SERVE_TOKEN"] = token
    log = tmp_path / f"server-{port}.log"
    with log.open("wb") as out:
        child = subprocess.Popen(_server_command(port), stdout=out, stderr=out, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + WAIT
        while True:
            if child.poll() is not None:
                pytest.fail(f"the server exited with {child.returncode}: {log.read_text()}")
            try:
                with urllib.request.urlopen(f"{base}/healthz", timeout=2):
                    break
            except (OSError, urllib.error.URLError):
                if time.monotonic() > deadline:
                    pytest.fail(f"the server did not answer in {WAIT} s: {log.read_text()}")
                time.sleep(0.1)
        yield Served(base, child.pid, log)
    finally:
        child.terminate()
        try:
            child.wait(10)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


@pytest.fixture(scope="module")
def server(request, tmp_path_factory):
    chromium_or_skip(request.config)
    with _serving(tmp_path_factory.mktemp("server")) as served:
        yield served.base


@pytest.fixture(scope="module")
def driver(request, tmp_path_factory):
    chromium_or_skip(request.config)
    browser = chrome(tmp_path_factory.mktemp("chromium-profile"), {"browser": "ALL"})
    try:
        yield browser
    finally:
        browser.quit()


@pytest.fixture(autouse=True)
def _no_console_errors(request, driver):
    """After every test the page has logged no error (a CSP violation is one)."""
    driver.get_log("browser")
    yield
    allowed = getattr(request.node, "allowed_console", ())
    errors = [
        e
        for e in driver.get_log("browser")
        if e["level"] == "SEVERE" and not any(a in e["message"] for a in allowed)
    ]
    assert [] == errors


def api(base: str, body: dict, token: str | None = None) -> dict:
    """What the server's API answers for ``body``: the figures the page must show."""
    headers = {"Content-Type": "application/json"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(
        f"{base}/v1/explain", data=json.dumps(body).encode(), headers=headers, method="POST"
    )
    with urllib.request.urlopen(request, timeout=WAIT) as response:
        return json.load(response)


def open_page(driver, base: str) -> None:
    driver.get(base + "/")
    WebDriverWait(driver, WAIT).until(
        lambda d: d.execute_script("return document.documentElement.dataset.ready") == "true"
    )


def fill(driver, field: str, value: str) -> None:
    box = driver.find_element(By.ID, field)
    box.clear()
    if value:
        # send_keys types character by character; long pastes go in as a paste would.
        driver.execute_script(
            "arguments[0].value = arguments[1]; arguments[0].dispatchEvent(new Event('input'))",
            box,
            value,
        )


def diagnose(driver, *, keyboard: bool = False) -> None:
    """Submit and wait for the page to draw the answer."""
    before = driver.execute_script("return document.body.dataset.diagnosed || ''")
    if keyboard:
        driver.find_element(By.ID, "text").send_keys(Keys.CONTROL, Keys.ENTER)
    else:
        driver.find_element(By.ID, "submit").click()
    WebDriverWait(driver, WAIT).until(
        lambda d: d.execute_script("return document.body.dataset.diagnosed || ''") != before
    )


def page_settings(driver) -> dict:
    items = driver.find_elements(By.CSS_SELECTOR, "#fix-settings .setting")
    return {i.get_attribute("data-name"): json.loads(i.get_attribute("data-value")) for i in items}


@contextlib.contextmanager
def viewport(driver, width: int, height: int):
    """The page in a window of ``width`` x ``height`` CSS pixels, then the window as it was."""
    metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    try:
        yield
    finally:
        driver.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})


def wait_for(what, seconds: float = WAIT):
    """``what()`` once it is true: for lines a child process writes after its answer."""
    deadline = time.monotonic() + seconds
    while not (found := what()):
        if time.monotonic() > deadline:
            pytest.fail(f"not within {seconds} s: {what.__doc__ or what}")
        time.sleep(0.05)
    return found


def shot(driver, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"console-{name}.png"))


def pick_llama(driver, base: str) -> dict:
    """The Llama shape from the server's picker when it lists one, else pasted as JSON."""
    with urllib.request.urlopen(f"{base}/v1/model-shapes", timeout=WAIT) as response:
        shapes = json.load(response)
    for shape in shapes if isinstance(shapes, list) else shapes["shapes"]:
        if shape["config"].get("model_type") == "llama":
            WebDriverWait(driver, WAIT).until(
                lambda d: len(Select(d.find_element(By.ID, "model_shape")).options) > 2
            )
            Select(driver.find_element(By.ID, "model_shape")).select_by_visible_text(shape["name"])
            return shape["config"]
    fill(driver, "model_config", json.dumps(LLAMA))
    return LLAMA


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.inline: list[str] = []

    def handle_starttag(self, tag, attrs):
        names = {k for k, _ in attrs}
        if tag == "style" or "style" in names or any(k.startswith("on") for k in names):
            self.inline.append(tag)
        if tag == "script" and "src" not in names:
            self.inline.append(tag)


def test_page_is_served_with_a_strict_csp_and_nothing_inline(server):
    """GET / carries the Content-Security-Policy, and the page needs nothing it forbids."""
    with urllib.request.urlopen(server + "/", timeout=WAIT) as response:
        csp = response.headers["Content-Security-Policy"]
        page = response.read().decode()
    for directive in (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "frame-ancestors 'none'",
    ):
        assert directive in csp
    parser = _Tags()
    parser.feed(page)
    assert [] == parser.inline
    assert "http" not in page.split("<body")[0]  # nothing from a CDN


def test_paste_and_keyboard_submit_show_the_fix_first(driver, server):
    """A pasted error, Ctrl+Enter: the fix with the API's numbers, then the facts, then the rest."""
    open_page(driver, server)
    fill(driver, "text", PASTE)
    fill(driver, "gpu_memory", "24GiB")
    pick_llama(driver, server)
    shot(driver, "paste")
    diagnose(driver, keyboard=True)
    shot(driver, "diagnosis")

    answer = api(server, {"text": PASTE, "what_if": {"gpu_memory": "24GiB", "model_config": LLAMA}})
    order = driver.execute_script(
        "return [...document.getElementById('diagnosis').children].map(c => c.id || c.className)"
    )
    assert order.index("fix") < order.index("card facts-card") < order.index("card why")
    assert answer["solutions"][0]["settings"] == page_settings(driver)
    assert answer["example_fix"]["after"] == driver.find_element(By.ID, "fix-code").text
    rows = driver.find_elements(By.CSS_SELECTOR, "#facts tbody tr")
    assert [f["name"] for f in answer["facts"]] == [r.get_attribute("data-name") for r in rows]
    assert (
        answer["matches"][0]["title"] == driver.find_element(By.CSS_SELECTOR, ".finding-title").text
    )


def test_what_if_gpu_memory_changes_the_numbers_as_the_api_does(driver, server):
    """From 24GiB to 80GiB the page's fix changes, and each time equals the API's."""
    open_page(driver, server)
    fill(driver, "text", PASTE)
    config = pick_llama(driver, server)
    seen = []
    for memory in ("24GiB", "80GiB"):
        fill(driver, "gpu_memory", memory)
        diagnose(driver)
        answer = api(
            server, {"text": PASTE, "what_if": {"gpu_memory": memory, "model_config": config}}
        )
        assert answer["solutions"][0]["settings"] == page_settings(driver)
        assert answer["example_fix"]["after"] == driver.find_element(By.ID, "fix-code").text
        total = driver.find_element(By.CSS_SELECTOR, '#facts tr[data-name="gpu_memory_total"]')
        assert memory.replace("GiB", " GiB") in total.text
        seen.append(page_settings(driver))
    shot(driver, "what-if")
    assert seen[0] != seen[1]


def _copy_and_read(driver, server, setup: str) -> tuple[str, str]:
    """Diagnose, run ``setup`` in the page, click Copy: how it copied and the clipboard text."""
    open_page(driver, server)
    fill(driver, "text", PASTE)
    diagnose(driver)
    driver.execute_script(setup)
    driver.find_element(By.ID, "copy").click()
    WebDriverWait(driver, WAIT).until(
        lambda d: d.find_element(By.ID, "copy").get_attribute("data-copied")
    )
    how = driver.find_element(By.ID, "copy").get_attribute("data-copied")
    # Read the clipboard back on a fresh page, where navigator.clipboard is whole again.
    open_page(driver, server)
    held = driver.execute_async_script(
        "const done = arguments[0]; navigator.clipboard.readText().then(done, e => done('!' + e))"
    )
    return how, held


@pytest.fixture
def clipboard(driver, server):
    driver.execute_cdp_cmd(
        "Browser.grantPermissions",
        {"origin": server, "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]},
    )
    yield
    driver.execute_cdp_cmd("Browser.resetPermissions", {})


def test_copy_puts_the_rewritten_call_on_the_clipboard(driver, server, clipboard):
    """With clipboard permission, Copy writes the rewritten call through navigator.clipboard."""
    how, held = _copy_and_read(driver, server, "")
    assert "clipboard" == how
    assert api(server, {"text": PASTE})["example_fix"]["after"] == held


def test_copy_without_the_clipboard_api_uses_the_copy_command(driver, server, clipboard):
    """Where navigator.clipboard is missing (plain http on another address), execCommand copies."""
    how, held = _copy_and_read(
        driver, server, "Object.defineProperty(navigator, 'clipboard', {value: undefined})"
    )
    assert "command" == how
    assert api(server, {"text": PASTE})["example_fix"]["after"] == held


def test_copy_with_nothing_to_copy_with_selects_the_code(driver, server):
    """With no way to copy at all, the code is selected and the page says to press Ctrl+C."""
    open_page(driver, server)
    fill(driver, "text", PASTE)
    diagnose(driver)
    driver.execute_script(
        "Object.defineProperty(navigator, 'clipboard', {value: undefined});"
        "document.execCommand = () => false;"
    )
    driver.find_element(By.ID, "copy").click()
    WebDriverWait(driver, WAIT).until(
        lambda d: d.find_element(By.ID, "copy").get_attribute("data-copied") == "selected"
    )
    selected = driver.execute_script("return window.getSelection().toString()")
    assert driver.find_element(By.ID, "fix-code").text == selected
    assert "Ctrl+C" in driver.find_element(By.CSS_SELECTOR, ".copy-said").text


def test_a_hostile_paste_is_shown_as_text_and_never_runs(driver, server):
    """<script> and onerror= in the paste stay text: nothing runs, no element is made."""
    open_page(driver, server)
    hostile = f"ValueError: {HOSTILE} {SEED_MESSAGE}"
    fill(driver, "text", hostile)
    diagnose(driver)
    assert driver.execute_script("return window.__pwned") is None
    made = driver.execute_script(
        "return document.querySelectorAll('#diagnosis script, #diagnosis img').length"
    )
    assert 0 == made
    assert HOSTILE in driver.find_element(By.ID, "read").text
    assert HOSTILE in driver.execute_script(
        "return document.getElementById('diagnosis').textContent"
    )


def test_a_paste_no_record_knows_says_so(driver, server):
    """Text that matches nothing: the page says no record matched, and shows no fix."""
    text = "RuntimeError: widget frobnication failed at stage 3"
    assert [] == api(server, {"text": text})["matches"]
    open_page(driver, server)
    fill(driver, "text", text)
    diagnose(driver)
    assert driver.find_elements(By.CSS_SELECTOR, "#diagnosis .nomatch")
    assert [] == driver.find_elements(By.ID, "fix")
    assert "No record matched." == driver.find_element(By.ID, "status").text


def test_a_bad_model_config_is_named_before_anything_is_sent(driver, server):
    """Pasted config.json that is not JSON: the message names model_config; no request is made."""
    open_page(driver, server)
    fill(driver, "text", PASTE)
    fill(driver, "model_config", "{not json")
    driver.find_element(By.ID, "submit").click()
    status = driver.find_element(By.ID, "status").text
    assert status.startswith("model_config:")
    assert "true" == driver.find_element(By.ID, "model_config").get_attribute("aria-invalid")
    assert driver.execute_script("return document.body.dataset.diagnosed") is None


def test_a_server_error_is_shown_with_its_message(request, driver, server):
    """A what-if value the server refuses: its message is shown, as text."""
    request.node.allowed_console = ("/v1/explain - Failed to load resource",)
    open_page(driver, server)
    fill(driver, "text", PASTE)
    fill(driver, "gpu_memory", HOSTILE)
    driver.find_element(By.ID, "submit").click()
    WebDriverWait(driver, WAIT).until(
        lambda d: "error" in d.find_element(By.ID, "status").get_attribute("class")
    )
    status = driver.find_element(By.ID, "status")
    assert status.text.startswith("The server answered 422: what_if.gpu_memory")
    assert "true" == driver.find_element(By.ID, "gpu_memory").get_attribute("aria-invalid")
    assert [] == status.find_elements(By.CSS_SELECTOR, "*")
    assert driver.execute_script("return window.__pwned") is None


def test_a_token_is_asked_for_once_and_the_request_retried(driver, tmp_path):
    """Against a server with a token: the page asks, keeps it for the tab, and sends again."""
    with _serving(tmp_path, token="s3cret-token") as served:
        base = served.base
        open_page(driver, base)
        fill(driver, "text", PASTE)
        driver.find_element(By.ID, "submit").click()
        box = driver.find_element(By.ID, "token-box")
        WebDriverWait(driver, WAIT).until(lambda d: box.is_displayed())
        driver.find_element(By.ID, "token").send_keys("s3cret-token", Keys.ENTER)
        WebDriverWait(driver, WAIT).until(lambda d: d.find_elements(By.ID, "fix-code"))
        answer = api(base, {"text": PASTE}, token="s3cret-token")
        assert answer["example_fix"]["after"] == driver.find_element(By.ID, "fix-code").text
        assert "s3cret-token" == driver.execute_script(
            "return sessionStorage.getItem('errkb.token')"
        )
        assert not box.is_displayed()


def test_a_narrow_screen_stacks_the_columns(driver, server):
    """At phone width the form sits above the diagnosis and nothing scrolls sideways."""
    size = driver.get_window_size()
    driver.set_window_size(420, 900)
    try:
        open_page(driver, server)
        fill(driver, "text", PASTE)
        diagnose(driver)
        form = driver.find_element(By.ID, "explain-form").rect
        answer = driver.find_element(By.ID, "diagnosis").rect
        sideways = driver.execute_script(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
    finally:
        driver.set_window_size(size["width"], size["height"])
    assert form["y"] + form["height"] <= answer["y"]
    assert 0 == sideways


def test_dark_mode_follows_the_system(driver, server):
    """prefers-color-scheme: dark gives the page other colours than light."""
    background = "return getComputedStyle(document.body).backgroundColor"
    colours = {}
    try:
        for scheme in ("light", "dark"):
            driver.execute_cdp_cmd(
                "Emulation.setEmulatedMedia",
                {"features": [{"name": "prefers-color-scheme", "value": scheme}]},
            )
            open_page(driver, server)
            colours[scheme] = driver.execute_script(background)
        fill(driver, "text", PASTE)
        diagnose(driver)
        shot(driver, "dark")
    finally:
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})
    assert colours["light"] != colours["dark"]


def diagnosed_llama(driver, server: str) -> None:
    """The page with the seed error diagnosed for a Llama shape on 24 GiB: a long answer."""
    open_page(driver, server)
    fill(driver, "text", PASTE)
    fill(driver, "gpu_memory", "24GiB")
    pick_llama(driver, server)
    diagnose(driver)


# Each button inside the window and the element at its centre (not covered by anything).
BUTTONS_OUT_OF_VIEW = """
return ["submit", "clear"].filter((id) => {
  const button = document.getElementById(id);
  const box = button.getBoundingClientRect();
  const at = document.elementFromPoint(box.left + box.width / 2, box.top + box.height / 2);
  const inside = box.top >= 0 && box.left >= 0 && box.bottom <= innerHeight
    && box.right <= innerWidth;
  return !inside || !button.contains(at);
});
"""


@pytest.mark.parametrize("height", [720, 900])
def test_the_buttons_stay_in_view_at_every_scroll_position(driver, server, height):
    """1280 wide, a diagnosis shown: Diagnose and Clear are in the window from top to bottom."""
    with viewport(driver, 1280, height):
        diagnosed_llama(driver, server)
        bottom = driver.execute_script("return document.documentElement.scrollHeight - innerHeight")
        hidden = {}
        for y in sorted({0, 30, 60, 90, 120, *(bottom * i // 10 for i in range(1, 11))}):
            driver.execute_script("window.scrollTo(0, arguments[0])", y)
            assert y == driver.execute_script("return Math.round(scrollY)")
            if out := driver.execute_script(BUTTONS_OUT_OF_VIEW):
                hidden[y] = out
        # Half-way down, the form's last field comes into view by scrolling the form alone.
        driver.execute_script("window.scrollTo(0, arguments[0])", bottom // 2)
        last = driver.execute_script(
            "const body = document.querySelector('#explain-form .form-body');"
            "body.scrollTop = body.scrollHeight;"
            "const box = document.getElementById('model_config').getBoundingClientRect();"
            "const foot = document.querySelector('#explain-form .form-foot');"
            "return [box.top >= 0, box.bottom <= foot.getBoundingClientRect().top, scrollY]"
        )
        if height == 720:
            shot(driver, "buttons-in-view-1280x720")
    assert bottom > 2 * height  # the answer is two windows long or more: it scrolls
    assert {} == hidden
    assert [True, True, bottom // 2] == last


@pytest.mark.parametrize(("width", "height"), [(1280, 900), (390, 844)])
def test_the_facts_table_fits_its_box(driver, server, width, height):
    """At 1280 and at phone width (390) the facts table is no wider than its box: notes wrap."""
    with viewport(driver, width, height):
        diagnosed_llama(driver, server)
        driver.execute_script("document.querySelector('.facts-card').scrollIntoView()")
        shot(driver, f"facts-{width}")
        measured = driver.execute_script(
            "const table = document.getElementById('facts'), box = table.parentElement;"
            "const edge = box.getBoundingClientRect().right;"
            "const cells = [...table.querySelectorAll('td')];"
            "return {table: table.scrollWidth, box: box.clientWidth, inBox: box.scrollWidth,"
            "  cut: cells.filter((td) => td.scrollWidth > td.clientWidth"
            "    || td.getBoundingClientRect().right > edge + 0.5).map((td) => td.textContent),"
            "  wrapped: cells.filter((td) => td.matches('td:last-child')"
            "    && td.getBoundingClientRect().height > 2 * parseFloat(getComputedStyle(td).lineHeight))"
            "    .length,"
            "  page: document.documentElement.scrollWidth - document.documentElement.clientWidth}"
        )
    assert measured["table"] <= measured["box"]
    assert measured["inBox"] <= measured["box"]
    assert [] == measured["cut"]
    assert 0 < measured["wrapped"]  # a note of more than two lines: wrapped, not cut
    assert 0 == measured["page"]


TOKEN = "s3cret-token"
MISSING = "This server needs an access token"
REFUSED = "The token given was refused: enter the right one"


def test_a_token_server_asks_for_its_token_before_any_request(driver, tmp_path):
    """First load of a server with a token: the prompt, no /v1 request (no 401, no console error)."""
    with _serving(tmp_path, token=TOKEN) as served:
        open_page(driver, served.base)
        label = driver.find_element(By.ID, "token-label")
        asked = (driver.find_element(By.ID, "token-box").is_displayed(), label.text)
        options = len(Select(driver.find_element(By.ID, "model_shape")).options)
        before = served.requests()
        driver.find_element(By.ID, "token").send_keys(TOKEN, Keys.ENTER)
        WebDriverWait(driver, WAIT).until(
            lambda d: len(Select(d.find_element(By.ID, "model_shape")).options) > 2
        )
        after = wait_for(lambda: served.requests()[len(before) :])
    assert (True, MISSING) == asked
    assert 2 == options  # "none" and "pasted below": no shapes asked for without the token
    page = before[before.index(("GET", "/", 200)) :]
    assert ("GET", "/healthz", 200) in page  # where the page learnt that a token is needed
    assert [] == [r for r in page if r[1].startswith("/v1/")]
    assert [("GET", "/v1/model-shapes", 200)] == after


def test_a_refused_token_is_said_to_be_refused(request, driver, tmp_path):
    """A wrong token: the prompt says it was refused, not that one is missing; the right one works."""
    request.node.allowed_console = ("the server responded with a status of 401",)
    with _serving(tmp_path, token=TOKEN) as served:
        open_page(driver, served.base)
        missing = driver.find_element(By.ID, "token-label").text
        fill(driver, "text", PASTE)
        driver.find_element(By.ID, "submit").click()
        box = driver.find_element(By.ID, "token-box")
        driver.find_element(By.ID, "token").send_keys("not-the-token", Keys.ENTER)
        WebDriverWait(driver, WAIT).until(
            lambda d: box.is_displayed() and "refused" == box.get_attribute("data-why")
        )
        refused = driver.find_element(By.ID, "token-label").text
        status = driver.find_element(By.ID, "status").text
        shot(driver, "token-refused")
        driver.find_element(By.ID, "token").send_keys(TOKEN, Keys.ENTER)
        WebDriverWait(driver, WAIT).until(lambda d: d.find_elements(By.ID, "fix-code"))

        def explained():
            """/v1/explain answered twice"""
            statuses = [s for _, path, s in served.requests() if path == "/v1/explain"]
            return statuses if len(statuses) == 2 else None

        statuses = wait_for(explained)
    assert MISSING == missing
    assert REFUSED == refused
    assert status.startswith("The token given was refused (401): enter the right one")
    assert [401, 200] == statuses
    assert not box.is_displayed()


# A page of another site, as the issue's attack: a "simple" POST (text/plain, no header of its
# own), which a browser sends without asking, and a JSON one, which needs a CORS preflight.
ELSEWHERE = """<!doctype html>
<meta charset="utf-8">
<title>another site</title>
<script>
const target = {target};
const body = JSON.stringify({{text: {line}.repeat({count}) + {paste}}});
const said = {{}};
fetch(target, {{method: "POST", mode: "no-cors", headers: {{"Content-Type": "text/plain"}}, body}})
  .then((r) => {{ said.simple = r.type; }}, (e) => {{ said.simple = String(e); }})
  .then(() => fetch(target, {{method: "POST", headers: {{"Content-Type": "application/json"}}, body}}))
  .then((r) => {{ said.json = r.status; }}, (e) => {{ said.json = String(e); }})
  .then(() => {{ document.title = JSON.stringify(said); }});
</script>
"""
#: Log lines enough that diagnosing them costs the server a measurable time (8 MB).
NOISE_LINE = "INFO 11-30 06:00:01 [engine.py:42] Avg prompt throughput: 1.5 tokens/s, Running: 3\n"
NOISE_COUNT = 100_000


@contextlib.contextmanager
def _elsewhere(page: str):
    """``page`` served at http://127.0.0.1:<another port>/: another origin than the console's."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = page.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *_: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def test_a_page_of_another_origin_is_refused_and_costs_no_work(request, driver, tmp_path):
    """A page on another port posts a long paste: 403 before any work, and it reads nothing."""
    with _serving(tmp_path) as served:
        target = served.base + "/v1/explain"
        request.node.allowed_console = (target,)  # the browser reports the refusals
        text = NOISE_LINE * NOISE_COUNT + PASTE
        # The same request from a client the server serves: what the work costs.
        cpu = served.cpu_seconds()
        assert api(served.base, {"text": text})["matches"]
        served_cost = served.cpu_seconds() - cpu
        before = wait_for(served.requests)
        page = ELSEWHERE.format(
            target=json.dumps(target),
            line=json.dumps(NOISE_LINE),
            count=NOISE_COUNT,
            paste=json.dumps(PASTE),
        )
        cpu = served.cpu_seconds()
        with _elsewhere(page) as elsewhere:
            driver.get(elsewhere)
            WebDriverWait(driver, WAIT).until(lambda d: d.title.startswith("{"))
            said = json.loads(driver.title)
        refused = wait_for(lambda: served.requests()[len(before) :][:2] or None)
        refused_cost = served.cpu_seconds() - cpu
    assert {"simple": "opaque", "json": "TypeError: Failed to fetch"} == said
    assert [("POST", "/v1/explain", 403), ("OPTIONS", "/v1/explain", 403)] == refused
    assert refused_cost < served_cost / 4, (refused_cost, served_cost)
