"""Typed rows: what a statement answers, as a frozen dataclass instead of a dict.

``fetch_one(conn, "get_job", {"id": 7}, Job)`` runs the named statement and builds a
:class:`Job` from the row's columns of the same names (columns the class does not name
are left out; one it names and the row lacks is an error, so a statement and its row
class cannot drift apart silently). Fields typed with an enum are converted.

Where a row is read only where it is fetched, ``one_row``, ``maybe_row`` and ``all_rows``
answer it as a dict (``herald.db.Row``) from any connection, a caller's plain one
included; ``one_row`` is for a statement that always answers a row (an INSERT ...
RETURNING, an aggregate) and says which statement broke that promise instead of
leaving ``None`` for the caller to trip on.

Where a typed row leaves Python as a mapping (a JSON answer, a CLI table, an audit
snapshot), ``to_dict`` gives its columns in order with enums as their text: the same
mapping the statement's dict row was.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

from psycopg.rows import dict_row

from herald import sql
from herald.db import AnyConn, Row
from herald.errors import HeraldError
from herald.states import JobState

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T")


class MissingRow(HeraldError):
    """A statement that always answers a row answered none."""


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
    strikes: int  # lease expiries not charged as attempts (poison isolation)
    replay_of: int | None
    created_at: dt.datetime
    attempted_at: dt.datetime | None
    finished_at: dt.datetime | None

    @property
    def active(self) -> bool:
        return self.state.active


@dataclasses.dataclass(frozen=True)
class JobSummary:
    """A job as a listing shows it (the ``list_jobs`` statement)."""

    id: int
    kind: str
    queue: str
    key: str | None
    version: int
    state: JobState
    step: str | None
    attempt: int
    max_attempts: int
    priority: int
    run_at: dt.datetime
    created_at: dt.datetime
    finished_at: dt.datetime | None
    last_error: str | None  # the message of the job's latest error


@dataclasses.dataclass(frozen=True)
class DeadJob:
    """A dead letter as the client lists it (the ``list_dead`` statement)."""

    id: int
    job_id: int
    kind: str
    queue: str
    key: str | None
    version: int
    attempt: int
    reason: str
    step: str | None
    last_error: str | None
    created_at: dt.datetime


@dataclasses.dataclass(frozen=True)
class QueueStats:
    """What waits and runs in one queue now (the ``queue_stats`` statement)."""

    queue: str
    available: int
    scheduled: int
    running: int
    oldest_waiting_s: float | None  # None: nothing is due


def to_dict(row: DataclassInstance) -> dict[str, Any]:
    """A typed row as the mapping of its columns, in order, enums as their text: what a
    JSON answer, a template or a CLI table showed when rows were dicts."""
    return {field.name: _plain(getattr(row, field.name)) for field in dataclasses.fields(row)}


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


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


# A caller's plain connection answers tuples: every helper reads through a dict cursor.


async def maybe_row(
    conn: AnyConn, statement: str, params: Mapping[str, Any] | None = None
) -> Row | None:
    """The first row of the named statement; None when there is none."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(sql.query(statement), dict(params or {}))
    return await cur.fetchone()


async def one_row(conn: AnyConn, statement: str, params: Mapping[str, Any] | None = None) -> Row:
    """The row of a statement that always answers one (RETURNING, an aggregate)."""
    row = await maybe_row(conn, statement, params)
    if row is None:
        raise MissingRow(f"statement {statement!r} answered no row")
    return row


async def all_rows(
    conn: AnyConn, statement: str, params: Mapping[str, Any] | None = None
) -> list[Row]:
    """Every row of the named statement."""
    cur = conn.cursor(row_factory=dict_row)
    await cur.execute(sql.query(statement), dict(params or {}))
    return await cur.fetchall()


async def fetch_one(
    conn: AnyConn, statement: str, params: Mapping[str, Any], cls: type[T]
) -> T | None:
    """The first row of the named statement as a ``cls``; None when there is none."""
    row = await maybe_row(conn, statement, params)
    return None if row is None else from_row(cls, row)


async def fetch_all(
    conn: AnyConn, statement: str, params: Mapping[str, Any], cls: type[T]
) -> list[T]:
    """Every row of the named statement, each as a ``cls``."""
    return [from_row(cls, row) for row in await all_rows(conn, statement, params)]
