"""Packs end to end: `errkb explain` reads a pack named in ERRKB_RECORDS, cold and warm."""

from __future__ import annotations

import json

from helpers import gear_records, run_cli, write_pack


def test_errkb_explain_reads_a_pack_from_errkb_records(tmp_path, pack_cache):
    """End to end: a pack named in ERRKB_RECORDS, cached, its record's body shown."""
    records = gear_records(20)
    for r in records:
        r["documentation"] = "A long page. " * 5000  # over MIN_CACHED in all: cached
    pack = write_pack(tmp_path / "gears.jsonl", records)
    env = {"ERRKB_RECORDS": str(pack), "ERRKB_CACHE_DIR": str(pack_cache)}
    for run in ("cold", "warm"):
        out = run_cli("explain", "--json", "RuntimeError: gear9x slipped at 12 rpm", env=env)
        assert len(list((pack_cache / "packs").iterdir())) == 1, run
        assert out.returncode == 0, out.stderr
        data = json.loads(out.stdout)
        assert data["matches"][0]["id"] == "acme-gear-9"
        assert [s["text"] for s in data["solutions"]][:1] == ["Tighten gear 9."]
