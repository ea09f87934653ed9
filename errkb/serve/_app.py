"""The ``errkb serve`` application: the lookup API, the console page, and their bounds.

One :class:`~errkb.registry.Registry` is loaded when the app is made and shared by every
request (its matcher is built once, under its lock). A diagnosis runs in a worker thread with
the probes off: the server never measures its own GPU for a customer's paste, and uses only the
what-if values the request gives, as ``errkb explain --no-probes`` uses its flags.

Every request runs under one time bound (503 past it). The work of a request (reading its
JSON, the diagnosis, the scan) runs in a pool of worker threads of bounded size, never on the
event loop, and stops itself when the bound passes or the client goes away (a
:class:`~errkb.serve._limits.Deadline`): the 503 is sent once the work has ended. Bodies are
bounded as :mod:`errkb.serve._limits` says; every figure is bounded to its plausible range
(:mod:`errkb.probes._plausible`); errors are JSON objects that name the field at fault, and
anything unexpected is a JSON 500 with a request id, logged once.

Only the server's own pages may call it (:class:`_Guard`): the ``Host`` header must name the
server (loopback names, its bound address, ``allowed_hosts``), a browser's ``Origin`` must be
the server's own, and a ``/v1`` POST must say it is JSON (or, for a scan, carry
:data:`CLIENT_HEADER`), which no page of another origin can send without asking first.
"""

from __future__ import annotations

import functools
import hmac
import io
import ipaddress
import json
import logging
import re
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import anyio
import anyio.from_thread
import anyio.lowlevel
import anyio.to_thread
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.requests import ClientDisconnect
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from errkb._version import __version__
from errkb.serve._fields import explain_body
from errkb.serve._limits import (
    DEFAULT_THREADS,
    DEFAULT_TIMEOUT,
    MAX_JSON_BYTES,
    MAX_UPLOAD_BYTES,
    Deadline,
    Problem,
    Stopped,
    Upload,
    read_limited,
)
from errkb.serve._openapi import openapi
from errkb.serve._shapes import MODEL_SHAPES

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Iterator, Sequence

    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from errkb.registry import Registry

__all__ = ["CLIENT_HEADER", "CSP", "LOOPBACK_NAMES", "SCAN_TYPES", "STATIC", "create_app"]

#: The page's Content-Security-Policy: its own script and style only, nothing inline.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: Where the console page and its files are.
STATIC = Path(__file__).resolve().parent / "static"
_SECURITY_HEADERS = (
    ("content-security-policy", CSP),
    ("x-content-type-options", "nosniff"),
    ("referrer-policy", "no-referrer"),
)
_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".png": "image/png",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".json": "application/json",
}
_STATIC_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")
_MARKDOWN = "text/markdown; charset=utf-8"
#: The header a ``/v1/scan`` upload must carry (any value; the console page sends it). A page
#: of another origin cannot add it without a CORS preflight, which this server never grants.
CLIENT_HEADER = "X-Errkb-Client"
#: The content types of a ``/v1/scan`` upload: a log, plain or gzip.
SCAN_TYPES = ("text/plain", "application/gzip", "application/x-gzip", "application/octet-stream")
#: Host names that always mean this machine (``*.localhost`` too, RFC 6761).
LOOPBACK_NAMES = ("localhost",)
#: Where errors nobody expected are logged, once, with their request id.
LOG = logging.getLogger("errkb.serve")
#: Lines of a pasted text read between two looks at the request's deadline.
_LINES_PER_CHECK = 512


def _error(problem: Problem) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if problem.status == 401 else None
    return JSONResponse(problem.to_dict(), status_code=problem.status, headers=headers)


def _internal(request_id: str) -> JSONResponse:
    """The answer to a request that failed where nobody expected: no traceback, an id."""
    body = {
        "status": 500,
        "error": f"internal error: the server logged it as request {request_id}",
        "request_id": request_id,
    }
    return JSONResponse(body, status_code=500)


