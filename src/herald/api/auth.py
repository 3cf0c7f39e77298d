"""API keys: bearer tokens stored only as SHA-256, each with scopes.

Scopes: ``submit`` (admit jobs), ``read`` (inspect), ``operate`` (manual actions:
cancel, retry, replay, discard, schedules), ``admin`` (everything within its tenant),
``platform`` (the platform operator: may act for another tenant, or every tenant, by
naming it in the ``Herald-Tenant`` header; each such request is audited).

Every key belongs to a tenant and acts for it: the boundary sets the request's tenant
from the key (see :mod:`herald.tenancy`), so each route's statements see its rows only.

Authentication is required unless the API was built with ``ApiSettings(auth=False)``,
which is meant for a local demo only: it is logged loudly at start-up, said by a header
on every response, and even then nobody is ``admin`` (sources that read the server's
database or files stay out of reach).

The key is checked by :mod:`herald.api.boundary` from the Authorization header alone,
before the request's body is read or routed; routes only check the scope.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPBearer

from herald import sql, tenancy
from herald.api.problems import Problem
from herald.db import AsyncConn
from herald.rows import one_row

SCOPES = ("submit", "read", "operate", "admin", "platform")
# The header a platform key names the tenant it acts for with (``*``: every tenant).
TENANT_HEADER = "herald-tenant"
TOKEN_PREFIX = "hrld_"
_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,100}$")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's name is the actor of every manual action."""

    name: str
    scopes: frozenset[str]
    key_id: int | None = None
    max_active_jobs: int | None = None
    tenant: str = tenancy.DEFAULT

    def allows(self, scope: str) -> bool:
        if scope == "platform":
            return "platform" in self.scopes
        return bool({"admin", "platform"} & self.scopes) or scope in self.scopes

    @property
    def actor(self) -> str:
        """The audit log's actor: the key, and the tenant it belongs to."""
        return f"{self.name}@{self.tenant}"


# With authentication off: every scope but admin, never granted without a key.
ANONYMOUS = Principal("anonymous", frozenset(s for s in SCOPES if s not in ("admin", "platform")))


@dataclass(frozen=True)
class NewKey:
    id: int
    name: str
    scopes: list[str]
    token: str  # shown once; only its hash is stored


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def parse_scopes(text: str | Sequence[str]) -> list[str]:
    items = text.split(",") if isinstance(text, str) else list(text)
    scopes = sorted({s.strip() for s in items if s.strip()})
    unknown = [s for s in scopes if s not in SCOPES]
    if not scopes or unknown:
        raise ValueError(
            f"scopes must be one or more of {', '.join(SCOPES)}; got {', '.join(items) or 'none'}"
        )
    return scopes


async def create_key(
    conn: AsyncConn, name: str, scopes: Sequence[str], max_active_jobs: int | None = None
) -> NewKey:
    """Store a new key and return its token (the only time the token is visible)."""
    if not _NAME.match(name):
        raise ValueError("key name must be 1-100 characters of letters, digits, _ . : @ -")
    checked = parse_scopes(scopes)
    if max_active_jobs is not None and max_active_jobs < 1:
        raise ValueError("max_active_jobs must be at least 1")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    row = await one_row(
        conn,
        "api_key_create",
        {
            "name": name,
            "hash": hash_token(token),
            "scopes": checked,
            "max_active_jobs": max_active_jobs,
        },
    )
    return NewKey(row["id"], row["name"], list(row["scopes"]), token)


async def revoke_key(conn: AsyncConn, name: str) -> bool:
    cur = await conn.execute(sql.query("api_key_revoke"), {"name": name})
    return await cur.fetchone() is not None


async def list_keys(conn: AsyncConn) -> list[dict[str, Any]]:
    cur = await conn.execute(sql.query("api_key_list"))
    return await cur.fetchall()


# Declared on routes for the OpenAPI document; the boundary has checked the key already.
_bearer = HTTPBearer(auto_error=False, description="API key issued by `herald apikey create`")
CHALLENGE = {"WWW-Authenticate": "Bearer"}


class Unauthenticated(Exception):
    """No valid key: the boundary answers 401 before reading the body."""


async def authenticate(conn: AsyncConn, authorization: str | None) -> Principal:
    """The key named by an ``Authorization: Bearer`` header (Unauthenticated if none)."""
    scheme, _, token = (authorization or "").strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthenticated("a bearer API key is required")
    cur = await conn.execute(sql.query("api_key_lookup"), {"hash": hash_token(token.strip())})
    row = await cur.fetchone()
    if row is None:
        raise Unauthenticated("unknown or revoked API key")
    return Principal(
        row["name"], frozenset(row["scopes"]), row["id"], row["max_active_jobs"], row["tenant_id"]
    )


async def _principal(request: Request, _: Annotated[Any, Depends(_bearer)]) -> Principal:
    principal = getattr(request.state, "principal", None)
    if not isinstance(principal, Principal):  # only routes the boundary lets through
        raise Problem(401, "unauthenticated", "a bearer API key is required", headers=CHALLENGE)
    return principal


def require(scope: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency answering 401 without a valid key and 403 without ``scope``."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")

    async def check(principal: Annotated[Principal, Depends(_principal)]) -> Principal:
        if not principal.allows(scope):
            raise Problem(403, "forbidden", f"API key {principal.name!r} lacks the {scope!r} scope")
        return principal

    return check
