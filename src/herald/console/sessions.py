"""Signing in with an API key, server-side sessions, and CSRF protection.

The session cookie holds a random token (the database keeps only its SHA-256); it is
HttpOnly, SameSite=Strict, Secure when the console is served over https, scoped to the
console's path, and expires with its session. Every request reads the session together
with its API key, so a revoked key or an expired session signs the browser out at once,
and the scopes shown are always the key's current ones.

Every state-changing request (any method but GET and HEAD) goes through
:func:`signed_in`, which refuses it with 403 unless its form carries the session's CSRF
token and it does not come from another site (``Origin``, ``Sec-Fetch-Site``). The
sign-in form, which has no session yet, is protected by a double-submit token instead.
"""

from __future__ import annotations

import hmac
import os
import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from psycopg.types.json import Jsonb
from starlette.requests import Request
from starlette.responses import Response

from herald import sql, tenancy
from herald.api.auth import ANONYMOUS, Principal, hash_token
from herald.api.state import ApiState
from herald.config import ConfigError
from herald.console.forms import Form, read_form
from herald.db import AsyncConn

COOKIE = "herald_session"
SIGNIN_COOKIE = "herald_signin"
SAFE_METHODS = frozenset({"GET", "HEAD"})


class SignInRequired(Exception):
    """No live session: pages redirect to the sign-in page, fragments answer 401."""


class Forbidden(Exception):
    """The caller may not do this (missing scope, CSRF or origin check failed): 403."""


@dataclass(frozen=True)
class ConsoleSettings:
    """``HERALD_CONSOLE_SESSION_TTL`` (seconds a sign-in lasts, default 8 hours) and
    ``HERALD_CONSOLE_REFRESH`` (seconds between live updates of a page, default 5)."""

    session_lifetime: float = 8 * 3600.0
    refresh: float = 5.0

    def __post_init__(self) -> None:
        if not 60 <= self.session_lifetime <= 30 * 86400:
            raise ConfigError("HERALD_CONSOLE_SESSION_TTL must be 60 s to 30 days")
        if not 1 <= self.refresh <= 3600:
            raise ConfigError("HERALD_CONSOLE_REFRESH must be 1 to 3600 seconds")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ConsoleSettings:
        env = dict(os.environ if environ is None else environ)
        values: dict[str, float] = {}
        for name, attr in (
            ("HERALD_CONSOLE_SESSION_TTL", "session_lifetime"),
            ("HERALD_CONSOLE_REFRESH", "refresh"),
        ):
            raw = env.get(name)
            if raw:
                try:
                    values[attr] = float(raw)
                except ValueError:
                    raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
        return cls(**values)


@dataclass(frozen=True)
class Caller:
    """Who is using the console: the API key's principal, and what reaches the engine.

    Every read and action of the console takes the caller; the whole request acts for
    the key's tenant (:class:`ActingForSession`), so its statements see that tenant's
    rows only and its writes (audit entries included) are that tenant's.
    """

    principal: Principal
    state: ApiState
    token_hash: str
    csrf: str
    now: datetime  # the database's clock when the request began
    has_flash: bool = False

    @property
    def name(self) -> str:
        return self.principal.name

    def allows(self, scope: str) -> bool:
        return self.principal.allows(scope)

    def require(self, scope: str) -> None:
        if not self.allows(scope):
            raise Forbidden(f"API key {self.name!r} lacks the {scope!r} scope")


def api_state(request: Request) -> ApiState:
    """The API's state (client pool, settings), shared by the console it hosts."""
    state = request.app.state.parent.state.herald
    assert isinstance(state, ApiState)
    return state


def console_settings(request: Request) -> ConsoleSettings:
    settings = request.app.state.console_settings
    assert isinstance(settings, ConsoleSettings)
    return settings


def _secure(request: Request) -> bool:
    return request.url.scheme == "https"


def _cookie_path(request: Request) -> str:
    """The console's own path (``/ui``): the cookies go to no other route of the API."""
    return str(request.scope.get("root_path") or "") or "/"


def _set_cookie(request: Request, response: Response, name: str, value: str, age: float) -> None:
    response.set_cookie(
        name,
        value,
        max_age=int(age),
        path=_cookie_path(request),
        secure=_secure(request),
        httponly=True,
        samesite="strict",
    )


def _drop_cookie(request: Request, response: Response, name: str) -> None:
    response.delete_cookie(
        name, path=_cookie_path(request), secure=_secure(request), httponly=True, samesite="strict"
    )


def check_origin(request: Request) -> None:
    """Refuse a request another site made the browser send."""
    if request.headers.get("sec-fetch-site", "same-origin") not in {"same-origin", "none"}:
        raise Forbidden("the request came from another site")
    origin = request.headers.get("origin")
    if origin is not None:
        expected = f"{request.url.scheme}://{request.headers.get('host', '')}"
        if origin != expected:
            raise Forbidden(f"the request came from another origin ({origin})")


