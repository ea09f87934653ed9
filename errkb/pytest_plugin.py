"""The pytest plugin: an "errkb diagnosis" section in the report of a failing test.

Installed with errkb (entry point ``pytest11``, name ``errkb``) but off until enabled, so that
installing errkb changes no test run by itself. Turn it on with ``pytest -p errkb`` or in the
configuration::

    [tool.pytest.ini_options]
    errkb = true

When a test fails with an exception that the knowledge base knows, its report gets a section
"errkb diagnosis" with the plain-text diagnosis, shown with the failure (and in every report
that shows sections, such as JUnit XML's system-out with ``junit_logging``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from collections.abc import Generator

__all__ = ["SECTION"]

#: The title of the report section.
SECTION = "errkb diagnosis"

_ENABLED = pytest.StashKey[bool]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the ini option ``errkb``."""
    parser.addini(
        "errkb",
        type="bool",
        default=False,
        help="add an 'errkb diagnosis' section to failing tests (same as -p errkb)",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Decide once whether the plugin is on: ``-p errkb`` or the ini option."""
    asked = config.getoption("plugins", default=None) or []
    config.stash[_ENABLED] = bool(config.getini("errkb")) or any(
        name in ("errkb", "errkb.pytest_plugin") for name in asked
    )


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, Any]:
    """Add the section to the report of a failed phase whose exception errkb knows."""
    report = yield
    if not item.config.stash.get(_ENABLED, False) or call.excinfo is None or not report.failed:
        return report
    text = _diagnosis_text(call.excinfo.value, item.config)
    if text:
        report.sections.append((SECTION, text))
    return report


def _diagnosis_text(exc: BaseException, config: pytest.Config) -> str:
    """The plain-text diagnosis of ``exc``; "" when none matched; one line when errkb failed."""
    from errkb._guard import diagnose_guarded
    from errkb.options import Options

    outcome = diagnose_guarded(exc, Options())
    if outcome.problem is not None:
        return outcome.problem + "\n"
    diagnosis = outcome.value
    if diagnosis is None:
        return ""
    from errkb.render import render_plain

    try:
        width = config.get_terminal_writer().fullwidth
    except Exception:
        width = 100
    return render_plain(diagnosis, max(40, min(width, 200)))
