"""The dataset registry and each dataset's versions, stored in PostgreSQL.

A version moves ``requested -> exporting -> exported -> published``; any step before
publication may end in ``failed``, and a published or failed version may be removed
(``deleting -> deleted``). The database allows one publication in flight per dataset
and never reuses a version number.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from herald import sql
from herald.catalog.errors import CatalogError, MetadataError
from herald.catalog.export import ExportedFile
from herald.catalog.metadata import (
    Agent,
    CatalogUrls,
    Concept,
    ContactPoint,
    DatasetInfo,
    License,
    Location,
    Period,
    render_entry,
)
from herald.catalog.sources import check_source_spec
from herald.catalog.validation import TIERS, Tier
from herald.db import AsyncConn, Row
from herald.rows import fetch_all, from_row, one_row
from herald.states import JobState


class VersionState(StrEnum):
    """A version's state, as the dataset_versions.state CHECK constraint lists them."""

    REQUESTED = "requested"
    EXPORTING = "exporting"
    EXPORTED = "exported"
    PUBLISHED = "published"
    FAILED = "failed"
    DELETING = "deleting"
    DELETED = "deleted"


ACTIVE_STATES = (VersionState.REQUESTED, VersionState.EXPORTING, VersionState.EXPORTED)
# Which states each state may be reached from.
_REACHED_FROM: dict[VersionState, tuple[VersionState, ...]] = {
    VersionState.REQUESTED: (),
    VersionState.EXPORTING: (VersionState.REQUESTED, VersionState.EXPORTING),
    VersionState.EXPORTED: (VersionState.EXPORTING, VersionState.EXPORTED),
    VersionState.PUBLISHED: (VersionState.EXPORTED,),
    VersionState.FAILED: ACTIVE_STATES,
    VersionState.DELETING: (VersionState.PUBLISHED, VersionState.FAILED, VersionState.DELETING),
    VersionState.DELETED: (VersionState.DELETING,),
}


class UnknownDataset(CatalogError, LookupError):
    def __init__(self, dataset_id: str) -> None:
        super().__init__(f"no dataset {dataset_id!r} is registered")


class DatasetIdTaken(CatalogError):
    """The dataset id is another tenant's (ids are deployment-wide: they name graphs)."""


class UnknownVersion(CatalogError, LookupError):
    def __init__(self, dataset_id: str, version: int) -> None:
        super().__init__(f"dataset {dataset_id!r} has no version {version}")


class InvalidTransition(CatalogError):
    def __init__(self, dataset_id: str, version: int, state: str, target: str) -> None:
        super().__init__(
            f"version {version} of {dataset_id!r} is {state}; it cannot become {target}"
        )


@dataclass(frozen=True)
class Dataset:
    """A registered dataset: its description, where its records come from, its tier."""

    info: DatasetInfo
    source: Mapping[str, Any]
    tier: Tier = "basic"
    schedule_id: int | None = None
    next_version: int = 1

    @property
    def id(self) -> str:
        return self.info.id


@dataclass(frozen=True)
class FileRecord:
    format: str
    store_key: str
    name: str
    media_type: str
    byte_size: int
    record_count: int
    sha256: str


@dataclass(frozen=True)
class VersionRecord:
    dataset_id: str
    version: int
    state: VersionState
    job_id: int | None
    record_count: int | None
    validation: dict[str, Any] | None
    metadata: str | None
    error: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    published_at: dt.datetime | None
    deleted_at: dt.datetime | None
    files: tuple[FileRecord, ...] = field(default=())
    run_id: int | None = None  # its generations run, once its publication started
    generation: int | None = None  # the generation it was published as
    # The exported columns: {"name": ..., "xml_name": ...} (xml_name where it differs).
    columns: tuple[dict[str, str], ...] = field(default=())
    # What the publication job shows now (None when the job was not read or is gone).
    job_state: JobState | None = None
    job_step: str | None = None
    job_error: str | None = None
    progress: dict[str, Any] | None = None

    @property
    def active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def abandoned(self) -> bool:
        """Still in flight on its row, but its job ended without publishing (cancelled,
        or dead before its cleanup ran): the cleanup will mark it failed."""
        return self.active and self.job_state in (JobState.CANCELLED, JobState.DEAD)

    @property
    def status(self) -> str:
        """The state to show: a version whose job ended without publishing shows
        ``failed`` at once, before its cleanup has caught up with its row."""
        return VersionState.FAILED if self.abandoned else self.state

    @property
    def problem(self) -> str | None:
        """The error to show (the job's last one while the row has none yet)."""
        if self.error or not self.abandoned:
            return self.error
        ended = "was cancelled" if self.job_state == JobState.CANCELLED else "failed"
        return f"publication job {self.job_id} {ended}: {self.job_error or 'no error recorded'}"


