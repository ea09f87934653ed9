"""errkb.fleet._sources: names listed as files, compression by extension, pieces to scan."""

from __future__ import annotations

import gzip

from errkb.fleet._sources import decompressed, list_sources, open_source, pieces


def _tree(root):
    for name in ("a/2026-12-01/x.log", "a/2026-12-01/y.log.gz", "b/z.log", "b/notes.txt"):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"INFO ok\n")
    return root


def test_a_folder_is_listed_recursively_in_name_order(tmp_path):
    """Every file below a folder, once, sorted; the folder is the root of each."""
    root = _tree(tmp_path)
    found = list_sources([str(root)])
    assert [
        "a/2026-12-01/x.log",
        "a/2026-12-01/y.log.gz",
        "b/notes.txt",
        "b/z.log",
    ] == [str(s.url)[len(str(root)) + 1 :] for s in found]
    assert {str(root)} == {s.root for s in found}


def test_a_glob_and_a_file_url_name_the_same_files_once(tmp_path):
    """A recursive glob and file:// of one file: each file once; the glob's root is its fixed part."""
    root = _tree(tmp_path)
    found = list_sources([f"{root}/**/*.log*", f"file://{root}/b/z.log"])
    assert ["x.log", "y.log.gz", "z.log"] == [s.url.rsplit("/", 1)[1] for s in found]
    assert str(root) == found[0].root


def test_compression_comes_from_the_extension():
    """.gz .bz2 .xz .lzma .zst .zstd name their codec; anything else is plain."""
    from errkb.fleet._sources import compression_of

    names = ["a.gz", "a.bz2", "a.xz", "a.lzma", "a.zst", "a.ZSTD", "a.log", "a.gz.txt"]
    assert ["gzip", "bz2", "xz", "xz", "zstd", "zstd", None, None] == [
        compression_of(n) for n in names
    ]


def test_a_gzip_file_without_the_extension_is_read_by_its_magic_bytes(tmp_path):
    """As errkb scan always did: a plain-named file that starts with gzip's magic is gzip."""
    path = tmp_path / "rotated.1"
    path.write_bytes(gzip.compress(b"INFO ok\n"))
    (source,) = list_sources([str(path)])
    with open_source(source) as raw, decompressed(raw, source.compression) as stream:
        assert b"INFO ok\n" == stream.read()


def test_large_plain_files_are_cut_in_ranges_and_compressed_ones_are_not(tmp_path):
    """A plain file over the split size gives ranges whose inner ends move; a .gz stays whole."""
    (tmp_path / "big.log").write_bytes(b"x\n" * 50)
    (tmp_path / "big.log.gz").write_bytes(gzip.compress(b"x\n" * 50))
    cut = pieces(list_sources([str(tmp_path)]), split=40)
    assert [
        ("big.log", 0, 40, False, True),
        ("big.log", 40, 80, True, True),
        ("big.log", 80, 100, True, False),
        ("big.log.gz", 0, None, False, False),
    ] == [(p.source.url.rsplit("/", 1)[1], p.start, p.end, p.cut_start, p.cut_end) for p in cut]
