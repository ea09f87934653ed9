"""docs/fleet-recipes.md runs: its Ray Data and Spark code, read from the page, scans a
generated fleet (tests/fleet_data.py) on the real engine, and gives what the serial scan of
the same files gives.

Each engine's test is skipped where the engine is not installed: neither is in the test
dependencies (they are large). The code blocks are those the page titles ``errkb_map.py``,
``ray_scan.py`` and ``spark_scan.py``, run as they are written.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from fleet_data import make_fleet

from errkb.scan import merge

RECIPES = Path(__file__).resolve().parents[2] / "docs" / "fleet-recipes.md"
_BLOCK = re.compile(
    r'^```python title="(?P<name>[\w.]+)"\n(?P<code>.*?)^```$', re.MULTILINE | re.DOTALL
)


def recipe(*names: str) -> dict:
    """The namespace in which the page's blocks ``names`` ran, one after another."""
    blocks = {m["name"]: m["code"] for m in _BLOCK.finditer(RECIPES.read_text(encoding="utf-8"))}
    # Not a module anyone can import: the engines' pickler sends its functions by value.
    namespace: dict = {"__name__": "errkb_fleet_recipe"}
    for name in names:
        exec(compile(blocks[name], f"{RECIPES}:{name}", "exec"), namespace)
    return namespace


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> tuple[Path, list[Path]]:
    """A small fleet: six hosts, two days, four files a host a day, gzip and plain."""
    root = tmp_path_factory.mktemp("fleet")
    return root, make_fleet(root, hosts=6, days=2, files=4, file_bytes=20_000)


def serial(files: list[Path], root: str, name, *, mtimes: bool) -> dict:
    """The page's map step on each file in turn, merged: what the engine must give."""
    scan_log = recipe("errkb_map.py")["scan_log"]
    parts = [
        scan_log(name(f), f.read_bytes(), root, f.stat().st_mtime if mtimes else None)
        for f in files
    ]
    return merge(parts).to_dict()


def test_the_serial_scan_finds_the_planted_errors(fleet):
    """The comparison has something to compare: known errors on every host, unknown shapes."""
    root, files = fleet
    result = serial(files, str(root), str, mtimes=True)
    assert len(result["groups"]) >= 3
    assert 6 == len({h for g in result["groups"] for h in g["hosts"]})
    assert result["unknown"]
    assert 0 == result["failed"]


def test_the_ray_data_recipe_gives_the_serial_result(fleet):
    """scan_with_ray on a local Ray: the same groups, shapes and sources as the serial scan."""
    ray = pytest.importorskip("ray")
    root, files = fleet
    scan_with_ray = recipe("errkb_map.py", "ray_scan.py")["scan_with_ray"]
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        result = scan_with_ray(str(root))
    finally:
        ray.shutdown()
    assert serial(files, str(root), str, mtimes=False) == result


def test_the_spark_recipe_gives_the_serial_result(fleet):
    """scan_with_spark on Spark in local mode (two cores): the same result as the serial scan."""
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and "JAVA_HOME" not in os.environ:
        pytest.skip("pyspark is installed but no Java runtime is (apt-get install default-jre)")
    from pyspark.sql import SparkSession

    root, files = fleet
    scan_with_spark = recipe("errkb_map.py", "spark_scan.py")["scan_with_spark"]
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("errkb-fleet-recipe")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    try:
        result = scan_with_spark(spark, root.as_uri())
    finally:
        spark.stop()
    expected = serial(files, root.as_uri(), lambda f: f"file:{f}", mtimes=True)
    assert expected == result