def check_dataset(dataset: Dataset) -> None:
    """Refuse a dataset Herald could not publish, before anything is stored."""
    if dataset.info.publisher is None:
        raise MetadataError("a dataset needs a publisher (name and URI)")
    if not dataset.info.publisher.name.strip():
        raise MetadataError("the publisher needs a name")
    if dataset.tier not in TIERS:
        raise MetadataError(f"quality tier must be one of {', '.join(TIERS)}, got {dataset.tier!r}")
    check_source_spec(dataset.source)
    # Rendering a trial entry checks every identifier (id, URIs, e-mail) in one place.
    now = dt.datetime.now(dt.UTC)
    render_entry(dataset.info, 1, (), CatalogUrls("http://localhost"), now, now)


def _concept(data: Mapping[str, Any] | None) -> Concept | None:
    return None if data is None else Concept(str(data["uri"]), str(data["label"]))


def _concept_json(concept: Concept | None) -> dict[str, str] | None:
    return None if concept is None else {"uri": concept.uri, "label": concept.label}


def _details(info: DatasetInfo) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if info.publisher is not None and info.publisher.type is not None:
        details["publisher_type"] = _concept_json(info.publisher.type)
    if info.license is not None and info.license.type is not None:
        details["license_type"] = _concept_json(info.license.type)
    if info.spatial is not None:
        details["spatial"] = {
            "uri": info.spatial.uri,
            "bbox": info.spatial.bbox,
            "centroid": info.spatial.centroid,
        }
    if info.temporal is not None:
        end = info.temporal.end
        details["temporal"] = {
            "start": info.temporal.start.isoformat(),
            "end": end.isoformat() if end else None,
        }
    if info.landing_page:
        details["landing_page"] = info.landing_page
    return details


def _dataset(row: Row) -> Dataset:
    details: dict[str, Any] = row["details"]
    contact = row["contact_point"]
    spatial = details.get("spatial")
    temporal = details.get("temporal")
    info = DatasetInfo(
        id=row["id"],
        title=row["title"],
        description=row["description"],
        publisher=Agent(
            row["publisher_name"], row["publisher_uri"], _concept(details.get("publisher_type"))
        ),
        license=(
            License(row["license_uri"], _concept(details.get("license_type")))
            if row["license_uri"]
            else None
        ),
        keywords=tuple(row["keywords"]),
        themes=tuple(Concept(t["uri"], t["label"]) for t in row["themes"]),
        contact_point=(
            ContactPoint(contact["name"], contact.get("email"), contact.get("url"))
            if contact
            else None
        ),
        languages=tuple(row["languages"]),
        spatial=Location(spatial["uri"], spatial.get("bbox"), spatial.get("centroid"))
        if spatial
        else None,
        temporal=Period(
            dt.date.fromisoformat(temporal["start"]),
            dt.date.fromisoformat(temporal["end"]) if temporal.get("end") else None,
        )
        if temporal
        else None,
        landing_page=details.get("landing_page"),
    )
    return Dataset(
        info=info,
        source=row["source"],
        tier=row["tier"],
        schedule_id=row["schedule_id"],
        next_version=row["next_version"],
    )


async def register_dataset(conn: AsyncConn, dataset: Dataset) -> tuple[Dataset, bool]:
    """Register ``dataset`` or update its description; True when it was new."""
    check_dataset(dataset)
    info = dataset.info
    assert info.publisher is not None
    contact = info.contact_point
    params = {
        "id": info.id,
        "title": info.title,
        "description": info.description,
        "publisher_name": info.publisher.name,
        "publisher_uri": info.publisher.uri,
        "license_uri": info.license.uri if info.license else None,
        "keywords": list(info.keywords),
        "themes": Jsonb([_concept_json(t) for t in info.themes]),
        "contact_point": Jsonb({"name": contact.name, "email": contact.email, "url": contact.url})
        if contact
        else None,
        "languages": list(info.languages),
        "details": Jsonb(_details(info)),
        "source": Jsonb(dict(dataset.source)),
        "tier": dataset.tier,
        "schedule_id": dataset.schedule_id,
    }
    try:
        row = await one_row(conn, "catalog_dataset_upsert", params)
    except psycopg.errors.InsufficientPrivilege as exc:
        # The id is held by a row this tenant may not see: the policy refuses the update.
        if "row-level security" not in str(exc):
            raise
        raise DatasetIdTaken(
            f"dataset id {info.id!r} is taken (dataset ids are unique across the "
            "deployment); choose another"
        ) from None
    return _dataset(row), bool(row["created"])


async def get_dataset(conn: AsyncConn, dataset_id: str) -> Dataset | None:
    cursor = await conn.execute(sql.query("catalog_dataset_get"), {"id": dataset_id})
    row = await cursor.fetchone()
    return None if row is None else _dataset(row)


