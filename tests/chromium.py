"""Debian's headless Chromium for tests/browser: where it is, how it starts, and the skip.

Shared by the console's tests (test_console.py) and the fleet report's (test_fleet_report.py).
Only imported from tests/browser, which collects nothing where selenium is not installed.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# No sandbox: CI containers run as root. Nothing in the background may reach the network.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--window-size=1400,1100",
)


def chromium_or_skip(config: pytest.Config) -> None:
    """Skip, loudly, without Chromium and its driver; under CI=true their absence fails."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if not missing:
        return
    why = (
        f"browser tests need Debian's chromium and chromium-driver: {', '.join(missing)} "
        "missing (apt-get install chromium chromium-driver)"
    )
    # A skipped test's captured output is never shown: write past the capture, to stderr.
    capture = config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
        print(f"\n*** SKIPPING: {why} ***", file=sys.stderr, flush=True)
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true: {why}", pytrace=False)
    pytest.skip(why)


def chrome(profile: Path, logs: dict[str, str]) -> webdriver.Chrome:
    """Chromium with a fresh profile in ``profile``, keeping the logs named (``goog:loggingPrefs``)."""
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", logs)
    # An explicit driver path: selenium-manager, which would download a driver, never runs.
    return webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
