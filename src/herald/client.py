"""Admission and inspection: put jobs in, read them back.

Every admission validates first and writes nothing on bad input. A caller may pass its
own connection so the job commits or rolls back with the caller's data.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, TypeVar, cast

from psycopg.pq import TransactionStatus
from psycopg.rows import dict_row

from herald import quotas, sql
from herald.config import Settings
from herald.db import AnyConn, AsyncConn, Row, connect, conninfo, database_url, make_pool
from herald.errors import (
    AdmissionError,
    HeraldError,
    IdempotencyConflict,
    InvalidPayload,
    PayloadTooLarge,
)
from herald.payloads import MAX_DEPTH, too_deep
from herald.registry import Herald, Kind
from herald.rows import DeadJob, Job, JobSummary, QueueStats, fetch_all, fetch_one

T = TypeVar("T")

_EARLIEST_RUN_AT = datetime(1970, 1, 1, tzinfo=UTC)
_LATEST_RUN_AT = datetime(9999, 12, 30, tzinfo=UTC)
_MAX_ADMISSION_TRIES = 8
# Jobs per statement when a large keyless batch is streamed in pipeline mode.
_BULK_CHUNK = 500
# A NUL character as json.dumps writes it: "\u0000" whose backslash is not itself escaped
# (a literal backslash followed by "u0000" in the text is written "\\u0000" and is fine).
_ESCAPED_NUL = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
# One encoder for every payload (json.dumps with options builds a new one per call).
_PAYLOAD_JSON = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":"))


class Outcome(StrEnum):
    CREATED = "created"
    IN_PROGRESS = "in_progress"  # an active job for the same (kind, key) already exists
    REPLAY = "replay"  # same idempotency key and request within its retention


@dataclass(frozen=True)
class Enqueued:
    id: int
    version: int
    outcome: Outcome


@dataclass
class JobSpec:
    """One job to admit; fields left None take the kind's defaults."""

    kind: str
    payload: dict[str, Any] = field(default_factory=dict)
    key: str | None = None
    idempotency_key: str | None = None
    run_at: datetime | None = None
    priority: int | None = None
    queue: str | None = None
    max_attempts: int | None = None


@dataclass(frozen=True)
class _Prepared:
    spec: JobSpec
    kind: Kind
    payload_json: str
    params: dict[str, Any]


