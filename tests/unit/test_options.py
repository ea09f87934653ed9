"""errkb.options: one frozen options object, and the values a user gives in a frozen Given."""

from __future__ import annotations

import attrs
import pytest

from errkb.options import Given, Options


def test_given_is_frozen_and_typed():
    """Given is a frozen class, so a typo in a name fails instead of being ignored."""
    given = Given(model="./llama", block_size=32)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        given.model = "other"  # type: ignore[misc]
    assert 32 == given.block_size


def test_options_accept_a_mapping_of_given_names():
    """The documented dict form still works and becomes a Given."""
    options = Options(given={"model": "./llama", "gpu_memory_utilization": 0.5})
    assert Given(model="./llama", gpu_memory_utilization=0.5) == options.given


def test_an_unknown_given_name_is_refused():
    """An unknown name is a TypeError that lists the names there are."""
    with pytest.raises(TypeError, match=r"unknown value 'gpu_mem'.*gpu_memory_bytes"):
        Options(given={"gpu_mem": 1})


def test_timeout_default_comes_from_the_environment(monkeypatch):
    """ERRKB_TIMEOUT sets the default bound of a diagnosis."""
    monkeypatch.setenv("ERRKB_TIMEOUT", "1.5")
    assert 1.5 == Options().timeout
