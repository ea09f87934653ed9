"""Fixtures shared by tests/unit and tests/integration; plain helpers are in helpers.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import LLAMA

from errkb.testing import record_dict


@pytest.fixture(autouse=True, scope="session")
def _pack_cache(tmp_path_factory):
    """Pack caches go to a folder of the test run, never to the user's ~/.cache."""
    os.environ["ERRKB_CACHE_DIR"] = str(tmp_path_factory.mktemp("errkb-cache"))


@pytest.fixture
def write_records(tmp_path):
    """Write record dicts (or raw text) into files under tmp_path; returns the folder."""

    def write(files: dict[str, object]) -> Path:
        for name, content in files.items():
            path = tmp_path / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(
                content if isinstance(content, str) else json.dumps(content), encoding="utf-8"
            )
        return tmp_path

    return write


@pytest.fixture
def good_record():
    return record_dict(
        id="acme-widget-jammed",
        slug="widget-jammed",
        messagePattern=r"widget (?P<name>\w+) jammed at (?P<speed>\d+(?:\.\d+)?) rpm",
        errorMessage="widget {name} jammed at {speed} rpm",
        errorClass="RuntimeError",
        examples=["widget alpha jammed at 1200 rpm", "widget b jammed at 3.5 rpm"],
        counterexamples=["widget alpha stopped at 1200 rpm"],
    )


@pytest.fixture
def llama_dir(tmp_path):
    """A model folder holding only a Llama-3-8B-shaped config.json (helpers.LLAMA)."""
    (tmp_path / "config.json").write_text(json.dumps(LLAMA))
    return tmp_path


# TEMPORARY (helper-2 restructure): tests/test_records.py and tests/test_packs.py still say
# `from conftest import ...` until they move; removed in the same change.
from helpers import DATA, run_cli, run_python  # noqa: E402, F401
