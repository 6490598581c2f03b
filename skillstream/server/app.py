"""The ``skillstream serve`` application: one ASGI app over one home.

Routes: ``/healthz``; ``/metrics`` (Prometheus text); ``/openapi.json``; the JSON API under
``/v1`` (``api_routes.py``); MCP over streamable HTTP at ``/mcp`` (the tools of ``skillstream mcp``,
each call for the owner named by ``?owner=`` or the token's only owner); the pages under ``/``
(``pages.py``).

Every request but ``/healthz`` and the sign-in page passes the token check first
(``auth.py``): the token comes from ``Authorization: Bearer``, or for pages from the cookie the
sign-in form sets. The resulting :class:`~.auth.Access` sits in the request's state, and every
handler and MCP tool reads through it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from skillstream.errors import InputError, MissingExtraError
from skillstream.server import api_routes, openapi, pages, telemetry
from skillstream.server.auth import COOKIE, Access, Denied, bearer, is_loopback
from skillstream.server.home import ServedHome

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz", "/login"})
"""Paths served without a token."""


class TokenCheck:
    """ASGI middleware: every HTTP request gets its ``Access`` or a 401 (pages: the sign-in).

    Before the token, two checks keep a web page the user visits from using the server through
    the user's browser: on a loopback address, the ``Host`` must name this machine (a DNS name
    rebound to 127.0.0.1 is refused); and a write under ``/v1`` must be ``application/json``,
    which a page of another origin cannot send without a preflight that this server never
    grants (a plain form post is refused).
    """

    def __init__(self, app: ASGIApp, home: ServedHome, loopback: bool) -> None:
        self.app = app
        self.home = home
        self.loopback = loopback

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        path = scope["path"]
        refusal = self._refusal(request)
        if refusal is not None:
            code, message = refusal
            await JSONResponse({"error": message}, code)(scope, receive, send)
            return
        token = bearer(request.headers.get("authorization")) or request.cookies.get(COOKIE)
        try:
            access = self.home.tokens.access(token) if path not in OPEN_PATHS else Access()
        except Denied as e:
            if _is_page(path) and request.method == "GET":
                target = "/login?next=" + path
                await Response(status_code=303, headers={"location": target})(scope, receive, send)
            else:
                headers = {"www-authenticate": "Bearer"}
                await JSONResponse({"error": str(e)}, e.status, headers)(scope, receive, send)
            return
        scope.setdefault("state", {})["access"] = access
        started = time.perf_counter()
        status = {"code": 500}

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = _route_name(scope)
            telemetry.observe_request(route, request.method, status["code"], started)

    def _refusal(self, request: Request) -> tuple[int, str] | None:
        if self.loopback and not is_loopback(_host_name(request.headers.get("host", ""))):
            return 421, "this server answers requests for 127.0.0.1 or localhost only"
        if (
            request.method not in ("GET", "HEAD", "OPTIONS")
            and request.url.path.startswith("/v1/")
            and request.headers.get("content-type", "").split(";")[0].strip().lower()
            != "application/json"
        ):
            return 415, "send the body as JSON, with 'Content-Type: application/json'"
        return None


def _host_name(host: str) -> str:
    """The name part of a ``Host`` header (``[::1]:8765`` -> ``::1``)."""
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _is_page(path: str) -> bool:
    return not path.startswith(("/v1/", "/mcp", "/metrics", "/openapi.json"))


def _route_name(scope: Scope) -> str:
    """The route's template (``/v1/memories/{id}``), never the ids a path carries."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    if scope["path"].startswith("/mcp"):
        return "/mcp"
    endpoint = scope.get("endpoint")
    return getattr(endpoint, "__name__", "other") if endpoint is not None else "unmatched"


def mcp_owner(ctx: Any) -> str:
    """The owner of an MCP tool call over HTTP: ``?owner=`` of the request, else the token's
    only owner; refused when the token may not touch it."""
    request = ctx.request_context.request
    if request is None:
        raise InputError("this MCP endpoint serves HTTP requests only")
    access: Access = request.scope["state"]["access"]
    owner = access.default_owner(request.query_params.get("owner") or None)
    if not owner:
        raise InputError("name the owner of this MCP session: connect to /mcp?owner=<owner id>")
    if not access.allows(owner):
        raise InputError(f"no owner {owner!r}")
    return owner


def build_app(home: ServedHome, *, host: str = "127.0.0.1", mcp: bool = True) -> Starlette:
    """The application over ``home`` (``host`` is the address it binds, for MCP's host check).

    Args:
        home: The served home, with its tokens.
        host: The bind address.
        mcp: Mount MCP at ``/mcp`` (needs the ``mcp`` extra).
    """

    def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    def metrics(request: Request) -> Response:
        if request.scope["state"]["access"].limited:  # counts of every owner's memories
            return JSONResponse({"error": "metrics need a token for every owner"}, 403)
        body, content_type = telemetry.render(home)
        return Response(body, media_type=content_type)

    def spec(request: Request) -> Response:
        return JSONResponse(openapi.spec())

    routes: list[BaseRoute] = [
        Route("/healthz", healthz, name="healthz"),
        Route("/metrics", metrics, name="metrics"),
        Route("/openapi.json", spec, name="openapi"),
        *api_routes.routes(home),
    ]
    server = None
    if mcp:
        try:
            from skillstream.server.mcp_tools import build_server

            server = build_server(home.settings, mcp_owner, name="skillstream")
            mcp_app = server.streamable_http_app(
                streamable_http_path="/mcp", stateless_http=True, json_response=True, host=host
            )
            routes += list(mcp_app.routes)
        except MissingExtraError:
            log.warning(
                "MCP over HTTP is off: install the 'mcp' extra (pip install skillstream[mcp])"
            )
            server = None
    routes += pages.routes(home)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        home.recorder.start()
        try:
            if server is None:
                yield
            else:
                async with server.session_manager.run():
                    yield
        finally:
            home.recorder.stop()  # what is left is recorded before the process ends

    app = Starlette(routes=routes, lifespan=lifespan)
    app.add_middleware(TokenCheck, home=home, loopback=is_loopback(host))
    return app
