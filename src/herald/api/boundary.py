"""The API's outer boundary: what is checked before a request is routed or its body read.

1. Size: a body declared (Content-Length) larger than ``ApiSettings.max_body`` is a 413
   before a byte of it is read; a body sent without a length is counted as it arrives
   and refused the moment it passes the limit. Nothing is buffered here.
2. Authentication: a ``/v1`` request (and ``/metrics`` when it needs a key) is
   authenticated from its Authorization header alone; without a valid key it is a 401
   before its body is read or parsed. The principal is handed to the routes, which only
   check the scope.
3. With authentication off, every response carries ``Herald-Auth: off``.
4. Tenant: the request acts for its key's tenant (every statement of its routes runs
   under it, see :mod:`herald.tenancy`). Only a ``platform`` key may name another tenant
   (or ``*``, every tenant) in the ``Herald-Tenant`` header; such a request is audited
   before it is routed. Any other key naming one is refused (403).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import psycopg

from herald import tenancy
from herald.api.auth import (
    ANONYMOUS,
    CHALLENGE,
    TENANT_HEADER,
    Principal,
    Unauthenticated,
    authenticate,
)
from herald.api.problems import MEDIA_TYPE, TYPE_BASE
from herald.api.state import ApiSettings
from herald.ops import audit

log = logging.getLogger(__name__)

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

AUTH_HEADER = (b"herald-auth", b"off")
# The social application's routes (herald.api.social) sit beside /v1 and need a key too.
KEYED_PREFIXES = ("/users", "/accounts", "/social/", "/jobs/", "/dlq/")


def _problem(status: int, slug: str, title: str, detail: str, path: str) -> bytes:
    body = {"type": TYPE_BASE + slug, "title": title, "status": status, "detail": detail}
    return json.dumps({**body, "instance": path}).encode()


class Boundary:
    """Pure ASGI middleware (no body buffering): size limit, authentication, auth-off header."""

    def __init__(self, app: ASGIApp, api: ApiSettings) -> None:
        self.app = app
        self.api = api

    def _needs_key(self, path: str) -> bool:
        if path == "/v1" or path.startswith("/v1/") or path == "/search":
            return True
        if path.startswith(KEYED_PREFIXES):
            return True
        return path == "/metrics" and self.api.metrics == "key"

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if not self.api.auth:
            send = _announcing(send)
        path = str(scope.get("path", ""))
        declared = _content_length(scope)
        if declared is not None and declared > self.api.max_body:
            await _refuse_size(send, path, self.api.max_body)
            return
        if self._needs_key(path):
            principal = ANONYMOUS
            if self.api.auth:
                try:
                    principal = await self._authenticate(scope)
                except Unauthenticated as exc:
                    await _answer(send, 401, "unauthenticated", "Unauthorized", str(exc), path)
                    return
                except (psycopg.Error, OSError, TimeoutError) as exc:
                    log.warning("API key lookup failed: %s", exc)
                    detail = "the database is unreachable; try again"
                    await _answer(send, 503, "unavailable", "Service Unavailable", detail, path)
                    return
            scope.setdefault("state", {})["principal"] = principal
            try:
                tenant = await self._tenant_of(scope, principal)
            except PermissionError as exc:
                await _answer(send, 403, "forbidden", "Forbidden", str(exc), path)
                return
            except tenancy.TenantError as exc:
                await _answer(send, 400, "bad-tenant", "Bad Request", str(exc), path)
                return
            with tenancy.acting_as(tenant):
                await _limited(self.app, scope, receive, send, self.api.max_body)
            return
        await _limited(self.app, scope, receive, send, self.api.max_body)

    async def _authenticate(self, scope: Scope) -> Any:
        header = _header(scope, b"authorization")
        state = scope["app"].state.herald
        # The key is looked up before its tenant is known: across tenants, for this only.
        pool = state.keys or state.client.pool
        with tenancy.platform():
            async with pool.connection(timeout=10.0) as conn:
                return await authenticate(conn, header)

    async def _tenant_of(self, scope: Scope, principal: Principal) -> str:
        """The tenant the request acts for: its key's, unless a platform key names one.

        Naming one is recorded before the request acts: in the tenant named (its log
        shows who acted for it) and in the operator's own tenant (the platform side);
        for ``*`` (every tenant) in the operator's own. What the request then does is
        recorded in the tenant it acts on (see :func:`herald.ops.audit.record`)."""
        named = _header(scope, TENANT_HEADER.encode())
        if named is None or named.strip() == principal.tenant:
            return principal.tenant
        named = named.strip()
        if not principal.allows("platform"):
            raise PermissionError(
                f"API key {principal.name!r} may act for its own tenant only (no platform scope)"
            )
        if named != tenancy.PLATFORM:
            tenancy.checked(named)
        reason = f"{scope.get('method', '?')} {scope.get('path', '')}"
        state = scope["app"].state.herald
        logs = [principal.tenant] if named == tenancy.PLATFORM else [named, principal.tenant]
        async with state.client.pool.connection() as conn, conn.transaction():
            for tenant in logs:
                await tenancy.tell_in_transaction(conn, tenant)
                await audit.record(
                    conn, principal.actor, "platform.act_for", ("tenant", named), reason
                )
        return named


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope.get("headers", []):
        if name == wanted:
            return str(value.decode("latin-1"))
    return None


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            text = value.decode("latin-1").strip()
            return int(text) if text.isdigit() else None
    return None


async def _limited(app: ASGIApp, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
    """Run ``app`` with its body counted: past ``limit`` it is answered 413 at once and
    told the client left (the framework would turn an error into a 400)."""
    seen = 0
    started = refused = False

    async def counted() -> Message:
        nonlocal seen, refused
        if refused:
            return {"type": "http.disconnect"}
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                refused = True
                if not started:
                    await _refuse_size(send, str(scope.get("path", "")), limit)
                return {"type": "http.disconnect"}
        return message

    async def tracked(message: Message) -> None:
        nonlocal started
        if refused:  # answered already: whatever the app says now goes nowhere
            return
        started = started or message["type"] == "http.response.start"
        await send(message)

    try:
        await app(scope, counted, tracked)
    except Exception:
        if not refused:
            raise
        log.info("request body over %d bytes refused while it was read", limit)


def _announcing(send: Send) -> Send:
    async def announced(message: Message) -> None:
        if message["type"] == "http.response.start":
            message["headers"] = [*message.get("headers", []), AUTH_HEADER]
        await send(message)

    return announced


async def _refuse_size(send: Send, path: str, limit: int) -> None:
    detail = f"the request body is larger than {limit} bytes"
    await _answer(send, 413, "payload-too-large", "Content Too Large", detail, path)


async def _answer(send: Send, status: int, slug: str, title: str, detail: str, path: str) -> None:
    body = _problem(status, slug, title, detail, path)
    headers = [
        (b"content-type", MEDIA_TYPE.encode()),
        (b"content-length", str(len(body)).encode()),
        # The body may still be on its way: the client must not reuse this connection.
        (b"connection", b"close"),
    ]
    if status == 401:
        headers += [(k.lower().encode(), v.encode()) for k, v in CHALLENGE.items()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
