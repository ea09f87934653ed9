"""The ``errkb serve`` application: the lookup API, the console page, and their bounds.

One :class:`~errkb.registry.Registry` is loaded when the app is made and shared by every
request (its matcher is built once, under its lock). A diagnosis runs in a worker thread with
the probes off: the server never measures its own GPU for a customer's paste, and uses only the
what-if values the request gives, as ``errkb explain --no-probes`` uses its flags. Every
request runs under one time bound (503 past it); bodies are bounded as :mod:`errkb.serve._limits`
says; errors are JSON objects that name the field at fault.
"""

from __future__ import annotations

import functools
import hmac
import io
import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import anyio.from_thread
import anyio.to_thread
from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from errkb._version import __version__
from errkb.serve._fields import explain_body
from errkb.serve._limits import (
    DEFAULT_TIMEOUT,
    MAX_JSON_BYTES,
    MAX_UPLOAD_BYTES,
    Problem,
    Upload,
    read_limited,
)
from errkb.serve._openapi import openapi
from errkb.serve._shapes import MODEL_SHAPES

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Sequence

    from starlette.requests import Request
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from errkb.registry import Registry

__all__ = ["CSP", "STATIC", "create_app"]

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


def _error(problem: Problem) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if problem.status == 401 else None
    return JSONResponse(problem.to_dict(), status_code=problem.status, headers=headers)


class _Guard:
    """Security headers on every response; the token asked of every ``/v1`` request."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in _SECURITY_HEADERS:
                    headers[name] = value
            await send(message)

        if self.token is not None and scope["path"].startswith("/v1/"):
            given = dict(scope["headers"]).get(b"authorization", b"").decode("latin-1")
            scheme, _, value = given.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(
                value.strip().encode(), self.token.encode()
            ):
                said = "a token" if not given else "the right token"
                response = _error(
                    Problem(401, f"this server needs {said}: Authorization: Bearer <token>")
                )
                await response(scope, receive, send_secured)
                return
        await self.app(scope, receive, send_secured)


class _Server:
    """The handlers, with what they share: the registry and the bounds."""

    def __init__(
        self,
        registry: Registry,
        *,
        timeout: float,
        max_json: int,
        max_upload: int,
        static: Path,
    ) -> None:
        self.registry = registry
        self.timeout = timeout
        self.max_json = max_json
        self.max_upload = max_upload
        self.static = static

    def bounded(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """``handler`` under the time bound, with its problems as JSON error responses."""

        @functools.wraps(handler)
        async def run(request: Request) -> Response:
            try:
                with anyio.fail_after(self.timeout):
                    return await handler(request)
            except TimeoutError:
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

        return run

    async def in_thread(self, work: Callable[[], Any]) -> Any:
        """``work()`` in a worker thread; abandoned (left to finish) when the bound passes."""
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)

    # -- the API -----------------------------------------------------------------------------

    async def explain(self, request: Request) -> Response:
        markdown = _wants_markdown(request)
        detail = request.query_params.get("detail", "short")
        if detail not in ("short", "long"):
            raise Problem(422, "detail: expected 'short' or 'long'", "detail")
        raw = await read_limited(
            request.stream(), request.headers.get("content-length"), self.max_json, "the body"
        )
        text, given = explain_body(raw)

        def work() -> Response:
            from errkb.diagnosis import explain
            from errkb.findings import empty_dict
            from errkb.options import Options
            from errkb.render import render_json, render_markdown

            options = Options(probes=False, given=given)
            diagnosis = explain(text, options=options, registry=self.registry)
            if markdown:
                shown = (
                    render_markdown(diagnosis, detail=detail)  # type: ignore[arg-type]
                    if diagnosis is not None
                    else "errkb: no known error matches this text\n"
                )
                return Response(shown, media_type=_MARKDOWN)
            body = render_json(diagnosis) if diagnosis is not None else json.dumps(empty_dict())
            return Response(body, media_type="application/json")

        response: Response = await self.in_thread(work)
        return response

    async def scan(self, request: Request) -> Response:
        chunks = request.stream().__aiter__()
        abandoned = anyio.Event()

        async def pull() -> bytes | None:
            if abandoned.is_set():
                raise Problem(503, "the scan was stopped")
            try:
                return await chunks.__anext__()
            except StopAsyncIteration:
                return None

        gzip = request.headers.get("content-encoding", "").strip().lower() == "gzip"

        def work() -> dict[str, object]:
            from errkb.scan import scan_stream

            upload = Upload(lambda: anyio.from_thread.run(pull), limit=self.max_upload, gzip=gzip)
            stream = io.BufferedReader(upload, buffer_size=1 << 20)
            result = scan_stream(stream, registry=self.registry)
            return {**result.to_dict(), "notes": upload.notes}

        try:
            found = await self.in_thread(work)
        finally:
            abandoned.set()
        return JSONResponse(found)

    async def records(self, request: Request) -> Response:
        query = request.query_params
        limit = _int_param(query.get("limit"), "limit", 100, 1, 1000)
        offset = _int_param(query.get("offset"), "offset", 0, 0, None)
        tag, library = query.get("tag"), query.get("library")

        def work() -> dict[str, object]:
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

        return JSONResponse(await self.in_thread(work))

    async def record(self, request: Request) -> Response:
        key = request.path_params["id"]
        markdown = _wants_markdown(request)

        def work() -> Response:
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

        response: Response = await self.in_thread(work)
        return response

    async def model_shapes(self, _: Request) -> Response:
        return JSONResponse({"shapes": list(MODEL_SHAPES)})

    async def healthz(self, _: Request) -> Response:
        return JSONResponse({"status": "ok", "records": len(self.registry), "version": __version__})

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
) -> ASGIApp:
    """The ASGI app of ``errkb serve``.

    Args:
        registry: the records to serve; by default errkb's own (with ``records`` added).
        records: extra record files or folders, as ``errkb --records``.
        token: when set, every ``/v1`` request must carry ``Authorization: Bearer <token>``.
        timeout: seconds one request may take before it gets 503.
        max_json: the largest JSON body in bytes (413 past it).
        max_upload: the most text a log upload is read for, after decompression.
        static: the folder of the console page (``index.html``, its script and style).
    """
    from errkb.registry import Registry, default_registry

    if registry is None:
        registry = Registry.from_paths(records, validate=True) if records else default_registry()
    registry.matcher  # noqa: B018 - built now, not by the first request
    server = _Server(
        registry, timeout=timeout, max_json=max_json, max_upload=max_upload, static=static
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

    app = Starlette(routes=routes, exception_handlers={404: not_found, 405: not_allowed})
    return _Guard(app, token)
