"""Admitting catalog work: registering datasets, requesting publications and deletions.

A publication's job version *is* the dataset version (one numbering):
:func:`request_publication` records the version row with the job's number in the
admitting transaction, and a scheduled fire, which admits the job alone, gets its row
from ``get_data`` (:func:`create_version`). Each action taken for someone (an API key,
a CLI user) writes an audit record in the same transaction when given an
:class:`~herald.ops.audit.Note`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
from collections.abc import Mapping
from typing import Any

import psycopg

from herald import sql
from herald.catalog import datasets as registry
from herald.catalog.datasets import (
    Dataset,
    UnknownDataset,
    UnknownVersion,
    VersionState,
    check_dataset,
)
from herald.catalog.errors import CatalogError
from herald.catalog.source_access import SourceAccess
from herald.catalog.specs import dataset_spec
from herald.client import Client, Enqueued, Outcome
from herald.db import AsyncConn, conninfo
from herald.ops import audit
from herald.schedules import (
    ScheduleError,
    ScheduleSpec,
    create_schedule,
    delete_schedule,
    get_schedule,
    update_schedule,
)

PUBLISH = "catalog.publish"
DELETE_VERSION = "catalog.delete_version"
CATALOG_ACTOR = "catalog"  # who the audit log names for schedule changes of datasets


async def request_publication(
    client: Client,
    dataset_id: str,
    *,
    idempotency_key: str | None = None,
    note: audit.Note | None = None,
) -> Enqueued:
    """Admit a publication of ``dataset_id``; its version is the job's version.

    A second request while one is active returns the active job (``in_progress``) and
    creates nothing; a request repeating an ``idempotency_key`` answers the original
    (``replay``), even once that publication has finished. Raises
    :class:`UnknownDataset` for an unregistered dataset. A created publication is
    audited when a ``note`` says who asked and why.
    """
    async with client.pool.connection() as conn, conn.transaction():
        if await registry.get_dataset(conn, dataset_id) is None:
            raise UnknownDataset(dataset_id)
        admitted = await client.enqueue(
            PUBLISH,
            {"dataset_id": dataset_id},
            key=dataset_id,
            idempotency_key=idempotency_key,
            conn=conn,
        )
        if admitted.outcome is not Outcome.CREATED:
            return admitted
        if not await create_version(conn, dataset_id, admitted.version, admitted.id):
            # Rolls the admission back: two publications must never share a number.
            raise CatalogError(
                f"version {admitted.version} of {dataset_id!r} already exists; "
                "publications must be requested through the catalog pipeline"
            )
        if note is not None:
            after = {"version": admitted.version, "job_id": admitted.id}
            await audit.record(
                conn, note.actor, "publish", ("dataset", dataset_id), note.reason, None, after
            )
        return admitted


async def create_version(conn: AsyncConn, dataset_id: str, version: int, job_id: int) -> bool:
    """Record ``version`` as requested; False if that version already exists.

    No publication job is active (its admission was just granted), so a version still
    active belongs to an attempt that ended without publishing whose compensation has
    not run yet: it is marked failed now, and the compensation finds it so.
    """
    params = {"dataset_id": dataset_id, "version": version, "job_id": job_id}
    for _ in range(3):
        try:
            async with conn.transaction():
                cur = await conn.execute(sql.query("catalog_version_create"), params)
                row = await cur.fetchone()
            return row is not None
        except psycopg.errors.UniqueViolation as exc:
            if exc.diag.constraint_name != "dataset_versions_one_active":
                raise
            cur = await conn.execute(
                sql.query("catalog_version_active"), {"dataset_id": dataset_id}
            )
            stale = await cur.fetchone()
            if stale is not None:
                await registry.transition(
                    conn,
                    dataset_id,
                    stale["version"],
                    VersionState.FAILED,
                    error=f"publication job {stale['job_id']} ended without publishing",
                )
    raise CatalogError(f"could not record version {version} of {dataset_id!r}")


async def request_deletion(
    client: Client, dataset_id: str, version: int, *, note: audit.Note | None = None
) -> Enqueued:
    """Admit a job removing version ``version``'s files and catalog entry.

    Only a published or failed version can be deleted (an active one is still being
    published); the version shows ``deleting`` until the job is done. The request is
    audited when a ``note`` says who asked and why.
    """
    async with client.pool.connection() as conn, conn.transaction():
        if await registry.get_dataset(conn, dataset_id) is None:
            raise UnknownDataset(dataset_id)
        record = await registry.get_version(conn, dataset_id, version)
        if record is None:
            raise UnknownVersion(dataset_id, version)
        if record.state == VersionState.DELETED:
            raise CatalogError(f"version {version} of {dataset_id!r} is already deleted")
        admitted = await client.enqueue(
            DELETE_VERSION,
            {"dataset_id": dataset_id, "version": version},
            key=f"{dataset_id}/v{version}",
            conn=conn,
        )
        if admitted.outcome is Outcome.CREATED:
            await registry.transition(conn, dataset_id, version, VersionState.DELETING)
            if note is not None:
                before = {"version": version, "state": record.state}
                after = {"version": version, "state": "deleting", "job_id": admitted.id}
                await audit.record(
                    conn,
                    note.actor,
                    "delete_version",
                    ("dataset", dataset_id),
                    note.reason,
                    before,
                    after,
                )
        return admitted


# --- registration -----------------------------------------------------------------------

RECURRENCE_FIELDS = ("frequency", "timezone", "at", "weekday", "day", "cron", "misfire")


def recurrence_spec(dataset_id: str, recurrence: Mapping[str, Any]) -> ScheduleSpec:
    """The schedule of a dataset's recurrence: ``{"frequency": "daily", "timezone":
    "Europe/Brussels", "at": "02:00"}`` (also ``weekday``, ``day``, ``cron``, ``misfire``)."""
    unknown = set(recurrence) - set(RECURRENCE_FIELDS)
    if unknown:
        raise ScheduleError(f"unknown recurrence field(s): {', '.join(sorted(unknown))}")
    at = recurrence.get("at")
    if at is not None and not isinstance(at, dt.time):
        try:
            at = dt.time.fromisoformat(str(at))
        except ValueError:
            raise ScheduleError(
                f"recurrence 'at' must be a time such as 02:00, got {at!r}"
            ) from None
    spec = ScheduleSpec(
        kind=PUBLISH,
        key=dataset_id,
        frequency=str(recurrence.get("frequency", "")),
        timezone=str(recurrence.get("timezone", "UTC")),
        at=at,
        weekday=recurrence.get("weekday"),
        day=recurrence.get("day"),
        cron=recurrence.get("cron"),
        payload={"dataset_id": dataset_id},
        misfire=str(recurrence.get("misfire", "once")),
    )
    spec.validate()
    return spec


async def save_dataset(
    client: Client,
    dataset: Dataset,
    recurrence: Mapping[str, Any] | None = None,
    *,
    note: audit.Note | None = None,
) -> tuple[Dataset, bool]:
    """Register (or update) ``dataset`` with its optional recurrence, in one transaction.

    A recurrence is a schedule of ``catalog.publish`` keyed by the dataset id: created,
    changed in place, or deleted when the dataset is registered again without one.
    Returns the stored dataset and whether it was new; bad input writes nothing. With a
    ``note`` the registration is audited (its description before and after).
    """
    check_dataset(dataset)
    spec = None if recurrence is None else recurrence_spec(dataset.id, recurrence)
    # What can be checked now is: a file that is not there, a role that cannot be used.
    settings = client.settings
    own = conninfo(settings.database_url, settings.schema) if settings.database_url else None
    access = SourceAccess.for_settings(settings, herald_conninfo=own)
    await asyncio.to_thread(access.check, dict(dataset.source))
    reason = "dataset registered"
    if note is not None:
        reason = f"dataset registered by {note.actor}: {note.reason}"[: audit.MAX_REASON]
    async with client.pool.connection() as conn, conn.transaction():
        existing = await registry.get_dataset(conn, dataset.id)
        schedule_id = existing.schedule_id if existing is not None else None
        if schedule_id is not None and await get_schedule(conn, schedule_id) is None:
            schedule_id = None
        if spec is not None and schedule_id is not None:
            changes = {f: getattr(spec, f) for f in ("frequency", "timezone", "at", "weekday")}
            changes.update(day=spec.day, cron=spec.cron, misfire=spec.misfire)
            await update_schedule(
                conn, schedule_id, actor=CATALOG_ACTOR, reason=reason, app=client.app, **changes
            )
        elif spec is not None:
            row = await create_schedule(
                conn, spec, app=client.app, actor=CATALOG_ACTOR, reason=reason
            )
            schedule_id = row.id
        elif schedule_id is not None:
            await delete_schedule(
                conn, schedule_id, actor=CATALOG_ACTOR, reason=f"{reason} without a recurrence"
            )
            schedule_id = None
        saved, created = await registry.register_dataset(
            conn, dataclasses.replace(dataset, schedule_id=schedule_id)
        )
        if note is not None:
            before = None if existing is None else dataset_spec(existing)
            after = dataset_spec(saved)
            action = "register" if created else "update"
            await audit.record(
                conn, note.actor, action, ("dataset", saved.id), note.reason, before, after
            )
        return saved, created
