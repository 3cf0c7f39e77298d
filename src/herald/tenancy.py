"""Which tenant the current code acts for, and how a connection is told.

The tenant is a context variable: a request sets it from its API key, the worker from
the job it runs, the CLI from ``--tenant``. Every connection Herald's pools hand out
switches to the runtime role (which row-level security applies to) and carries the
tenant in the setting ``herald.tenant``, read by the tables' policies. Nothing here
trusts input: a tenant name comes from a key or a job row, or is checked first.

:data:`PLATFORM` is the engine's cross-tenant context (claim, rescue, maintenance,
scheduler) and an audited platform operator's; it is entered explicitly, never by
default. Code that never names a tenant acts for :data:`DEFAULT`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import Any, ParamSpec, TypeVar
from weakref import WeakKeyDictionary

import psycopg

from herald import sql

DEFAULT = "default"
PLATFORM = "*"
RUNTIME_ROLE = "herald_runtime"
# fullmatch, not match: a `$` also matches before a trailing newline ("a\n").
_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")

P = ParamSpec("P")
T = TypeVar("T")

_current: ContextVar[str] = ContextVar("herald_tenant", default=DEFAULT)
# What each open connection was last told (the setting lives in its session).
_told: WeakKeyDictionary[Any, str] = WeakKeyDictionary()


class TenantError(ValueError):
    """A tenant name that cannot be one."""


def checked(name: str) -> str:
    """``name`` if it can name a tenant (lower-case letters, digits, ``-``, ``_``)."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise TenantError(
            f"tenant must be 1-63 lower-case letters, digits, '-' or '_', got {name!r}"
        )
    return name


def current() -> str:
    """The tenant the running code acts for (:data:`PLATFORM` in the engine's loops)."""
    return _current.get()


def is_platform() -> bool:
    return _current.get() == PLATFORM


@contextmanager
def acting_as(tenant: str) -> Iterator[str]:
    """Act for ``tenant`` inside the block (connections checked out there carry it)."""
    token = _current.set(tenant if tenant == PLATFORM else checked(tenant))
    try:
        yield tenant
    finally:
        _current.reset(token)


def enter(tenant: str) -> Token[str]:
    """Act for ``tenant`` until :func:`leave` is given the token returned: the worker's
    path around every handler, where :func:`acting_as`'s generator costs more than a
    short job's handler. Each name is checked once per process."""
    if tenant not in _valid:
        _valid.add(checked(tenant))
    return _current.set(tenant)


def leave(token: Token[str]) -> None:
    _current.reset(token)


# Names that passed :func:`checked` (tenants are few; a job carries one of them).
_valid: set[str] = {DEFAULT}


def platform() -> Any:
    """Act for the platform (every tenant) inside the block: the engine's loops only,
    and an operator's audited cross-tenant actions."""
    return acting_as(PLATFORM)


def as_platform(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """Run the coroutine function ``fn`` for the platform (an engine loop's step)."""

    @functools.wraps(fn)
    async def across_tenants(*args: P.args, **kwargs: P.kwargs) -> T:
        with platform():
            return await fn(*args, **kwargs)

    return across_tenants


async def tell(conn: psycopg.AsyncConnection[Any]) -> None:
    """Make ``conn``'s session act for the current tenant, under the runtime role.

    Called on every checkout; a round trip only when the connection was last told
    another tenant (or never). Outside a transaction, so no rollback undoes it."""
    tenant = _current.get()
    if _told.get(conn) == tenant:
        return
    if conn in _told:
        await conn.execute(sql.query("tenant_switch"), {"tenant": tenant})
        _told[conn] = tenant
        return
    cur = await conn.execute(sql.query("tenant_enter"), {"tenant": tenant, "role": RUNTIME_ROLE})
    row = await cur.fetchone()
    # Not migrated yet (no runtime role to switch to): asked again on the next checkout.
    if _value(row, "role") == RUNTIME_ROLE:
        _told[conn] = tenant


def _value(row: Any, column: str) -> Any:
    return row[column] if isinstance(row, dict) else (row[0] if row else None)


async def tell_in_transaction(conn: psycopg.AsyncConnection[Any], tenant: str) -> None:
    """Act for ``tenant`` until the end of ``conn``'s current transaction only."""
    await conn.execute(
        sql.query("tenant_local"), {"tenant": tenant if tenant == PLATFORM else checked(tenant)}
    )
