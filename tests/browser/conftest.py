"""tests/browser drives the support console in headless Chromium: ``nox -s browser``.

Only where selenium is installed (the ``browser`` dependency group); elsewhere (the default
``nox -s tests``) the folder collects nothing. Chromium itself is checked by the test module,
which skips loudly without it, and fails under ``CI=true``.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("selenium") is None:
    collect_ignore_glob = ["*"]
