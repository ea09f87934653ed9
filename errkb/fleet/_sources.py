"""A fleet's sources: what the user named, listed as files, opened, and cut into pieces.

A source is named as a path, a glob (``logs/**/*.log.gz``), a folder (read recursively) or an
fsspec URL (``s3://bucket/logs/**/*.gz``, ``gs://``, ``abfs://``, ``file://``). Local names are
listed with the standard library; URLs with fsspec (the ``fleet`` extra), and the protocol's
own package (s3fs, gcsfs, adlfs) is the user's to install. Compression is read from the
extension: ``.gz``, ``.bz2``, ``.xz``/``.lzma``, and ``.zst``/``.zstd`` with the zstandard
package installed; a local file with none of them that starts with gzip's magic bytes is read
as gzip too (as ``errkb scan`` always has).
"""

from __future__ import annotations

import glob
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from errkb._attrs import attrs

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "Piece",
    "Source",
    "compression_of",
    "decompressed",
    "list_sources",
    "open_source",
    "pieces",
]

#: Extensions and the codec each names.
COMPRESSIONS = {
    ".gz": "gzip",
    ".bz2": "bz2",
    ".xz": "xz",
    ".lzma": "xz",
    ".zst": "zstd",
    ".zstd": "zstd",
}
#: Plain files larger than this are scanned in byte ranges of about this size.
SPLIT = 64 << 20
_WILDCARDS = "*?["


@attrs.frozen(kw_only=True)
class Source:
    """One file of the fleet, as listed: where, how big, when written, how compressed."""

    url: str
    root: str
    size: int
    mtime: float | None
    etag: str | None = None
    compression: str | None = None

    @property
    def remote(self) -> bool:
        """Whether it is read through fsspec (a URL), not the local file system."""
        return "://" in self.url and not self.url.startswith("file://")


@attrs.frozen(kw_only=True)
class Piece:
    """A part of a source to scan: bytes ``start:end`` (``end`` None: to the end)."""

    source: Source
    host: str | None
    start: int = 0
    end: int | None = None
    #: Whether ``start:end`` is a range of a plain file, and which of its ends fall inside the
    #: bytes to scan (those move to a quiet line: errkb.scan.range_cut).
    ranged: bool = False
    cut_start: bool = False
    cut_end: bool = False


def compression_of(path: str) -> str | None:
    """The codec a file's extension names (:data:`COMPRESSIONS`), or None."""
    lowered = path.lower()
    return next((c for ext, c in COMPRESSIONS.items() if lowered.endswith(ext)), None)


def _root(spec: str) -> str:
    """The fixed part of a source name: a folder itself, or a glob up to its first wildcard."""
    at = min((spec.find(c) for c in _WILDCARDS if c in spec), default=-1)
    if at < 0:
        return spec if not Path(spec).is_file() else str(Path(spec).parent)
    return spec[: spec.rfind("/", 0, at) + 1].rstrip("/") or "."


def _local(spec: str) -> list[Source]:
    spec = spec.removeprefix("file://")
    root = _root(spec)
    if any(c in spec for c in _WILDCARDS):
        names = sorted(glob.glob(spec, recursive=True))  # noqa: PTH207 - an absolute pattern too
    elif Path(spec).is_dir():
        names = sorted(str(p) for p in Path(spec).rglob("*"))
    else:
        names = [spec]
    out = []
    for name in names:
        path = Path(name)
        if path.is_dir():
            continue
        try:
            stat = path.stat()
        except OSError:
            stat = None  # listed, and reported as failed when it is read
        out.append(
            Source(
                url=name,
                root=root,
                size=stat.st_size if stat else 0,
                mtime=stat.st_mtime if stat else None,
                compression=compression_of(name),
            )
        )
    return out