class Client:
    """Admission and inspection over a connection pool."""

    def __init__(self, app: Herald, settings: Settings, info: str) -> None:
        self.app = app
        self.settings = settings
        self.pool = make_pool(
            info, settings.pool_size, name="herald-client", pooled=settings.pooled
        )
        self.quotas = quotas.QuotaCache()

    @classmethod
    async def open(cls, app: Herald, settings: Settings | None = None) -> Client:
        settings = settings or Settings.from_env()
        client = cls(
            app, settings, conninfo(database_url(settings), settings.schema, settings=settings)
        )
        await client.pool.open(wait=True)
        return client

    async def close(self) -> None:
        await self.pool.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # --- admission -------------------------------------------------------------------

    def _prepare(self, spec: JobSpec) -> _Prepared:
        """Check a job against its kind and the limits; the insert's parameters."""
        kind = self.app.kind(spec.kind)
        payload_json = _encode_payload(spec.payload, self.settings.payload_limit)
        key = _checked_text("key", spec.key, 1000)
        ikey = _checked_text("idempotency key", spec.idempotency_key, 255)
        priority = _checked_priority(kind.priority if spec.priority is None else spec.priority)
        attempts = _checked_attempts(
            kind.max_attempts if spec.max_attempts is None else spec.max_attempts
        )
        _check_run_at(spec.run_at)
        for name, text in (("key", key), ("idempotency key", ikey), ("queue", spec.queue)):
            if text is not None and not _encodable(text):
                raise AdmissionError(f"{name} contains a lone surrogate, not valid Unicode text")
        queue = _checked_queue(spec.queue or kind.queue)
        params = {
            "kind": kind.name,
            "queue": queue,
            "key": key,
            "payload": payload_json,
            "priority": priority,
            "run_at": spec.run_at,
            "max_attempts": attempts,
            "idempotency_key": ikey,
            "replay_of": None,
            "channel": self.settings.channel,
            "notify": self.settings.notify,
        }
        return _Prepared(spec, kind, payload_json, params)

    async def enqueue(
        self,
        kind: str,
        payload: dict[str, Any] | None = None,
        *,
        key: str | None = None,
        idempotency_key: str | None = None,
        run_at: datetime | None = None,
        priority: int | None = None,
        queue: str | None = None,
        max_attempts: int | None = None,
        conn: AsyncConn | Any | None = None,
        replay_of: int | None = None,
    ) -> Enqueued:
        """Admit one job; returns its id, version and whether it was created."""
        spec = JobSpec(
            kind,
            {} if payload is None else payload,
            key,
            idempotency_key,
            run_at,
            priority,
            queue,
            max_attempts,
        )
        prepared = self._prepare(spec)
        prepared.params["replay_of"] = replay_of
        if conn is not None:
            return await self._admit(conn, prepared)
        async with self.pool.connection() as own:
            return await self._admit(own, prepared)

    async def _admit(self, conn: AnyConn, prepared: _Prepared) -> Enqueued:
        limits = await self.quotas.of_current(conn)
        if limits.any:
            async with _atomic(conn):
                await quotas.enforce(conn, limits, 1, len(prepared.payload_json.encode()))
                return await self._admit_unquoted(conn, prepared)
        return await self._admit_unquoted(conn, prepared)

    async def _admit_unquoted(self, conn: AnyConn, prepared: _Prepared) -> Enqueued:
        if prepared.spec.idempotency_key is None:
            return await _insert_one(conn, prepared.params)
        async with _atomic(conn):
            return await self._admit_idempotent(conn, prepared)

    async def _admit_idempotent(self, conn: AnyConn, prepared: _Prepared) -> Enqueued:
        ikey = prepared.spec.idempotency_key
        # Canonical form: the same JSON object written in another key order is the same
        # request (jsonb does not keep key order either).
        canonical = json.dumps(json.loads(prepared.payload_json), sort_keys=True)
        fingerprint = hashlib.sha256(
            json.dumps([prepared.kind.name, prepared.spec.key, canonical]).encode()
        ).hexdigest()
        cur = conn.cursor(row_factory=dict_row)
        await cur.execute(sql.query("idempotency_lock"), {"key": ikey})
        await cur.execute(sql.query("idempotency_lookup"), {"key": ikey})
        found = await cur.fetchone()
        if found is not None:
            if found["fingerprint"] != fingerprint:
                raise IdempotencyConflict(str(ikey), found["job_id"])
            return Enqueued(found["job_id"], found["version"] or 0, Outcome.REPLAY)
        admitted = await _insert_one(conn, prepared.params)
        await cur.execute(
            sql.query("idempotency_record"),
            {
                "key": ikey,
                "job_id": admitted.id,
                "fingerprint": fingerprint,
                "retention_s": self.settings.idempotency_retention,
            },
        )
        return admitted

    async def enqueue_many(
        self, specs: Sequence[JobSpec], *, conn: AsyncConn | Any | None = None
    ) -> list[Enqueued]:
        """Admit many jobs in one round trip (one notification per queue).

        Nothing is written unless every job is valid. Results come back in input order.
        """
        if conn is None and len(specs) > _BULK_CHUNK and _all_keyless(specs):
            async with self.pool.connection() as own, own.transaction():
                await self._enforce_quotas(own, specs)
                return await self._admit_streamed(own, specs)
        prepared = [self._prepare(spec) for spec in specs]
        if not prepared:
            return []
        if conn is not None:
            async with _atomic(conn):
                await self._enforce_quotas(conn, specs, prepared)
                return await self._admit_many(conn, prepared)
        async with self.pool.connection() as own, own.transaction():
            await self._enforce_quotas(own, specs, prepared)
            return await self._admit_many(own, prepared)

    async def _enforce_quotas(
        self, conn: AnyConn, specs: Sequence[JobSpec], prepared: Sequence[_Prepared] = ()
    ) -> None:
        """The tenant's quotas, for a batch: inside the batch's transaction."""
        limits = await self.quotas.of_current(conn)
        if not limits.any:
            return
        size = sum(len(p.payload_json.encode()) for p in prepared)
        if not prepared:  # streamed: payloads are encoded chunk by chunk, later
            size = sum(len(_encode_payload(s.payload, self.settings.payload_limit)) for s in specs)
        await quotas.enforce(conn, limits, len(specs), size)

    async def _admit_streamed(self, conn: AnyConn, specs: Sequence[JobSpec]) -> list[Enqueued]:
        """Keyless jobs in chunks sent back to back (pipeline mode): the server inserts one
        chunk while the next is validated and encoded here. Bad input anywhere raises
        inside our own transaction, which then rolls back every chunk already sent."""
        cursors = []
        async with conn.pipeline():
            for start in range(0, len(specs), _BULK_CHUNK):
                chunk = specs[start : start + _BULK_CHUNK]
                columns = _bulk_columns([self._prepare(s).params for s in chunk], with_keys=False)
                columns["channel"] = self.settings.channel
                columns["notify"] = self.settings.notify
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(sql.query("enqueue_bulk_keyless"), columns)
                cursors.append(cur)
        admitted: list[Enqueued] = []
        for cur in cursors:
            admitted.extend(Enqueued(row["id"], 1, Outcome.CREATED) for row in await cur.fetchall())
        if len(admitted) != len(specs):
            raise HeraldError(f"bulk admission inserted {len(admitted)} of {len(specs)} jobs")
        return admitted

    async def _admit_many(self, conn: AnyConn, prepared: list[_Prepared]) -> list[Enqueued]:
        results: list[Enqueued | None] = [None] * len(prepared)
        plain = [i for i, p in enumerate(prepared) if p.spec.idempotency_key is None]
        for i, p in enumerate(prepared):
            if p.spec.idempotency_key is not None:
                results[i] = await self._admit_idempotent(conn, p)
        if not plain:
            return [r for r in results if r is not None]
        params = [prepared[i].params for i in plain]
        keyless = all(p["key"] is None for p in params)
        columns = _bulk_columns(params, with_keys=not keyless)
        columns["channel"] = self.settings.channel
        columns["notify"] = self.settings.notify
        cur = conn.cursor(row_factory=dict_row)
        if keyless:
            # No key, no version bookkeeping and nothing to conflict with: a plain insert.
            await cur.execute(sql.query("enqueue_bulk_keyless"), columns)
            for i, row in zip(plain, await cur.fetchall(), strict=True):
                results[i] = Enqueued(row["id"], 1, Outcome.CREATED)
            return [r for r in results if r is not None]
        await cur.execute(sql.query("enqueue_bulk"), columns)
        inserted = await cur.fetchall()
        _assign_bulk(results, plain, prepared, inserted)
        for i in plain:
            if results[i] is None:  # a keyed job that met an active one
                results[i] = await _insert_one(conn, prepared[i].params)
        return [r for r in results if r is not None]

    # --- inspection ------------------------------------------------------------------

    async def _fetch(self, name: str, params: dict[str, Any]) -> list[Row]:
        async with self.pool.connection() as conn:
            cur = await conn.execute(sql.query(name), params)
            return await cur.fetchall()

    async def _typed(self, name: str, params: dict[str, Any], cls: type[T]) -> list[T]:
        async with self.pool.connection() as conn:
            return await fetch_all(conn, name, params, cls)

    async def get_job(self, job_id: int) -> Job | None:
        """The job's row (:class:`herald.rows.Job`); None when there is none."""
        async with self.pool.connection() as conn:
            return await fetch_one(conn, "get_job", {"id": job_id}, Job)

    async def job(self, job_id: int) -> Job | None:
        """The same as :meth:`get_job` (its earlier, typed twin)."""
        return await self.get_job(job_id)

    async def list_jobs(
        self,
        *,
        state: str | None = None,
        kind: str | None = None,
        queue: str | None = None,
        key: str | None = None,
        limit: int = 50,
    ) -> list[JobSummary]:
        params = {"state": state, "kind": kind, "queue": queue, "key": key, "limit": limit}
        return await self._typed("list_jobs", params, JobSummary)

    async def list_dead(
        self,
        *,
        kind: str | None = None,
        queue: str | None = None,
        key: str | None = None,
        limit: int = 50,
    ) -> list[DeadJob]:
        params = {"kind": kind, "queue": queue, "key": key, "limit": limit}
        return await self._typed("list_dead", params, DeadJob)

    async def queue_stats(self) -> list[QueueStats]:
        return await self._typed("queue_stats", {}, QueueStats)

    async def state_counts(self) -> dict[str, int]:
        return {r["state"]: r["n"] for r in await self._fetch("state_counts", {})}

    async def stale_writes(self, job_id: int | None = None) -> int:
        rows = await self._fetch("count_stale_writes", {"job_id": job_id})
        return int(rows[0]["n"])