class _Hosts:
    """The names a request's ``Host`` header may give: what stops DNS rebinding.

    A page whose name an attacker re-points at 127.0.0.1 is same-origin with itself, and the
    browser lets it read the answers; its requests still say its own name in ``Host``. So only
    names that cannot be re-pointed are taken: ``localhost`` and ``*.localhost``, loopback
    addresses, the address the server is bound to (any address when bound to all of them:
    an address is never looked up), and the names the operator allowed. ``*`` allows any.
    """

    def __init__(self, bound: str, allowed: Sequence[str]) -> None:
        self.bound = _bare(bound)
        self.allowed = frozenset(_bare(a) for a in allowed)
        ip = _ip(self.bound)
        self.wildcard = ip is not None and ip.is_unspecified

    def __contains__(self, host: str) -> bool:
        name = _bare(host)
        if "*" in self.allowed or name in self.allowed or name == self.bound:
            return True
        if name in LOOPBACK_NAMES or name.endswith(".localhost"):
            return True
        ip = _ip(name)
        return ip is not None and (ip.is_loopback or self.wildcard)


def _bare(host: str) -> str:
    """A host name or address without brackets, port or trailing dot, in lower case."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host[1:]
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host.rstrip(".")


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        return None


def _one(headers: list[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    """The value of header ``name``; :class:`Problem` 400 when the request sends it twice."""
    values = [v for k, v in headers if k == name]
    if len(values) > 1:
        said = name.decode().title()
        raise Problem(
            400, f"{said}: the request sends this header {len(values)} times; send it once"
        )
    return values[0] if values else None


def _media_type(value: bytes | None) -> str:
    return (value or b"").decode("latin-1").partition(";")[0].strip().lower()


class _Guard:
    """Security headers and a request id on every response; who may ask, checked first.

    In this order: the ``Host`` header names this server (403), a browser's ``Origin`` is
    this server's own (403), one ``Authorization`` header (400) with the token (401, compared
    as UTF-8 bytes in constant time), and a ``/v1`` POST says what it sends (415; a scan also
    needs :data:`CLIENT_HEADER`, 403). Anything the app raises that nobody expected is logged
    once, with the request id, and answered as a JSON 500 if no answer has started.
    """

    def __init__(self, app: ASGIApp, token: str | None, hosts: _Hosts) -> None:
        self.app, self.hosts = app, hosts
        self.token = token.encode("utf-8") if token is not None else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = secrets.token_hex(8)
        scope.setdefault("state", {})["request_id"] = request_id
        started = False

        async def send_secured(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                headers = MutableHeaders(scope=message)
                for name, value in _SECURITY_HEADERS:
                    headers[name] = value
                headers["x-request-id"] = request_id
            await send(message)

        try:
            try:
                self._check(scope)
            except Problem as problem:
                await _error(problem)(scope, receive, send_secured)
                return
            await self.app(scope, receive, send_secured)
        except Exception:
            LOG.exception(
                "errkb serve: request %s (%s %s) failed", request_id, scope["method"], scope["path"]
            )
            if not started:
                await _internal(request_id)(scope, receive, send_secured)

    def _check(self, scope: Scope) -> None:
        headers: list[tuple[bytes, bytes]] = scope["headers"]
        host = _one(headers, b"host")
        if host is None:
            raise Problem(400, "Host: the request names no host")
        shown = host.decode("latin-1")
        if shown not in self.hosts:
            raise Problem(
                403,
                f"Host: {shown[:80]!r} does not name this server; start it with "
                f"--allowed-host NAME to be reached under another name",
                "Host",
            )
        origin = _one(headers, b"origin")
        if origin is not None and not _same_origin(origin.decode("latin-1"), shown):
            raise Problem(
                403,
                "Origin: only the server's own pages may call it, not other web pages",
                "Origin",
            )
        if not scope["path"].startswith("/v1/"):
            return
        given = _one(headers, b"authorization")
        if self.token is not None:
            scheme, _, value = (given or b"").partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(value.strip(), self.token):
                said = "a token" if not given else "the right token: the token sent was refused"
                raise Problem(401, f"this server needs {said}: Authorization: Bearer <token>")
        if scope["method"] != "POST":
            return
        kind = _media_type(_one(headers, b"content-type"))
        if scope["path"] == "/v1/scan":
            if kind not in SCAN_TYPES:
                raise Problem(
                    415, f"Content-Type: a scan takes {', '.join(SCAN_TYPES)}", "Content-Type"
                )
            if _one(headers, CLIENT_HEADER.lower().encode()) is None:
                raise Problem(
                    403,
                    f"{CLIENT_HEADER}: a scan needs this header (any value), which other web "
                    "pages cannot send",
                    CLIENT_HEADER,
                )
        elif kind != "application/json":
            raise Problem(415, "Content-Type: expected application/json", "Content-Type")


def _same_origin(origin: str, host: str) -> bool:
    """Whether a browser's ``Origin`` is the page of this ``Host`` (http or https)."""
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and parts.netloc.lower() == host.strip().lower()


