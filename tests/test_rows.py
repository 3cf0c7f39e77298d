"""Typed rows: a job read as a dataclass, and a row class that drifts from its statement."""

from __future__ import annotations

import dataclasses

import pytest

from herald import Client
from herald.rows import Job, from_row
from herald.states import JobState


async def test_a_job_reads_typed_with_the_same_values_as_its_row(client: Client) -> None:
    admitted = await client.enqueue("echo", {"n": 1}, key="typed")
    job = await client.job(admitted.id)
    row = await client.get_job(admitted.id)
    assert job is not None and row is not None
    assert job.state is JobState.WAITING and job.active
    assert dataclasses.asdict(job) == row
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
