"""The console as an application mounted under ``/ui`` of the HTTP API.

:func:`install` builds it from the console's own pages and every extension (discovered
through entry points unless given), and mounts it on the API's FastAPI application. The
console reaches the engine through the API's state (its client pool and settings), so
it needs no connections of its own, and answers in HTML, never problem+json.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from urllib.parse import quote

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.console.forms import BadForm
from herald.console.pages import core
from herald.console.registry import ConsoleExtension, Registry, discover
from herald.console.render import FRAGMENT_HEADER, Renderer, render
from herald.console.sessions import ActingForSession, ConsoleSettings, Forbidden, SignInRequired
from herald.console.web import Invalid, Missing, base, see_other
from herald.ops.errors import NotFound
from herald.registry import Herald

log = logging.getLogger(__name__)

MOUNT = "/ui"
# Every asset is served by the console itself: nothing inline, nothing from elsewhere.
SECURITY_HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=()"),
]


class _SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        await self.app(scope, receive, send_with_headers)


async def _error(request: Request, status: int, message: str) -> Response:
    if request.headers.get(FRAGMENT_HEADER) is not None:
        return Response(message, status_code=status, media_type="text/plain")
    return await render(request, "error.html", None, status=status, status_code=status,
                        message=message)  # fmt: skip


def _handlers(console: FastAPI) -> None:
    @console.exception_handler(SignInRequired)
    async def sign_in_first(request: Request, exc: SignInRequired) -> Response:
        if request.headers.get(FRAGMENT_HEADER) is not None:
            return Response("signed out", status_code=401, media_type="text/plain")
        here = request.url.path[len(base(request)) :] or "/"
        if request.url.query:
            here += "?" + request.url.query
        return see_other(request, "/signin?next=" + quote(here, safe="/"))

    @console.exception_handler(Forbidden)
    async def forbidden(request: Request, exc: Forbidden) -> Response:
        return await _error(request, 403, str(exc))

    @console.exception_handler(Invalid)
    async def invalid(request: Request, exc: Invalid) -> Response:
        return await _error(request, 422, str(exc))

    @console.exception_handler(BadForm)
    async def bad_form(request: Request, exc: BadForm) -> Response:
        return await _error(request, exc.status, str(exc))

    @console.exception_handler(Missing)
    @console.exception_handler(NotFound)
    async def not_found(request: Request, exc: Exception) -> Response:
        return await _error(request, 404, str(exc))

    @console.exception_handler(RequestValidationError)
    async def unreadable(request: Request, exc: RequestValidationError) -> Response:
        return await _error(request, 422, "the request's parameters cannot be read")

    @console.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        message = "there is no such page" if exc.status_code == 404 else str(exc.detail)
        return await _error(request, exc.status_code, message)


def create_console(
    parent: FastAPI,
    herald_app: Herald,
    extensions: Sequence[ConsoleExtension] | None = None,
    settings: ConsoleSettings | None = None,
) -> FastAPI:
    """The console application; ``parent`` is the API whose state it reads."""
    chosen = discover() if extensions is None else list(extensions)
    enabled = [e for e in chosen if e.enabled is None or e.enabled(herald_app)]
    registry = Registry(core(), enabled)
    console = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    console.state.parent = parent
    console.state.registry = registry
    console.state.renderer = Renderer(registry)
    console.state.console_settings = settings or ConsoleSettings.from_env()
    _handlers(console)
    for extension in registry.extensions:
        if extension.router is not None:
            console.include_router(extension.router)
    console.mount("/static", StaticFiles(packages=[("herald.console", "static")]), name="static")
    console.add_middleware(ActingForSession)
    console.add_middleware(_SecurityHeaders)
    log.debug("console extensions: %s", ", ".join(e.name for e in registry.extensions))
    return console


def install(
    api: FastAPI,
    herald_app: Herald,
    extensions: Sequence[ConsoleExtension] | None = None,
    settings: ConsoleSettings | None = None,
) -> FastAPI:
    """Mount the console on the HTTP API under ``/ui``; returns the console."""
    console = create_console(api, herald_app, extensions, settings)
    api.mount(MOUNT, console, name="console")
    return console
