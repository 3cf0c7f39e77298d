"""The search statement against a real PostgreSQL: its index range starts at the window
(or the cursor), whatever the table holds before it."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from psycopg import sql as psql

from herald import sql
from herald.config import Settings
from herald.db import AsyncConn
from tests.ingest.harness import add_provider, open_conn

WINDOW_FROM = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)
WINDOW_TO = WINDOW_FROM + dt.timedelta(days=1)
BEFORE = 20_000  # plans that start before the window


@pytest.fixture
async def conn(settings: Settings) -> AsyncIterator[AsyncConn]:
    async with await open_conn(settings) as connection:
        await add_provider(connection, "acme", "http://127.0.0.1:9/feeds/acme")
        # Plans starting one a minute up to the window, then 100 from its start (an hour
        # long each, one every 15 minutes: the last ones end or start after the window).
        await connection.execute(
            "INSERT INTO ingest_plans (provider, base_plan_id, plan_id, title, starts_at,"
            " ends_at, sell_mode, ever_online, zones, first_seen_at, last_seen_at)"
            " SELECT 'acme', 'b', n::text, 'plan ' || n, s, s + interval '1 hour', 'online',"
            " true, '[]', s, s FROM generate_series(1, %(total)s) AS n,"
            " LATERAL (SELECT %(start)s::timestamptz + (n - %(before)s - 1)"
            " * CASE WHEN n > %(before)s THEN interval '15 minutes'"
            " ELSE interval '1 minute' END AS s) AS t",
            {"total": BEFORE + 100, "before": BEFORE, "start": WINDOW_FROM},
        )
        await connection.execute("ANALYZE ingest_plans")
        yield connection


def _params(after: tuple[dt.datetime, int], limit: int = 21) -> dict[str, Any]:
    return {
        "window_from": WINDOW_FROM,
        "window_to": WINDOW_TO,
        "after_start": after[0],
        "after_id": after[1],
        "limit": limit,
    }


async def _search(conn: AsyncConn, after: tuple[dt.datetime, int]) -> list[dict[str, Any]]:
    cur = await conn.execute(sql.query("ingest_search"), _params(after))
    return list(await cur.fetchall())


async def _blocks_read(conn: AsyncConn, after: tuple[dt.datetime, int]) -> int:
    """Shared buffers the statement touched (hit or read), from its executed plan."""
    cur = await conn.execute(
        psql.SQL("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ") + sql.query("ingest_search"),
        _params(after),
    )
    row = await cur.fetchone()
    assert row is not None
    plan = next(iter(row.values()))
    top = (json.loads(plan) if isinstance(plan, str) else plan)[0]["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


async def test_pages_hold_exactly_the_window_s_plans_in_order_whatever_the_cursor(
    conn: AsyncConn,
) -> None:
    expected = await conn.execute(
        "SELECT id FROM ingest_plans WHERE starts_at >= %s AND ends_at <= %s"
        " ORDER BY starts_at, id",
        (WINDOW_FROM, WINDOW_TO),
    )
    want = [r["id"] for r in await expected.fetchall()]
    assert len(want) == 93  # 4 an hour from 00:00 to 23:00 (the window's last hour)
    got: list[int] = []
    after = (WINDOW_FROM, 0)
    while page := await _search(conn, after):
        got += [r["id"] for r in page]
        after = (page[-1]["starts_at"], page[-1]["id"])
    assert got == want
    # A cursor placed before the window (a crafted one) still yields the window only.
    early = await _search(conn, (WINDOW_FROM - dt.timedelta(days=400), 0))
    assert [r["id"] for r in early] == want[:21]


async def test_the_index_range_starts_at_the_window_not_at_the_table_s_start(
    conn: AsyncConn,
) -> None:
    # The 20,000 plans before the window fill about a hundred index pages: a scan that
    # started at the table's beginning would touch them all. From the window (first
    # page, a crafted early cursor, a later page) it touches a handful.
    for after in [
        (WINDOW_FROM, 0),
        (WINDOW_FROM - dt.timedelta(days=400), 0),
        (WINDOW_FROM + dt.timedelta(hours=12), 0),
    ]:
        await _blocks_read(conn, after)  # the first run sets hint bits: not counted
        assert await _blocks_read(conn, after) < 30, after
