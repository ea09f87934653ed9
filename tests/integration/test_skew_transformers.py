"""Added names on the real transformers wheels: the lazy top-level module exposes its models.

Runs only where the wheels are on disk (skipped otherwise): set ``ERRKB_TEST_WHEELS`` to a
folder holding them, made with

    pip download --no-deps transformers==4.45.0 -d DIR   # and 4.46.0, 4.48.3, 4.49.0, 4.50.0

Each pair present is checked by reading what the top-level package offers (seconds); the pair
4.48.3 / 4.49.0 is also mined whole with griffe (minutes on a busy machine).
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

import pytest

from errkb.diagnosis import explain
from errkb.mine._presence import exports
from errkb.testing import registry_from_dicts

WHEELS = Path(os.environ.get("ERRKB_TEST_WHEELS", "") or "/nonexistent")
pytestmark = pytest.mark.skipif(
    not any(WHEELS.glob("transformers-*.whl")), reason="set ERRKB_TEST_WHEELS to the wheels"
)

# (the name, the release that added it, the release before)
ADDED = [
    ("AutoModelForImageTextToText", "4.46.0", "4.45.0"),
    ("Qwen2_5_VLForConditionalGeneration", "4.49.0", "4.48.3"),
    ("Gemma3ForConditionalGeneration", "4.50.0", "4.49.0"),
]


@pytest.fixture(scope="module")
def unpacked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Each transformers wheel present, its package unpacked."""
    out = {}
    for wheel in sorted(WHEELS.glob("transformers-*-py3-none-any.whl")):
        version = wheel.name.split("-")[1]
        out[version] = tmp_path_factory.mktemp(f"tf-{version}")
        with zipfile.ZipFile(wheel) as archive:
            names = [n for n in archive.namelist() if n.startswith("transformers/")]
            archive.extractall(out[version], members=names)
    return out


@pytest.mark.parametrize(("name", "added", "before"), ADDED)
def test_the_lazy_top_level_module_offers_the_new_model(unpacked, name, added, before) -> None:
    """transformers' _import_structure and TYPE_CHECKING imports expose the model class from
    the release that added it, not before."""
    if not {added, before} <= set(unpacked):
        pytest.skip(f"needs the wheels of transformers {before} and {added}")
    assert (False, True) == (
        name in exports(unpacked[before], "transformers"),
        name in exports(unpacked[added], "transformers"),
    )


def test_qwen2_5_vl_is_an_added_name_of_4_49_0(unpacked) -> None:
    """Mined whole, 4.48.3 -> 4.49.0 gives one added record for the class, changed in 4.49.0,
    which explains the ImportError of a new model on an old transformers."""
    pytest.importorskip("griffe")
    from errkb.mine._history import history_records

    if not {"4.48.3", "4.49.0"} <= set(unpacked):
        pytest.skip("needs the wheels of transformers 4.48.3 and 4.49.0")
    records, counts = history_records(
        "transformers", [("4.48.3", unpacked["4.48.3"]), ("4.49.0", unpacked["4.49.0"])]
    )
    named = [
        r for r in records if r["skew"]["name"] == "transformers.Qwen2_5_VLForConditionalGeneration"
    ]
    assert 1 == len(named)
    assert ("added", "4.49.0", "4.48.3") == tuple(
        named[0]["skew"][k] for k in ("change", "changedIn", "lastBefore")
    )
    assert 0 == counts.get("pins-wrong", 0)
    message = (
        "cannot import name 'Qwen2_5_VLForConditionalGeneration' from 'transformers' "
        "(/usr/lib/python3/site-packages/transformers/__init__.py)"
    )
    diagnosis = explain(message, registry=registry_from_dicts(records))
    assert diagnosis is not None
    assert diagnosis.top is not None
    assert named[0]["id"] == diagnosis.top.record.id
