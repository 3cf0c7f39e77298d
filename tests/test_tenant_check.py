"""The tenant column's CHECK (0034: a length test and an unbounded pattern, in place of
0016's bounded pattern) takes exactly the names 0016's pattern took."""

from __future__ import annotations

import re

import psycopg
import pytest

from herald import Settings
from herald.db import connect, conninfo
from herald.tenancy import TenantError, checked

NAMES = [
    "default",
    "a",
    "0",
    "a_b-c9",
    "a" * 63,
    "a" * 64,
    "*",
    "",
    "A",
    "-a",
    "_a",
    "a-",
    "a b",
    "a.b",
    "a\n",
    "\na",
    "é",
    "a" * 62 + "é",
]


def _valid(name: str) -> bool:
    """0016's pattern as PostgreSQL reads it (its `$` is the end of the text only)."""
    return re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,62}", name) is not None


async def test_the_tenant_check_takes_the_names_it_took(settings: Settings) -> None:
    assert settings.database_url is not None
    async with await connect(conninfo(settings.database_url, settings.schema)) as conn:
        taken = {}
        for name in NAMES:
            try:
                async with conn.transaction():
                    await conn.execute(
                        "INSERT INTO jobs (kind, tenant_id) VALUES ('noop', %s)", [name]
                    )
                taken[name] = True
            except psycopg.errors.CheckViolation:
                taken[name] = False
    assert taken == {name: _valid(name) for name in NAMES}
    assert sum(taken.values()) == 6  # the first five, and "a-"


@pytest.mark.parametrize("table", ["jobs", "key_versions", "dead_letters", "rescues"])
async def test_no_isolated_table_keeps_the_bounded_pattern(settings: Settings, table: str) -> None:
    assert settings.database_url is not None
    async with await connect(conninfo(settings.database_url, settings.schema)) as conn:
        cur = await conn.execute(
            "SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint "
            "WHERE conrelid = %s::regclass AND conname = %s",
            [table, f"{table}_tenant_id_check"],
        )
        row = await cur.fetchone()
    assert row is not None
    assert "{0,62}" not in row["def"] and "length(tenant_id) <= 63" in row["def"], row


@pytest.mark.parametrize("name", NAMES)
def test_the_python_check_agrees_with_the_database(name: str) -> None:
    """`herald.tenancy.checked` refuses what the CHECK refuses, "a\\n" included."""
    if _valid(name):
        assert checked(name) == name
    else:
        with pytest.raises(TenantError):
            checked(name)