def _remote(spec: str, storage_options: Mapping[str, Any]) -> list[Source]:
    try:
        import fsspec
    except ImportError:
        from errkb.exceptions import UsageError

        raise UsageError(
            f"{spec}: reading a URL needs fsspec: pip install 'errkb[fleet]'"
        ) from None
    fs, path = fsspec.core.url_to_fs(spec, **storage_options)
    protocol = spec.split("://", 1)[0]
    if any(c in path for c in _WILDCARDS):
        found = fs.glob(path, detail=True)
    elif fs.isdir(path):
        found = fs.find(path, detail=True)
    else:
        found = {path: fs.info(path)}
    root = _root(spec)
    out = []
    for name, info in sorted(found.items()):
        if info.get("type") == "directory":
            continue
        url = f"{protocol}://{name}"
        mtime = info.get("LastModified") or info.get("mtime") or info.get("updated")
        out.append(
            Source(
                url=url,
                root=root,
                size=int(info.get("size") or 0),
                mtime=_seconds(mtime),
                etag=str(info.get("ETag") or info.get("etag") or "") or None,
                compression=compression_of(name),
            )
        )
    return out


def _seconds(value: object) -> float | None:
    """A modification time as fsspec's file systems give it, in seconds since the epoch."""
    if value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    timestamp = getattr(value, "timestamp", None)
    if callable(timestamp):
        return float(timestamp())
    from datetime import datetime

    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def list_sources(
    specs: Iterable[str], storage_options: Mapping[str, Any] | None = None
) -> list[Source]:
    """Every file the names stand for, each once, in name order."""
    seen: dict[str, Source] = {}
    for spec in specs:
        found = _remote(spec, storage_options or {}) if _is_url(spec) else _local(spec)
        for source in found:
            seen.setdefault(source.url, source)
    return [seen[url] for url in sorted(seen)]


def _is_url(spec: str) -> bool:
    return "://" in spec and not spec.startswith("file://")


def pieces(
    sources: Iterable[Source],
    *,
    split: int = SPLIT,
    starts: Mapping[str, tuple[int, int | None]] | None = None,
) -> list[Piece]:
    """The pieces to scan: a compressed file whole; a plain one in ranges of ``split`` bytes.

    ``starts`` gives, by URL, the bytes to scan of a source read before (``--state``).
    """
    from errkb.scan import source_host

    out = []
    for source in sources:
        host = source_host(source.url.split("://", 1)[-1], source.root.split("://", 1)[-1])
        start, end = (starts or {}).get(source.url, (0, None))
        stop = source.size if end is None else end
        if source.compression is not None or stop - start <= split:
            out.append(Piece(source=source, host=host, start=start, end=end))
            continue
        out.extend(
            Piece(
                source=source,
                host=host,
                start=at,
                end=min(stop, at + split),
                ranged=True,
                cut_start=at > start,
                cut_end=at + split < stop,
            )
            for at in range(start, stop, split)
        )
    return out


def open_source(source: Source, storage_options: Mapping[str, Any] | None = None) -> BinaryIO:
    """The raw bytes of ``source`` (not decompressed), seekable."""
    if source.remote:
        import fsspec

        return fsspec.open(source.url, "rb", **(storage_options or {})).open()  # type: ignore[no-any-return]
    return Path(source.url.removeprefix("file://")).open("rb")


def decompressed(raw: BinaryIO, compression: str | None) -> BinaryIO:
    """``raw`` read through its codec; plain (or gzip by its magic bytes) when none is named."""
    if compression is None:
        head = raw.read(2)
        raw.seek(0)
        compression = "gzip" if head == b"\x1f\x8b" else None
    if compression == "gzip":
        import gzip

        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if compression == "bz2":
        import bz2

        return bz2.BZ2File(raw)  # type: ignore[return-value]
    if compression == "xz":
        import lzma

        return lzma.LZMAFile(raw)  # type: ignore[return-value]
    if compression == "zstd":
        try:
            import zstandard
        except ImportError:
            raise OSError(
                "reading .zst needs the zstandard package: pip install zstandard"
            ) from None
        reader: BinaryIO = zstandard.ZstdDecompressor().stream_reader(raw)
        return reader
    return raw
