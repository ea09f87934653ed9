"""Fixtures shared by tests/unit and tests/integration; plain helpers are in helpers.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from helpers import LLAMA

import errkb.packs
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


@pytest.fixture
def pack_cache(tmp_path, monkeypatch):
    """A fresh cache folder, and every pack large enough to be cached."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("ERRKB_CACHE_DIR", str(folder))
    monkeypatch.delenv("ERRKB_NO_CACHE", raising=False)
    monkeypatch.setattr(errkb.packs, "MIN_CACHED", 0)
    return folder
