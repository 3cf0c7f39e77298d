"""Typed rows: what a statement answers, as a frozen dataclass instead of a dict.

``fetch_one(conn, "get_job", {"id": 7}, Job)`` runs the named statement and builds a
:class:`Job` from the row's columns of the same names (columns the class does not name
are left out; one it names and the row lacks is an error, so a statement and its row
class cannot drift apart silently). Fields typed with an enum are converted.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping
from typing import Any, TypeVar, get_type_hints

from herald import sql
from herald.db import AsyncConn
from herald.states import JobState

T = TypeVar("T")


@dataclasses.dataclass(frozen=True)
class Job:
    """A job's row (the ``get_job`` statement)."""

    id: int
    kind: str
    queue: str
    key: str | None
    version: int
    payload: dict[str, Any]
    priority: int
    run_at: dt.datetime
    state: JobState
    step: str | None
    checkpoint: dict[str, Any] | None
    result: Any
    attempt: int
    max_attempts: int
    lease_owner: str | None
    lease_expires_at: dt.datetime | None
    fence: int
    idempotency_key: str | None
    errors: list[dict[str, Any]]
    snoozes: int
    rescues: int
    replay_of: int | None
    created_at: dt.datetime
    attempted_at: dt.datetime | None
    finished_at: dt.datetime | None

    @property
    def active(self) -> bool:
        return self.state.active


_CONVERTERS: dict[type[Any], dict[str, Any]] = {}


def _converters(cls: type[Any]) -> dict[str, Any]:
    """Field name -> the enum its value is converted to (None: taken as it is)."""
    found = _CONVERTERS.get(cls)
    if found is None:
        hints = get_type_hints(cls)
        found = {}
        for field in dataclasses.fields(cls):
            hint = hints[field.name]
            is_enum = isinstance(hint, type) and issubclass(hint, enum.Enum)
            found[field.name] = hint if is_enum else None
        _CONVERTERS[cls] = found
    return found


def from_row(cls: type[T], row: Mapping[str, Any]) -> T:
    """``cls`` (a dataclass) built from the row's columns of its field names."""
    values = {}
    for name, convert in _converters(cls).items():
        try:
            value = row[name]
        except KeyError:
            raise KeyError(f"the row has no column {name!r} for {cls.__name__}") from None
        values[name] = convert(value) if convert is not None and value is not None else value
    return cls(**values)


async def fetch_one(
    conn: AsyncConn, statement: str, params: Mapping[str, Any], cls: type[T]
) -> T | None:
    """The first row of the named statement as a ``cls``; None when there is none."""
    cur = await conn.execute(sql.query(statement), dict(params))
    row = await cur.fetchone()
    return None if row is None else from_row(cls, row)


async def fetch_all(
    conn: AsyncConn, statement: str, params: Mapping[str, Any], cls: type[T]
) -> list[T]:
    """Every row of the named statement, each as a ``cls``."""
    cur = await conn.execute(sql.query(statement), dict(params))
    return [from_row(cls, row) for row in await cur.fetchall()]
