from __future__ import annotations

import json
import threading

import pytest
from conftest import NO_BLOCKS_MESSAGE, SEED_MESSAGE, run_python

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


def test_import_errkb_and_install_load_nothing_heavy():
    """A child that imports errkb and installs the hook has no rich, torch, transformers, records."""
    code = "import sys, json; import errkb; errkb.install(); print(json.dumps(sorted(sys.modules)))"
    proc = run_python(code)
    assert 0 == proc.returncode, proc.stderr
    loaded = set(json.loads(proc.stdout))
    heavy = {
        "rich",
        "torch",
        "transformers",
        "regex",
        "attrs",
        "errkb.records",
        "errkb.registry",
        "errkb.match",
    }
    assert set() == heavy & loaded


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


def test_explain_api_matches_the_cli_json():
    """errkb.explain(text).to_dict() is the object `errkb explain --json` prints."""
    from conftest import run_cli

    d = errkb.explain(f"ValueError: {NO_BLOCKS_MESSAGE}")
    cli = json.loads(
        run_cli("explain", "--json", "--no-probes", f"ValueError: {NO_BLOCKS_MESSAGE}").stdout
    )
    ours = json.loads(json.dumps(d.to_dict(), default=str))
    assert cli["matches"][0]["id"] == ours["matches"][0]["id"]
    assert cli["schema"] == ours["schema"]


def test_unknown_attribute_raises_attribute_error():
    """The lazy facade still raises AttributeError for unknown names."""
    with pytest.raises(AttributeError):
        errkb.nothing_here


def test_version_matches_pyproject():
    """errkb.__version__ is the version pyproject.toml declares."""
    from importlib.metadata import version

    assert version("errkb") == errkb.__version__