def _atomic(conn: AnyConn) -> AbstractAsyncContextManager[Any]:
    """A block that is atomic inside the caller's transaction and never commits it.

    On an idle non-autocommit connection psycopg's ``transaction()`` would open and then
    COMMIT a transaction of its own, so the caller's rollback could no longer take the
    job back. There the caller's implicit transaction (begun by our first statement) is
    the unit; everywhere else ``transaction()`` is a real transaction or a savepoint.
    """
    if not conn.autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
        return contextlib.nullcontext()
    return cast(AbstractAsyncContextManager[Any], conn.transaction())


async def _insert_one(conn: AnyConn, params: dict[str, Any]) -> Enqueued:
    cur = conn.cursor(row_factory=dict_row)
    if params["key"] is None:  # nothing to conflict with: one plain insert
        await cur.execute(sql.query("enqueue_keyless"), params)
        row = await cur.fetchone()
        if row is None:
            raise HeraldError(f"admission of a {params['kind']} job inserted nothing")
        return Enqueued(row["id"], row["version"], Outcome(row["outcome"]))
    for _ in range(_MAX_ADMISSION_TRIES):
        await cur.execute(sql.query("enqueue"), params)
        row = await cur.fetchone()
        if row is not None:
            return Enqueued(row["id"], row["version"], Outcome(row["outcome"]))
        # The job that blocked us finished between our insert and our look-up: again.
    raise HeraldError(
        f"could not admit {params['kind']}/{params['key']}: the object's active job kept changing"
    )


