"""Plugins: the example plugin installed into a fresh venv, and a broken plugin skipped."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import venv
from pathlib import Path

import pytest
from helpers import DATA, SEED_MESSAGE

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = DATA / "example_plugin"
WIDGET = "RuntimeError: widget alpha jammed at 1200 rpm"


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ERRKB_", "PYTHON"))}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def plugin_venv(tmp_path_factory):
    """A fresh venv holding errkb (from the source tree) and the example plugin; its bin dir."""
    if not (ROOT / "pyproject.toml").exists():
        pytest.skip("needs the source tree to install from")
    env_dir = tmp_path_factory.mktemp("plugin") / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    subprocess.run(
        [str(bindir / "python"), "-m", "pip", "install", "-q", str(ROOT), str(PLUGIN)],
        check=True,
        capture_output=True,
        timeout=600,
        env=_env(),
    )
    return bindir


def _explain(bindir: Path, tmp_path: Path, *args: str, **env: str):
    return subprocess.run(
        [str(bindir / "errkb"), "explain", "--json", *args],
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
        env=_env(**env),
    )


def test_plugin_record_matches_in_a_fresh_venv(plugin_venv, tmp_path):
    """The plugin's record pack (entry point errkb.records) takes part in matching."""
    proc = _explain(plugin_venv, tmp_path, WIDGET)
    assert 0 == proc.returncode, proc.stderr
    assert "acme-widget-jammed" == json.loads(proc.stdout)["matches"][0]["id"]


def test_plugin_advisor_adds_a_solution_from_the_probe_reading(plugin_venv, tmp_path):
    """The plugin's advisor adds a computed solution that carries the plugin probe's reading."""
    proc = _explain(plugin_venv, tmp_path, WIDGET, ACME_SPARE_WIDGETS="7")
    out = json.loads(proc.stdout)
    assert {"max_rpm": 600} == out["solutions"][0]["settings"]
    assert "7 spare widgets" in out["solutions"][0]["text"]
    assert {"name": "spare_widgets", "value": 7, "unit": None, "source": "probe"} in out["facts"]


def test_autoinstall_variable_alone_installs_the_hook(plugin_venv, tmp_path):
    """ERRKB_AUTOINSTALL=1 alone (the .pth the wheel ships) diagnoses a plain script's error."""
    code = f"raise ValueError({SEED_MESSAGE!r})"
    proc = subprocess.run(
        [str(plugin_venv / "python"), "-c", code],
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
        env=_env(ERRKB_AUTOINSTALL="1"),
    )
    assert 1 == proc.returncode
    assert b"vllm-kv-cache-max-seq-len" in proc.stderr


def _broken_dist(site: Path) -> None:
    """An installed distribution whose entry points name a module that does not exist."""
    info = site / "broken_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[errkb.records]\nbroken = no_such_module_for_errkb\n"
        "[errkb.probes]\nbroken = no_such_module_for_errkb:probe\n"
    )


def test_broken_record_pack_is_reported_in_one_line_and_skipped(tmp_path):
    """A record pack whose module is missing costs one note line; the diagnosis still comes."""
    _broken_dist(tmp_path / "site")
    proc = subprocess.run(
        [sys.executable, "-m", "errkb", "explain", "--no-probes", SEED_MESSAGE],
        capture_output=True,
        timeout=120,
        check=False,
        env=_env(PYTHONPATH=str(tmp_path / "site"), NO_COLOR="1"),
    )
    assert 0 == proc.returncode, proc.stderr
    # One note, wrapped at the width as all plain text is.
    notes = proc.stdout.decode().split("errkb: note: ")[1:]
    mentions = [" ".join(n.split()) for n in notes if "no_such_module" in n]
    expected = (
        "plugin 'broken' (errkb.records = no_such_module_for_errkb) skipped: "
        "could not be loaded (ModuleNotFoundError: No module named 'no_such_module_for_errkb')"
    )
    assert [expected] == mentions
    assert "vllm-kv-cache-max-seq-len" in proc.stdout.decode()