async def _one(conn: AsyncConn, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
    cur = await conn.execute(sql.query(name), params)
    return await cur.fetchone()


async def session_of(state: ApiState, token_hash: str) -> dict[str, Any] | None:
    """The live session with this token and its key, whatever the key's tenant.

    A session is found by its secret before its tenant is known: the key it names is
    read across tenants, for this lookup only (like the API's key lookup)."""
    with tenancy.platform():
        async with state.client.pool.connection() as conn:
            return await _one(conn, "console_session_get", {"token_hash": token_hash})


_UNREAD = object()  # the request's session was not looked up by the middleware


async def signed_in(request: Request) -> Caller:
    """The signed-in caller; for a state-changing request also checks its CSRF token."""
    state = api_state(request)
    token = request.cookies.get(COOKIE)
    if not token:
        raise SignInRequired
    token_hash = hash_token(token)
    row = request.scope.get("state", {}).get("console_session", _UNREAD)
    if row is _UNREAD:
        row = await session_of(state, token_hash)
    if row is None or (row["anonymous"] and state.api.auth):
        raise SignInRequired
    if row["anonymous"]:
        principal = ANONYMOUS
    else:
        principal = Principal(
            row["key_name"],
            frozenset(row["scopes"]),
            row["api_key_id"],
            row["max_active_jobs"],
            row["tenant_id"],
        )
    if tenancy.current() != principal.tenant:
        # Only a request the middleware did not see: never act for another tenant.
        raise SignInRequired
    caller = Caller(
        principal, state, token_hash, row["csrf_token"], row["now"], row["flash"] is not None
    )
    if request.method not in SAFE_METHODS:
        check_origin(request)
        form = await read_form(request)
        if not hmac.compare_digest(form.get("csrf", "").encode(), caller.csrf.encode()):
            raise Forbidden("the form's CSRF token does not belong to this session")
    caller.require("read")
    return caller


class ActingForSession:
    """Pure ASGI middleware: a console request acts for its session's key's tenant.

    The session is looked up once (across tenants, by its secret) before routing and
    handed to :func:`signed_in`; everything the request then reads or writes, from its
    dependencies to the page rendered, runs for that tenant. Without a session (the
    sign-in page, static files) the request acts for the default tenant and reads
    nothing of any tenant's."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        token = Request(scope).cookies.get(COOKIE)
        if not token:
            await self.app(scope, receive, send)
            return
        state = scope["app"].state.parent.state.herald
        row = await session_of(state, hash_token(token))
        scope.setdefault("state", {})["console_session"] = row
        tenant = tenancy.DEFAULT if row is None or row["anonymous"] else row["tenant_id"]
        with tenancy.acting_as(tenant):
            await self.app(scope, receive, send)


async def sign_in(
    request: Request, response: Response, principal: Principal, settings: ConsoleSettings
) -> None:
    """Start a session for ``principal`` and set its cookie on ``response``."""
    state = api_state(request)
    token = secrets.token_urlsafe(32)
    async with state.client.pool.connection() as conn:
        await conn.execute(sql.query("console_session_prune"))
        await conn.execute(
            sql.query("console_session_create"),
            {
                "token_hash": hash_token(token),
                "api_key_id": principal.key_id,
                "csrf_token": secrets.token_urlsafe(32),
                "lifetime_s": settings.session_lifetime,
            },
        )
    _set_cookie(request, response, COOKIE, token, settings.session_lifetime)


async def sign_out(caller: Caller, request: Request, response: Response) -> None:
    async with caller.state.client.pool.connection() as conn:
        await conn.execute(sql.query("console_session_delete"), {"token_hash": caller.token_hash})
    _drop_cookie(request, response, COOKIE)


async def find_key(state: ApiState, token: str) -> Principal | None:
    """The live API key whose token this is, as the API authenticates it: of any
    tenant (the key says which one the session will act for)."""
    with tenancy.platform():
        async with state.client.pool.connection() as conn:
            row = await _one(conn, "api_key_lookup", {"hash": hash_token(token)})
    if row is None:
        return None
    return Principal(
        row["name"], frozenset(row["scopes"]), row["id"], row["max_active_jobs"], row["tenant_id"]
    )


def signin_token(request: Request) -> str:
    """The sign-in form's token: the browser's (if it has one) or a new one."""
    return request.cookies.get(SIGNIN_COOKIE) or secrets.token_urlsafe(32)


def remember_signin_token(request: Request, response: Response, token: str) -> None:
    """Set the sign-in token as a cookie too (double submit)."""
    _set_cookie(request, response, SIGNIN_COOKIE, token, 3600)


def forget_signin_token(request: Request, response: Response) -> None:
    _drop_cookie(request, response, SIGNIN_COOKIE)


async def check_signin_form(request: Request) -> Form:
    """The sign-in form, if its token matches the cookie and it comes from this site."""
    check_origin(request)
    form = await read_form(request)
    cookie = request.cookies.get(SIGNIN_COOKIE, "")
    sent = form.get("csrf", "")
    if not cookie or not hmac.compare_digest(sent.encode(), cookie.encode()):
        raise Forbidden("the sign-in form has expired or came from elsewhere; reload it")
    return form


async def set_flash(caller: Caller, flash: dict[str, Any]) -> None:
    async with caller.state.client.pool.connection() as conn:
        await conn.execute(
            sql.query("console_session_flash_set"),
            {"token_hash": caller.token_hash, "flash": Jsonb(flash)},
        )


async def take_flash(caller: Caller) -> dict[str, Any] | None:
    if not caller.has_flash:
        return None
    async with caller.state.client.pool.connection() as conn:
        row = await _one(conn, "console_session_flash_take", {"token_hash": caller.token_hash})
    return None if row is None else dict(row["flash"])