def _all_keyless(specs: Sequence[JobSpec]) -> bool:
    return all(
        isinstance(s, JobSpec) and s.key is None and s.idempotency_key is None for s in specs
    )


def _bulk_columns(params: list[dict[str, Any]], *, with_keys: bool) -> dict[str, Any]:
    """The columns of a bulk admission, each as one JSON array text.

    One text parameter per column is parsed once by the server; a text array of JSON
    documents would be escaped element by element here and parsed twice there.
    """
    run_ats = [None if p["run_at"] is None else p["run_at"].isoformat() for p in params]
    columns = {
        "kinds": json.dumps([p["kind"] for p in params]),
        "queues": json.dumps([p["queue"] for p in params]),
        # each payload is already a JSON object's text: joined, they form a JSON array.
        "payloads": "[" + ",".join([p["payload"] for p in params]) + "]",
        "priorities": json.dumps([p["priority"] for p in params]),
        "run_ats": json.dumps(run_ats),
        "max_attempts": json.dumps([p["max_attempts"] for p in params]),
    }
    if with_keys:
        columns["keys"] = json.dumps([p["key"] for p in params])
    return columns


def _assign_bulk(
    results: list[Enqueued | None],
    plain: list[int],
    prepared: list[_Prepared],
    inserted: list[Row],
) -> None:
    """Match inserted rows (in id order = input order) back to their input positions."""
    keyed_inserted = {(r["kind"], r["key"]) for r in inserted if r["key"] is not None}
    seen_keys: set[tuple[str, str]] = set()
    rows = iter(inserted)
    for i in plain:
        params = prepared[i].params
        if params["key"] is not None:
            ident = (params["kind"], params["key"])
            if ident not in keyed_inserted or ident in seen_keys:
                continue
            seen_keys.add(ident)
        row = next(rows)
        results[i] = Enqueued(row["id"], row["version"], Outcome.CREATED)


