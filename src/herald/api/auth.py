"""API keys: bearer tokens stored only as SHA-256, each with scopes.

Scopes: ``submit`` (admit jobs), ``read`` (inspect), ``operate`` (manual actions:
cancel, retry, replay, discard, schedules), ``admin`` (everything). Authentication is
required unless the API was built with ``ApiSettings(auth=False)``, which is meant for
a local demo only and is logged loudly at start-up.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from herald import sql
from herald.api.problems import Problem
from herald.db import AsyncConn

SCOPES = ("submit", "read", "operate", "admin")
TOKEN_PREFIX = "hrld_"
_NAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,100}$")


@dataclass(frozen=True)
class Principal:
    """Who is calling: the key's name is the actor of every manual action."""

    name: str
    scopes: frozenset[str]
    key_id: int | None = None
    max_active_jobs: int | None = None

    def allows(self, scope: str) -> bool:
        return "admin" in self.scopes or scope in self.scopes


ANONYMOUS = Principal("anonymous", frozenset(SCOPES))


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
    cur = await conn.execute(
        sql.query("api_key_create"),
        {
            "name": name,
            "hash": hash_token(token),
            "scopes": checked,
            "max_active_jobs": max_active_jobs,
        },
    )
    row = await cur.fetchone()
    assert row is not None
    return NewKey(row["id"], row["name"], list(row["scopes"]), token)


async def revoke_key(conn: AsyncConn, name: str) -> bool:
    cur = await conn.execute(sql.query("api_key_revoke"), {"name": name})
    return await cur.fetchone() is not None


async def list_keys(conn: AsyncConn) -> list[dict[str, Any]]:
    cur = await conn.execute(sql.query("api_key_list"))
    return await cur.fetchall()


_bearer = HTTPBearer(auto_error=False, description="API key issued by `herald apikey create`")
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
_CHALLENGE = {"WWW-Authenticate": "Bearer"}


async def _principal(request: Request, credentials: Credentials) -> Principal:
    state = request.app.state.herald
    if not state.api.auth:
        return ANONYMOUS
    if credentials is None or credentials.scheme.lower() != "bearer":
        raise Problem(401, "unauthenticated", "a bearer API key is required", headers=_CHALLENGE)
    async with state.client.pool.connection() as conn:
        cur = await conn.execute(
            sql.query("api_key_lookup"), {"hash": hash_token(credentials.credentials)}
        )
        row = await cur.fetchone()
    if row is None:
        raise Problem(401, "unauthenticated", "unknown or revoked API key", headers=_CHALLENGE)
    return Principal(row["name"], frozenset(row["scopes"]), row["id"], row["max_active_jobs"])


def require(scope: str) -> Callable[..., Awaitable[Principal]]:
    """A dependency answering 401 without a valid key and 403 without ``scope``."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")

    async def check(principal: Annotated[Principal, Depends(_principal)]) -> Principal:
        if not principal.allows(scope):
            raise Problem(403, "forbidden", f"API key {principal.name!r} lacks the {scope!r} scope")
        return principal

    return check