class _Server:
    """The handlers, with what they share: the registry, the bounds and the worker threads."""

    def __init__(
        self,
        registry: Registry,
        *,
        timeout: float,
        max_json: int,
        max_upload: int,
        static: Path,
        threads: int,
        token_required: bool,
    ) -> None:
        self.registry = registry
        self.token_required = token_required
        self.timeout = timeout
        self.max_json = max_json
        self.max_upload = max_upload
        self.static = static
        self.threads = threads
        # One pool per event loop (a test client starts a loop per request).
        self._limiter: anyio.lowlevel.RunVar[anyio.CapacityLimiter] = anyio.lowlevel.RunVar(
            f"errkb-serve-threads-{id(self)}"
        )

    def bounded(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` under the time bound, with its problems as JSON error responses."""

        @functools.wraps(handler)
        async def run(request: Request) -> Response:
            deadline = request.state.deadline = Deadline(self.timeout)
            try:
                with anyio.fail_after(self.timeout):
                    return await handler(request)
            except (TimeoutError, Stopped):
                deadline.stop("the time bound passed")
                return _error(
                    Problem(
                        503,
                        f"the request took longer than the server's bound of {self.timeout:g} s"
                        " and was stopped; try a shorter text, or ask again when the server is "
                        "less busy",
                    )
                )
            except Problem as problem:
                return _error(problem)
            except ClientDisconnect:  # gone while its body was read: nobody reads an answer
                deadline.stop("the client went away")
                return _error(Problem(400, "the client went away before its body was read"))

        return run

    def _pool(self) -> anyio.CapacityLimiter:
        try:
            return self._limiter.get()
        except LookupError:
            limiter = anyio.CapacityLimiter(self.threads)
            self._limiter.set(limiter)
            return limiter

    async def in_thread(self, request: Request, work: Callable[[Deadline], Any]) -> Any:
        """``work(deadline)`` in one of the worker threads, once one is free.

        The thread is waited for, never abandoned: ``work`` stops itself at the request's
        deadline (``Deadline.check`` between pieces), and so does it when the client goes
        away, which is watched for while it runs once the body has been read.
        """
        deadline: Deadline = request.state.deadline

        def run() -> Any:
            deadline.check()  # waited past the bound for a free thread: do nothing
            return work(deadline)

        failed: Exception | None = None
        async with anyio.create_task_group() as group:
            if getattr(request, "_stream_consumed", False):
                group.start_soon(_watch_disconnect, request, deadline)
            try:
                result = await anyio.to_thread.run_sync(run, limiter=self._pool())
            except Exception as exc:  # raised as itself, not in a task group's ExceptionGroup
                failed = exc
            finally:
                group.cancel_scope.cancel()
        if failed is not None:
            raise failed
        return result

    # -- the API -----------------------------------------------------------------------------

    async def explain(self, request: Request) -> Response:
        markdown = _wants_markdown(request)
        detail = request.query_params.get("detail", "short")
        if detail not in ("short", "long"):
            raise Problem(422, "detail: expected 'short' or 'long'", "detail")
        raw = await read_limited(
            request.stream(), request.headers.get("content-length"), self.max_json, "the body"
        )

        def work(deadline: Deadline) -> Response:
            from errkb._attrs import attrs
            from errkb.diagnosis import explain_lines
            from errkb.findings import empty_dict
            from errkb.options import Options
            from errkb.render import render_json, render_markdown

            text, given = explain_body(raw)
            deadline.check()
            options = Options(probes=False, given=given)
            options = attrs.evolve(options, timeout=min(options.timeout, deadline.left()))
            diagnosis = explain_lines(
                _checked_lines(text, deadline), options=options, registry=self.registry
            )
            deadline.check()
            if markdown:
                shown = (
                    render_markdown(diagnosis, detail=detail)  # type: ignore[arg-type]
                    if diagnosis is not None
                    else "errkb: no known error matches this text\n"
                )
                return Response(shown, media_type=_MARKDOWN)
            body = render_json(diagnosis) if diagnosis is not None else json.dumps(empty_dict())
            return Response(body, media_type="application/json")

        response: Response = await self.in_thread(request, work)
        return response

    async def scan(self, request: Request) -> Response:
        chunks = request.stream().__aiter__()
        deadline: Deadline = request.state.deadline

        async def pull() -> bytes | None:
            try:
                with anyio.fail_after(deadline.left()):
                    return await chunks.__anext__()
            except StopAsyncIteration:
                return None
            except TimeoutError:
                deadline.stop("the time bound passed")
            except ClientDisconnect:
                deadline.stop("the client went away")
            raise Stopped(deadline.why)

        gzip = request.headers.get("content-encoding", "").strip().lower() == "gzip"

        def work(deadline: Deadline) -> dict[str, object]:
            from errkb._scanreport import report
            from errkb.scan import scan_part

            upload = Upload(
                lambda: anyio.from_thread.run(pull),
                limit=self.max_upload,
                gzip=gzip,
                check=deadline.check,
            )
            stream = io.BufferedReader(upload, buffer_size=1 << 20)
            # The upload is one source, named as the console names it, with no host or year.
            part = scan_part(stream, source="upload", registry=self.registry)
            deadline.check()
            return {**report(part, self.registry), "notes": upload.notes}

        return JSONResponse(await self.in_thread(request, work))

    async def records(self, request: Request) -> Response:
        query = request.query_params
        limit = _int_param(query.get("limit"), "limit", 100, 1, 1000)
        offset = _int_param(query.get("offset"), "offset", 0, 0, None)
        tag, library = query.get("tag"), query.get("library")

        def work(_: Deadline) -> dict[str, object]:
            # From what a listing shows: the mined packs list from their index, no body read.
            refs = self.registry.listed(tag=tag or None, library=library or None)
            page = refs[offset : offset + limit]
            return {
                "total": len(refs),
                "limit": limit,
                "offset": offset,
                "records": [
                    {
                        "id": r.id,
                        "slug": r.slug,
                        "title": r.title,
                        "library": r.library,
                        "tags": list(r.tags),
                    }
                    for r in page
                ],
            }

        return JSONResponse(await self.in_thread(request, work))

    async def record(self, request: Request) -> Response:
        key = request.path_params["id"]
        markdown = _wants_markdown(request)

        def work(_: Deadline) -> Response:
            from errkb.exceptions import RegistryError
            from errkb.options import Options
            from errkb.render import render_record, render_record_markdown

            try:
                record = self.registry.get(key)
            except RegistryError:
                shown = key if len(key) <= 80 else key[:77] + "..."
                raise Problem(404, f"no record has the id or slug {shown!r}", "id") from None
            if markdown:
                return Response(render_record_markdown(record), media_type=_MARKDOWN)
            out = io.StringIO()
            render_record(record, Options(file=out, color=False, width=100))
            return JSONResponse({"record": record.to_json(), "explanation": out.getvalue()})

        response: Response = await self.in_thread(request, work)
        return response

    async def model_shapes(self, _: Request) -> Response:
        return JSONResponse({"shapes": list(MODEL_SHAPES)})

    async def healthz(self, _: Request) -> Response:
        health: dict[str, object] = {
            "status": "ok",
            "records": len(self.registry),
            "version": __version__,
        }
        # So the page asks for a token before its first /v1 request, not after a 401 (which a
        # browser logs as an error). Only on a server with a token: a 401 says as much anyway.
        if self.token_required:
            health["token_required"] = True
        return JSONResponse(health)

    async def openapi(self, _: Request) -> Response:
        return JSONResponse(openapi())

    # -- the page ----------------------------------------------------------------------------

    async def page(self, _: Request) -> Response:
        return self._file("index.html")

    async def static_file(self, request: Request) -> Response:
        return self._file(request.path_params["name"])

    def _file(self, name: str) -> Response:
        path = self.static / name
        if (
            not _STATIC_NAME.fullmatch(name)
            or ".." in name
            or path.suffix not in _TYPES
            or not path.is_file()
        ):
            what = "the console page is not installed" if name == "index.html" else "no such file"
            raise Problem(404, what)
        return FileResponse(
            path, media_type=_TYPES[path.suffix], headers={"Cache-Control": "no-cache"}
        )


async def _watch_disconnect(request: Request, deadline: Deadline) -> None:
    """Stop the request's work when its client goes away (its body already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            deadline.stop("the client went away")
            return


def _checked_lines(text: str, deadline: Deadline) -> Iterator[str]:
    """The lines of ``text``, with a look at the deadline every few hundred of them."""
    for number, line in enumerate(text.splitlines(keepends=True)):
        if number % _LINES_PER_CHECK == 0:
            deadline.check()
        yield line


def _wants_markdown(request: Request) -> bool:
    """Whether the response is to be Markdown: ``?format=markdown`` or ``Accept``."""
    form = request.query_params.get("format")
    if form is not None:
        if form not in ("json", "markdown"):
            raise Problem(422, "format: expected 'json' or 'markdown'", "format")
        return form == "markdown"
    return "text/markdown" in request.headers.get("accept", "")


def _int_param(value: str | None, name: str, default: int, low: int, high: int | None) -> int:
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        number = low - 1
    if number < low or (high is not None and number > high):
        top = f" and at most {high}" if high is not None else ""
        raise Problem(422, f"{name}: expected an integer of at least {low}{top}", name)
    return number


def create_app(
    *,
    registry: Registry | None = None,
    records: Sequence[str] = (),
    token: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    max_json: int = MAX_JSON_BYTES,
    max_upload: int = MAX_UPLOAD_BYTES,
    static: Path = STATIC,
    threads: int = DEFAULT_THREADS,
    host: str = "127.0.0.1",
    allowed_hosts: Sequence[str] = (),
) -> ASGIApp:
    """The ASGI app of ``errkb serve``.

    Args:
        registry: the records to serve; by default errkb's own (with ``records`` added).
        records: extra record files or folders, as ``errkb --records``.
        token: when set, every ``/v1`` request must carry ``Authorization: Bearer <token>``.
        timeout: seconds one request may take before it gets 503 (and its work stops).
        max_json: the largest JSON body in bytes (413 past it).
        max_upload: the most text a log upload is read for, after decompression.
        static: the folder of the console page (``index.html``, its script and style).
        threads: the worker threads diagnoses and scans share (more requests wait).
        host: the address the server is bound to: a ``Host`` header may name it.
        allowed_hosts: more names a ``Host`` header may give (``*``: any), for a server
            reached under a name of its own (a reverse proxy's, a LAN name).
    """
    from errkb.registry import Registry, default_registry

    if registry is None:
        registry = Registry.from_paths(records, validate=True) if records else default_registry()
    registry.matcher  # noqa: B018 - built now, not by the first request
    server = _Server(
        registry,
        timeout=timeout,
        max_json=max_json,
        max_upload=max_upload,
        static=static,
        threads=threads,
        token_required=token is not None,
    )
    bounded = server.bounded
    routes = [
        Route("/v1/explain", bounded(server.explain), methods=["POST"]),
        Route("/v1/scan", bounded(server.scan), methods=["POST"]),
        Route("/v1/records", bounded(server.records), methods=["GET"]),
        Route("/v1/records/{id}", bounded(server.record), methods=["GET"]),
        Route("/v1/model-shapes", bounded(server.model_shapes), methods=["GET"]),
        Route("/healthz", bounded(server.healthz), methods=["GET"]),
        Route("/openapi.json", bounded(server.openapi), methods=["GET"]),
        Route("/", bounded(server.page), methods=["GET"]),
        Route("/static/{name}", bounded(server.static_file), methods=["GET"]),
    ]

    async def not_found(_: Request, __: Exception) -> Response:
        return _error(Problem(404, "no such endpoint: see /openapi.json"))

    async def not_allowed(request: Request, __: Exception) -> Response:
        return _error(Problem(405, f"{request.method} is not allowed here"))

    async def internal(request: Request, __: Exception) -> Response:
        # Starlette answers with this, then raises on: _Guard logs it, once.
        return _internal(request.scope.get("state", {}).get("request_id", "?"))

    app = Starlette(
        routes=routes,
        exception_handlers={404: not_found, 405: not_allowed, Exception: internal},
    )
    return _Guard(app, token, _Hosts(host, allowed_hosts))
