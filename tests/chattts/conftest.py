"""tests/chattts runs only where ChatTTS is installed: ``nox -s chattts`` makes that venv.

Elsewhere (the default ``nox -s tests``, ``pytest tests``) the folder collects nothing.
"""

from __future__ import annotations

import importlib.util

if importlib.util.find_spec("ChatTTS") is None:
    collect_ignore_glob = ["*"]