async def open_connection(settings: Settings) -> AsyncConn:
    """A single autocommit connection to the configured schema (CLI, tests)."""
    info = conninfo(database_url(settings), settings.schema, settings=settings)
    return await connect(info, pooled=settings.pooled)


def _encodable(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


def _encode_payload(payload: object, limit: int) -> str:
    """The payload as JSON text PostgreSQL can hold, within ``limit`` bytes."""
    if not isinstance(payload, dict):
        raise InvalidPayload(f"payload must be a JSON object, got {type(payload).__name__}")
    if too_deep(payload):
        raise InvalidPayload(f"payload nests deeper than {MAX_DEPTH} levels")
    try:
        payload_json = _PAYLOAD_JSON.encode(payload)
    except (TypeError, ValueError) as exc:
        raise InvalidPayload(f"payload is not JSON-serialisable: {exc}") from None
    if "\\u0000" in payload_json and _ESCAPED_NUL.search(payload_json):
        raise InvalidPayload(
            "payload contains a NUL character, which JSON in PostgreSQL cannot hold"
        )
    try:
        # ASCII text (the usual case) is its own UTF-8: no need to encode it.
        size = len(payload_json) if payload_json.isascii() else len(payload_json.encode())
    except UnicodeEncodeError:
        raise InvalidPayload(
            "payload contains a lone surrogate, which is not valid Unicode text"
        ) from None
    if size > limit:
        raise PayloadTooLarge(size, limit)
    return payload_json


def _checked_text(name: str, value: object, longest: int) -> str | None:
    """An optional key: a non-empty string of at most ``longest`` characters, no NUL."""
    if value is None:
        return None
    if not isinstance(value, str) or not 0 < len(value) <= longest:
        raise AdmissionError(f"{name} must be a non-empty string of at most {longest} characters")
    if "\x00" in value:
        raise AdmissionError(f"{name} contains a NUL character, which PostgreSQL text cannot hold")
    return value


def _checked_priority(priority: object) -> int:
    if (
        not isinstance(priority, int)
        or isinstance(priority, bool)
        or not -32768 <= priority <= 32767
    ):
        raise AdmissionError("priority must be an integer between -32768 and 32767")
    return priority


def _checked_attempts(attempts: object) -> int:
    if not isinstance(attempts, int) or not 1 <= attempts <= 1000:
        raise AdmissionError("max_attempts must be an integer between 1 and 1000")
    return attempts


def _check_run_at(run_at: object) -> None:
    if run_at is None:
        return
    if not isinstance(run_at, datetime) or run_at.tzinfo is None:
        raise AdmissionError("run_at must be a timezone-aware datetime")
    if not _EARLIEST_RUN_AT <= run_at <= _LATEST_RUN_AT:
        raise AdmissionError("run_at must lie between 1970 and 9999 (UTC)")


def _checked_queue(queue: object) -> str:
    if not isinstance(queue, str) or len(queue) > 200 or "\x00" in queue:
        raise AdmissionError("queue name must be a string of at most 200 characters, no NUL")
    return queue
