"""The facade seen from outside: a fresh interpreter's imports, and the CLI's JSON."""

from __future__ import annotations

import json

from helpers import NO_BLOCKS_MESSAGE, run_cli, run_python

import errkb


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


def test_explain_api_matches_the_cli_json():
    """errkb.explain(text).to_dict() is the object `errkb explain --json` prints."""
    d = errkb.explain(f"ValueError: {NO_BLOCKS_MESSAGE}")
    cli = json.loads(
        run_cli("explain", "--json", "--no-probes", f"ValueError: {NO_BLOCKS_MESSAGE}").stdout
    )
    ours = json.loads(json.dumps(d.to_dict(), default=str))
    assert cli["matches"][0]["id"] == ours["matches"][0]["id"]
    assert cli["schema"] == ours["schema"]
