"""The bounds of ``errkb serve``: body sizes, the upload's decompressed size, and the errors.

A JSON body is counted while it is read (its ``Content-Length`` is checked first, but a client
may send more than it announced, or send it chunked). A log upload is decompressed a piece at
a time and bounded by what it decompresses to, so a gzip bomb is cut after that many bytes,
never expanded whole. Nothing here imports Starlette: the reader of an upload is a plain
binary stream, fed one raw piece at a time by whatever receives the request.

Work on a request runs in a worker thread, which nothing can kill: it stops itself. A
:class:`Deadline` is what it asks, between one piece of work and the next (a window of the
text, a megabyte of an upload): past the request's time bound, or once the client has gone,
:meth:`Deadline.check` raises :class:`Stopped`, and the work ends within one piece.
"""

from __future__ import annotations

import io
import threading
import time
import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Callable

__all__ = [
    "DEFAULT_THREADS",
    "DEFAULT_TIMEOUT",
    "MAX_JSON_BYTES",
    "MAX_UPLOAD_BYTES",
    "Deadline",
    "Problem",
    "Stopped",
    "Upload",
    "read_limited",
]

#: The largest JSON request body, in bytes; a larger one gets 413.
MAX_JSON_BYTES = 10 * 1024 * 1024
#: The most text a log upload is read for, in bytes after decompression; the rest is cut.
MAX_UPLOAD_BYTES = 1024 * 1024 * 1024
#: Seconds one request may take before it gets 503.
DEFAULT_TIMEOUT = 10.0
#: Worker threads for diagnoses and scans, shared by every request: more wait for a free one
#: (within their time bound). Two cores run two diagnoses at once; the others add queueing.
DEFAULT_THREADS = 4
#: The most bytes one step of decompression makes.
_STEP = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"


class Problem(Exception):  # noqa: N818 - an HTTP problem, not a programming error
    """A request the server refuses: an HTTP status, a message, and the field at fault."""

    def __init__(self, status: int, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field

    def to_dict(self) -> dict[str, object]:
        """The JSON body of the error response."""
        body: dict[str, object] = {"status": self.status, "error": self.message}
        if self.field is not None:
            body["field"] = self.field
        return body


class Stopped(Exception):  # noqa: N818 - a request that was stopped, not a programming error
    """The request's work stopped: its time bound passed, or its client went away."""


class Deadline:
    """When a request's work must stop: a time on the monotonic clock, or its client gone.

    Shared between the event loop (which calls :meth:`stop` when the client goes away) and
    the worker thread (which calls :meth:`check` between pieces of work).
    """

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds
        self._stop = threading.Event()
        self.why = ""

    def stop(self, why: str) -> None:
        """Tell the work to stop at its next :meth:`check`."""
        self.why = self.why or why
        self._stop.set()

    def left(self) -> float:
        """Seconds until the bound, 0 when it has passed."""
        return max(0.0, self.at - time.monotonic())

    def check(self) -> None:
        """Raise :class:`Stopped` once the bound has passed or :meth:`stop` was called."""
        if self._stop.is_set():
            raise Stopped(self.why)
        if time.monotonic() >= self.at:
            self.stop("the time bound passed")
            raise Stopped(self.why)


async def read_limited(
    chunks: AsyncIterator[bytes], declared: str | None, limit: int, what: str
) -> bytes:
    """The whole body, or 413 as soon as it is known to be over ``limit`` bytes.

    ``declared`` is the ``Content-Length`` header: a body announced too large is refused
    before any of it is read; one that turns out larger than announced is refused when the
    count passes the limit.
    """
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise Problem(400, f"Content-Length is not a number: {declared[:40]!r}") from None
        if size > limit:
            raise Problem(413, f"{what} is {size:,} bytes: the limit is {limit:,}")
    parts: list[bytes] = []
    size = 0
    async for chunk in chunks:
        size += len(chunk)
        if size > limit:
            raise Problem(413, f"{what} is over the limit of {limit:,} bytes")
        parts.append(chunk)
    return b"".join(parts)


class Upload(io.RawIOBase):
    """A log upload as a binary stream: plain or gzip, decompressed as read, at most ``limit``.

    ``pull`` gives the next raw piece of the body (``None`` at its end); ``check`` is called
    before each piece is read or decompressed (a :meth:`Deadline.check`). Gzip is recognised by
    ``gzip=True`` (the request said ``Content-Encoding: gzip``) or by its magic bytes; members
    written one after another are read in turn, as ``gzip`` does. Past ``limit`` bytes of text
    nothing more is read or decompressed, and :attr:`notes` says where the text was cut.
    ``UploadError`` (a :class:`Problem` with status 400) when the gzip data is broken.
    """

    def __init__(
        self,
        pull: Callable[[], bytes | None],
        *,
        limit: int,
        gzip: bool,
        check: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__()
        self._pull = pull
        self._check = check
        self._limit = limit
        self._gzip: bool | None = True if gzip else None
        self._inflate: zlib._Decompress | None = None
        self._src = b""  # raw bytes not decompressed yet
        self._out = memoryview(b"")
        self._done = False
        #: Bytes of text handed on so far.
        self.size = 0
        #: What was cut, in the words ``errkb explain -`` uses for what it cuts.
        self.notes: list[str] = []

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Fill ``buffer`` from the text; 0 at its end (or where it was cut)."""
        while not self._out and not self._done:
            self._fill()
        n = min(len(buffer), len(self._out))
        buffer[:n] = self._out[:n]
        self._out = self._out[n:]
        return n

    def _raw(self) -> bytes | None:
        """The next raw bytes to decompress or hand on; None at the end of the body."""
        if self._src:
            src, self._src = self._src, b""
            return src
        while True:
            raw = self._pull()
            if raw is None or raw:
                break
        if raw is not None and self._gzip is None:
            self._gzip = raw[:2] == _GZIP_MAGIC
        return raw

    def _fill(self) -> None:
        self._check()
        room = self._limit - self.size
        raw = self._raw()
        if raw is None:
            if self._inflate is not None and not self._inflate.eof:
                raise Problem(400, "the gzip upload ends before its end-of-stream marker")
            self._done = True
            return
        if room <= 0:
            # Full: cut only if this more holds text, not the end of a gzip member.
            if self._gzip and not self._more_text(raw):
                return
            self._cut()
            return
        if not self._gzip:
            text = raw[:room]
            if len(raw) > room:
                self._src = raw[room:]
        else:
            text = self._decompress(raw, min(room, _STEP))
        self.size += len(text)
        self._out = memoryview(text)

    def _decompress(self, raw: bytes, most: int) -> bytes:
        if self._inflate is None or self._inflate.eof:
            self._inflate = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            text = self._inflate.decompress(raw, most)
        except zlib.error as exc:
            raise Problem(400, f"the upload is not valid gzip ({exc})") from None
        self._src = self._inflate.unconsumed_tail or (
            self._inflate.unused_data if self._inflate.eof else b""
        )
        return text

    def _more_text(self, raw: bytes) -> bool:
        """Whether gzip data ``raw`` decompresses to any text (one byte is asked for)."""
        more = self._decompress(raw, 1)
        if more:
            return True
        if not self._src and self._inflate is not None and self._inflate.eof:
            return False
        return bool(self._src)

    def _cut(self) -> None:
        self.notes.append(
            f"the upload was cut at {self._limit:,} bytes of text: what follows was not read"
        )
        self._done = True
