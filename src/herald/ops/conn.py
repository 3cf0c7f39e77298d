"""Where an operator function gets its connection, and how rows become audit JSON."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

from psycopg_pool import AsyncConnectionPool

from herald.db import AsyncConn

# A connection (used as is, so a caller's transaction includes our writes) or a pool.
Source = AsyncConn | AsyncConnectionPool[AsyncConn]


@asynccontextmanager
async def connection(source: Source) -> AsyncIterator[AsyncConn]:
    """Yield ``source`` itself when it is a connection, else one borrowed from the pool."""
    if isinstance(source, AsyncConnectionPool):
        async with source.connection() as conn:
            yield conn
    else:
        yield source


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(f"{type(value).__name__} is not JSON-serialisable")


def to_json(value: Any) -> str | None:
    """JSON text for a jsonb parameter (None stays SQL NULL); datetimes as ISO 8601."""
    if value is None:
        return None
    return json.dumps(value, default=_plain, ensure_ascii=False)
