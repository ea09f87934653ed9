"""uvicorn's h11 protocol with a bound on how long a client may take to send its headers.

uvicorn closes a keep-alive connection that stays idle after a response, but a connection
that never finishes the headers of its first request (a "slowloris" client, a half-open
socket) is held open for as long as the client likes, each holding a file descriptor. Here
every connection gets ``seconds`` from when it opens, or from its last response, to send the
whole head of its next request; past that it is closed. The body and the work are bounded by
the request's own time bound (:mod:`errkb.serve._app`).

A request h11 cannot read (a malformed head, a head over h11's 16 KiB, a bad
``Content-Length``) is answered as every other error of the server is, a JSON object, rather
than uvicorn's plain text.

The protocol is uvicorn's pure-Python h11 one (httptools, if installed, is not used), so that
the bound holds whatever else is installed.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["DEFAULT_HEADER_TIMEOUT", "header_timeout_protocol"]

#: Seconds a connection may take to send the head of a request.
DEFAULT_HEADER_TIMEOUT = 10.0


def header_timeout_protocol(seconds: float) -> type[asyncio.Protocol]:
    """The h11 protocol class of uvicorn, closing a connection ``seconds`` after it went quiet."""

    class HeaderTimeoutProtocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            body = json.dumps({"status": 400, "error": f"not a valid HTTP request ({msg})"})
            head = h11.Response(
                status_code=400,
                headers=[
                    (b"content-type", b"application/json"),
                    (b"x-content-type-options", b"nosniff"),
                    (b"connection", b"close"),
                ],
                reason=b"Bad Request",
            )
            for event in (head, h11.Data(data=body.encode()), h11.EndOfMessage()):
                self.transport.write(self.conn.send(event) or b"")
            self.transport.close()

        def _arm(self) -> None:
            self._disarm()
            self._head_timer = self.loop.call_later(seconds, self._head_timeout)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timeout(self) -> None:
            self._head_timer = None
            waiting = self.conn.their_state is h11.IDLE
            idle = self.cycle is None or self.cycle.response_complete
            if waiting and idle and not self.transport.is_closing():
                self.transport.close()

    return HeaderTimeoutProtocol
