"""The listings of installers' folders kept between processes (errkb._dists), in real children.

Each child gets its own ``PYTHONPYCACHEPREFIX``, so the kept file lands in a temporary folder
(as Python's bytecode would) and never in the checkout.
"""

from __future__ import annotations

import json
import os
import time

from tests.helpers import run_python

_LIST = """
import json, sys
sys.path.insert(0, sys.argv[1])
from errkb import _dists
print(json.dumps({
    "version": _dists.version("acme-gears"),
    "records": [(e.name, e.value) for e in _dists.entry_points("errkb.records")],
    "kept": sorted(json.loads(_dists._kept_path().read_text())["folders"])
    if _dists._kept_path().is_file() else None,
}))
"""


_GEARS = "[errkb.records]\ngears = acme:where\n"


def _dist(site, name: str, version: str, entry_points: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
    (info / "entry_points.txt").write_text(entry_points)


def _settle(site, ago: float = 60) -> None:
    """Give the folder a modification time older than the two seconds a listing waits."""
    old = time.time() - ago
    os.utime(site, (old, old))


def _site(tmp_path, entry_points: str = _GEARS, *, settled: bool = True):
    """A site-packages folder holding Acme_Gears 1.2.3 with ``entry_points``."""
    site = tmp_path / "lib" / "site-packages"
    site.mkdir(parents=True)
    _dist(site, "Acme_Gears", "1.2.3", entry_points)
    if settled:
        _settle(site)
    return site


def _listed(tmp_path, site, *, bytecode: bool = True) -> dict:
    """What a child with ``site`` first on its path lists, its bytecode under tmp_path."""
    env = {
        "PYTHONPYCACHEPREFIX": str(tmp_path / "pycache"),
        "PYTHONDONTWRITEBYTECODE": "" if bytecode else "1",
    }
    done = run_python(_LIST, str(site), env=env)
    assert 0 == done.returncode, done.stderr.decode()
    return json.loads(done.stdout)


def test_an_installer_folder_s_listing_is_kept_until_a_distribution_comes_or_goes(tmp_path):
    """A site-packages listing is kept between processes, by the folder's modification time.

    What a kept listing says is what the next process reads, without opening the files again:
    an entry_points.txt edited in place (no installer does that) is not seen. Installing a
    distribution, as an installer does, makes a new folder: the listing is made again.
    """
    site = _site(tmp_path, "[console_scripts]\ngears = acme:main\n")
    first = _listed(tmp_path, site)
    assert first["version"] == "1.2.3"
    assert first["records"] == []
    assert str(site) in first["kept"]

    entry_points = site / "Acme_Gears-1.2.3.dist-info" / "entry_points.txt"
    entry_points.write_text(_GEARS)  # site's time is as it was
    assert _listed(tmp_path, site)["records"] == [], "the kept listing stands: not read again"

    _dist(site, "Other", "0.1", "[errkb.records]\nother = other:where\n")
    _settle(site, ago=30)  # a time of its own, as the installer's making of a folder gives
    again = _listed(tmp_path, site)
    assert again["records"] == [["gears", "acme:where"], ["other", "other:where"]]
    assert again["version"] == "1.2.3"


def test_a_folder_changed_within_two_seconds_is_not_kept(tmp_path):
    site = _site(tmp_path, settled=False)
    out = _listed(tmp_path, site)
    assert out["records"] == [["gears", "acme:where"]]
    assert str(site) not in (out["kept"] or [])


def test_nothing_is_kept_where_python_writes_no_bytecode(tmp_path):
    site = _site(tmp_path)
    assert _listed(tmp_path, site, bytecode=False)["kept"] is None


def test_a_damaged_kept_file_is_passed_over_and_written_again(tmp_path):
    site = _site(tmp_path)
    _listed(tmp_path, site)
    [kept] = (tmp_path / "pycache").rglob("dists.*.json")
    mark = json.loads(kept.read_text())["folders"][str(site)][:2]  # the listing is what is bad
    unreadable = {"format": 1, "folders": {str(site): [*mark, [[3]]]}}
    for damage in (json.dumps(unreadable), "{not json"):
        kept.write_text(damage)
        out = _listed(tmp_path, site)
        assert (out["version"], out["records"]) == ("1.2.3", [["gears", "acme:where"]])
        assert str(site) in out["kept"]
