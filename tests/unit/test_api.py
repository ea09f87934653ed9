from __future__ import annotations

import threading

import pytest
from helpers import NO_BLOCKS_MESSAGE, SEED_MESSAGE

import errkb


def test_public_names_are_pinned():
    """The facade's __all__ is exactly this list, sorted."""
    expected = [
        "Diagnosis",
        "Match",
        "Options",
        "Record",
        "Registry",
        "__version__",
        "diagnose",
        "explain",
        "install",
        "lookup",
        "uninstall",
    ]
    assert expected == errkb.__all__
    assert sorted(errkb.__all__) == errkb.__all__
    for name in expected:
        assert getattr(errkb, name) is not None


def test_lookup_returns_ranked_matches_with_typed_captures():
    """lookup() gives Match objects, best first, captures typed."""
    [top, *_] = errkb.lookup(SEED_MESSAGE, ValueError)
    assert "vllm-kv-cache-max-seq-len" == top.record.id
    assert 32768 == top.captures["max_model_len"]
    assert top.score > 0


def test_lookup_class_filter_rules_out_other_classes():
    """A message under the wrong class matches nothing of that record."""
    assert "vllm-no-cache-blocks" not in [
        m.record.id for m in errkb.lookup(NO_BLOCKS_MESSAGE, KeyError)
    ]


def test_lookup_is_thread_safe_and_stable():
    """Eight threads looking up at once get the serial answer."""
    serial = [m.record.id for m in errkb.lookup(SEED_MESSAGE)]
    results: list[list[str]] = []

    def work() -> None:
        results.extend([m.record.id for m in errkb.lookup(SEED_MESSAGE)] for _ in range(50))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert 400 == len(results)
    assert all(serial == r for r in results)


def test_unknown_attribute_raises_attribute_error():
    """The lazy facade still raises AttributeError for unknown names."""
    with pytest.raises(AttributeError):
        errkb.nothing_here


def test_version_matches_pyproject():
    """errkb.__version__ is the version pyproject.toml declares."""
    from importlib.metadata import version

    assert version("errkb") == errkb.__version__