async def list_datasets(conn: AsyncConn, limit: int = 1000) -> list[Dataset]:
    cursor = await conn.execute(sql.query("catalog_dataset_list"), {"limit": limit})
    return [_dataset(row) for row in await cursor.fetchall()]


def _version(row: Row, files: Sequence[FileRecord] = ()) -> VersionRecord:
    return VersionRecord(
        dataset_id=row["dataset_id"],
        version=row["version"],
        state=VersionState(row["state"]),
        job_id=row["job_id"],
        record_count=row["record_count"],
        validation=row["validation"],
        metadata=row["metadata"],
        error=row["error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        published_at=row["published_at"],
        deleted_at=row["deleted_at"],
        files=tuple(files),
        run_id=row.get("run_id"),
        generation=row.get("generation"),
        columns=tuple(row.get("columns") or ()),
        job_state=JobState(row["job_state"]) if row.get("job_state") else None,
        job_step=row.get("job_step"),
        job_error=row.get("job_error"),
        progress=row.get("job_progress"),
    )


async def set_version_job(conn: AsyncConn, dataset_id: str, version: int, job_id: int) -> None:
    cursor = await conn.execute(
        sql.query("catalog_version_set_job"),
        {"dataset_id": dataset_id, "version": version, "job_id": job_id},
    )
    if await cursor.fetchone() is None:
        raise UnknownVersion(dataset_id, version)


async def transition(
    conn: AsyncConn,
    dataset_id: str,
    version: int,
    state: VersionState,
    *,
    record_count: int | None = None,
    columns: Sequence[Mapping[str, str]] | None = None,
    validation: Mapping[str, Any] | None = None,
    metadata: str | None = None,
    error: str | None = None,
) -> VersionRecord:
    """Move a version to ``state``; refused (InvalidTransition) from a state that
    cannot lead there. Repeating exporting/exported/deleting is allowed (retries)."""
    if state not in _REACHED_FROM or state == VersionState.REQUESTED:
        raise ValueError(f"cannot move a version to {str(state)!r}")
    if state == VersionState.FAILED and not error:
        raise ValueError("a failed version needs an error message")
    cursor = await conn.execute(
        sql.query("catalog_version_transition"),
        {
            "dataset_id": dataset_id,
            "version": version,
            "state": state,
            "from_states": list(_REACHED_FROM[state]),
            "record_count": record_count,
            "columns": Jsonb([dict(c) for c in columns]) if columns is not None else None,
            "validation": Jsonb(dict(validation)) if validation is not None else None,
            "metadata": metadata,
            "error": error,
        },
    )
    row = await cursor.fetchone()
    if row is None:
        current = await get_version(conn, dataset_id, version)
        if current is None:
            raise UnknownVersion(dataset_id, version)
        raise InvalidTransition(dataset_id, version, current.state, state)
    return _version(row)


async def record_files(
    conn: AsyncConn, dataset_id: str, version: int, files: Sequence[ExportedFile]
) -> None:
    """Record what an export produced for this version (again, on a retried export)."""
    async with conn.transaction():
        for file in files:
            await conn.execute(
                sql.query("catalog_file_record"),
                {
                    "dataset_id": dataset_id,
                    "version": version,
                    "format": file.format.name,
                    "store_key": file.key,
                    "name": file.name,
                    "media_type": file.format.media_type,
                    "byte_size": file.byte_size,
                    "record_count": file.record_count,
                    "sha256": file.sha256,
                },
            )


async def forget_files(conn: AsyncConn, dataset_id: str, version: int) -> list[str]:
    """Drop the version's file records (after the store deleted them); their keys."""
    cursor = await conn.execute(
        sql.query("catalog_file_forget"), {"dataset_id": dataset_id, "version": version}
    )
    return sorted(row["store_key"] for row in await cursor.fetchall())


async def get_version(conn: AsyncConn, dataset_id: str, version: int) -> VersionRecord | None:
    params = {"dataset_id": dataset_id, "version": version}
    cursor = await conn.execute(sql.query("catalog_version_get"), params)
    row = await cursor.fetchone()
    if row is None:
        return None
    return _version(row, await fetch_all(conn, "catalog_file_list", params, FileRecord))


async def list_versions(conn: AsyncConn, dataset_id: str) -> list[VersionRecord]:
    """A dataset's versions, highest first, each with its files."""
    params = {"dataset_id": dataset_id}
    cursor = await conn.execute(sql.query("catalog_version_list"), params)
    rows = await cursor.fetchall()
    files: dict[int, list[FileRecord]] = {}
    cursor = await conn.execute(sql.query("catalog_file_list_dataset"), params)
    for row in await cursor.fetchall():
        files.setdefault(row["version"], []).append(from_row(FileRecord, row))
    return [_version(row, files.get(row["version"], ())) for row in rows]
