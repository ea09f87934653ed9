"""errkb.records in a fresh interpreter: loading packs never imports errkb.packs."""

from __future__ import annotations

from helpers import record_pack, run_python


def test_loading_records_does_not_import_packs(tmp_path, good_record):
    """A child that loads a trusted pack through errkb.records alone never imports errkb.packs."""
    pack = record_pack(tmp_path, good_record)
    code = (
        "import sys; from errkb.records import load_refs; "
        "refs, problems = load_refs([sys.argv[1]], trusted=[sys.argv[1]]); "
        "print(len(refs), len(problems), 'errkb.packs' in sys.modules)"
    )
    proc = run_python(code, str(pack))
    assert 0 == proc.returncode, proc.stderr
    assert b"3 0 False" == proc.stdout.strip()
