"""Typed rows: a job read as a dataclass, a row class that drifts from its statement, and a
statement that promised a row and answered none."""

from __future__ import annotations

import dataclasses

import psycopg
import pytest

from herald import Client
from herald.config import Settings
from herald.db import conninfo
from herald.rows import Job, MissingRow, all_rows, from_row, maybe_row, one_row, to_dict
from herald.states import JobState


async def test_a_job_reads_typed_with_the_same_values_as_its_row(client: Client) -> None:
    admitted = await client.enqueue("echo", {"n": 1}, key="typed")
    job = await client.job(admitted.id)
    row = await client.get_job(admitted.id)
    assert job is not None and row is not None
    assert job.state is JobState.WAITING and job.active
    assert job == row
    async with client.pool.connection() as conn:
        cur = await conn.execute("SELECT * FROM jobs WHERE id = %s", (admitted.id,))
        stored = await cur.fetchone()
    assert stored is not None
    # As a mapping: the columns in the statement's order, the state as its text.
    assert to_dict(job) == {name: stored[name] for name in to_dict(job)}
    assert type(to_dict(job)["state"]) is str
    assert await client.job(admitted.id + 1000) is None


def test_a_row_without_a_column_the_class_names_is_refused() -> None:
    @dataclasses.dataclass(frozen=True)
    class Named:
        id: int
        state: JobState

    assert from_row(Named, {"id": 1, "state": "dead", "extra": 2}) == Named(1, JobState.DEAD)
    with pytest.raises(KeyError, match="no column 'state' for Named"):
        from_row(Named, {"id": 1})
    with pytest.raises(ValueError, match="'sleeping' is not a valid JobState"):
        from_row(Job, {**{f.name: None for f in dataclasses.fields(Job)}, "state": "sleeping"})


async def test_rows_read_as_dicts_from_a_callers_plain_connection(
    client: Client, settings: Settings
) -> None:
    admitted = await client.enqueue("echo", {"n": 2}, key="plain")
    assert settings.database_url is not None
    info = conninfo(settings.database_url, settings.schema)
    # a connection of the caller's own: no dict row factory, rows would come as tuples
    async with await psycopg.AsyncConnection.connect(info, autocommit=True) as plain:
        row = await one_row(plain, "get_job", {"id": admitted.id})
        assert (row["id"], row["key"], row["state"]) == (admitted.id, "plain", "waiting")
        assert await maybe_row(plain, "get_job", {"id": admitted.id + 1000}) is None
        with pytest.raises(MissingRow, match="statement 'get_job' answered no row"):
            await one_row(plain, "get_job", {"id": admitted.id + 1000})
        counts = await all_rows(plain, "state_counts")
    assert counts == [{"state": "waiting", "n": 1}]
