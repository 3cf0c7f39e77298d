"""``/v1/datasets``, ``/v1/catalog`` and ``/v1/sparql``: the open-data catalog over HTTP.

Registering a dataset (and its recurrence) and requesting a publication need ``submit``;
reading needs ``read``; deleting a version needs ``operate``. A publication answers 202
with the job, the new version number and the version's status URL. Files are served at
the download URLs the DCAT-AP names; the catalog and each version's metadata come as
Turtle, JSON-LD or RDF/XML by content negotiation; the SPARQL endpoint is read-only.
"""

from __future__ import annotations

from datetime import date, time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from rdflib import Graph
from starlette.concurrency import run_in_threadpool

from herald.api import catalog_rdf
from herald.api.auth import Principal, require
from herald.api.catalog_downloads import file_response
from herald.api.catalog_rdf import RDF_SYNTAXES, negotiate, rdf_response, stores
from herald.api.catalog_sources import SourceIn, source_dict
from herald.api.disclosure import redact
from herald.api.jobs import IdempotencyKey
from herald.api.models import ActionIn, Reason, Strict
from herald.api.problems import Problem, not_found, responses
from herald.api.state import ApiState, State
from herald.catalog.datasets import (
    Dataset,
    DatasetIdTaken,
    FileRecord,
    UnknownDataset,
    UnknownVersion,
    VersionRecord,
    VersionState,
    get_dataset,
    get_version,
    list_datasets,
    list_versions,
)
from herald.catalog.errors import CatalogError, MetadataError, SourceError
from herald.catalog.pipeline import request_deletion, request_publication, save_dataset
from herald.catalog.specs import dataset_spec, parse_dataset
from herald.client import Enqueued
from herald.ops.audit import NO_REASON, Note
from herald.states import ACTIVE_JOB_STATES

router = APIRouter(tags=["catalog"])
router.include_router(catalog_rdf.router)
Submitter = Annotated[Principal, Depends(require("submit"))]
Reader = Annotated[Principal, Depends(require("read"))]
Operator = Annotated[Principal, Depends(require("operate"))]

SEGMENT = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"  # as the export store names paths
DatasetId = Annotated[str, Path(pattern=SEGMENT, description="the dataset's id")]
VersionNo = Annotated[int, Path(ge=1, le=2**31 - 1)]
FileName = Annotated[str, Path(pattern=SEGMENT)]
Text = Annotated[str, Field(max_length=100_000, pattern=r"^[^\x00]*$")]
Line = Annotated[str, Field(min_length=1, max_length=1000, pattern=r"^[^\x00]*[^\s\x00][^\x00]*$")]
Uri = Annotated[str, Field(min_length=3, max_length=2000, pattern=r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")]


Label = Annotated[str, Field(max_length=1000, pattern=r"^[^\x00]*$")]
Wkt = Annotated[str, Field(min_length=1, max_length=100_000, pattern=r"^[^\x00]*$")]
Language = Annotated[
    str,
    Field(
        pattern=r"^([A-Za-z]{3}|[A-Za-z][A-Za-z0-9+.-]*:\S+)$",
        max_length=2000,
        description="a three-letter code such as ENG, or an authority URI",
    ),
]


class ConceptIn(Strict):
    uri: Uri
    label: Label


class PublisherIn(Strict):
    name: Line
    uri: Uri
    type: ConceptIn | None = Field(default=None, description="an ADMS publisher type")


class LicenseIn(Strict):
    uri: Uri
    type: ConceptIn | None = Field(default=None, description="an ADMS licence type")


class ContactIn(Strict):
    name: Line
    email: (
        Annotated[str, Field(max_length=320, pattern=r"^(mailto:)?[^@\s<>]+@[^@\s<>]+$")] | None
    ) = None
    url: Uri | None = None


class LocationIn(Strict):
    uri: Uri
    bbox: Wkt | None = Field(default=None, description="a WKT polygon")
    centroid: Wkt | None = Field(default=None, description="a WKT point")


class PeriodIn(Strict):
    start: date
    end: date | None = None


class RecurrenceIn(Strict):
    """When to republish, as a schedule (see ``/v1/schedules``)."""

    frequency: Literal["daily", "weekly", "monthly", "cron"]
    timezone: Annotated[str, Field(pattern=r"^[A-Za-z0-9_+\-/]{1,100}$")] = "UTC"
    at: time | None = None
    weekday: Annotated[int, Field(ge=1, le=7)] | None = None
    day: Annotated[int, Field(ge=1, le=31)] | None = None
    cron: Annotated[str, Field(max_length=200, pattern=r"^[0-9A-Za-z*/,\- ?#]+$")] | None = None
    misfire: Literal["once", "skip", "all"] = "once"


class DatasetIn(Strict):
    """A dataset's description: the same document ``herald dataset register --file``
    reads, and ``GET /v1/datasets/{id}`` answers (so it can be sent back unchanged)."""

    id: Annotated[str, Field(pattern=SEGMENT)]
    title: Line
    description: Text
    publisher: PublisherIn
    license: Uri | LicenseIn | None = None
    keywords: Annotated[list[Line], Field(max_length=100)] = []
    themes: Annotated[list[ConceptIn], Field(max_length=100)] = []
    contact_point: ContactIn | None = None
    languages: Annotated[list[Language], Field(max_length=50)] = []
    spatial: LocationIn | None = None
    temporal: PeriodIn | None = None
    landing_page: Uri | None = None
    source: SourceIn
    tier: Literal["basic", "high"] = "basic"
    recurrence: RecurrenceIn | None = None
    reason: Reason | None = Field(default=None, description="why (for the audit log)")


class PublicationIn(Strict):
    reason: Reason | None = Field(default=None, description="why (for the audit log)")


class PublicationOut(BaseModel):
    id: int  # the job
    version: int
    outcome: Literal["created", "in_progress", "replay"]
    status_url: str
    job_url: str


# --- helpers ------------------------------------------------------------------------------


def _dataset_url(dataset_id: str) -> str:
    return f"/v1/datasets/{dataset_id}"


def _version_url(dataset_id: str, version: int) -> str:
    return f"{_dataset_url(dataset_id)}/versions/{version}"


def _dataset_out(dataset: Dataset, removed: list[str] | None = None) -> dict[str, Any]:
    out = {
        **dataset_spec(dataset),
        "schedule_id": dataset.schedule_id,
        "next_version": dataset.next_version,
        "versions_url": f"{_dataset_url(dataset.id)}/versions",
    }
    if removed is not None:
        out["removed"] = removed
    return out


def _removed(before: Dataset | None, after: Dataset) -> list[str]:
    """The fields a registration emptied: said in its answer, never dropped silently."""
    if before is None:
        return []
    old, new = dataset_spec(before), dataset_spec(after)
    return sorted(k for k, v in old.items() if v not in (None, [], "") and new[k] in (None, []))


def _file_out(dataset_id: str, version: int, file: FileRecord) -> dict[str, Any]:
    return {
        "name": file.name,
        "format": file.format,
        "media_type": file.media_type,
        "byte_size": file.byte_size,
        "record_count": file.record_count,
        "sha256": file.sha256,
        "download_url": f"{_version_url(dataset_id, version)}/files/{file.name}",
    }


def _version_out(record: VersionRecord) -> dict[str, Any]:
    """A version as its job shows it now: ``state`` is ``failed`` as soon as the job ended
    without publishing, and ``progress`` counts the records exported so far."""
    url = _version_url(record.dataset_id, record.version)
    running = record.active and record.job_state in ACTIVE_JOB_STATES
    return {
        "dataset_id": record.dataset_id,
        "version": record.version,
        "state": record.status,
        "step": record.job_step,  # the step running, or the last one run
        "progress": record.progress if running else None,
        "job_id": record.job_id,
        "job_state": record.job_state,
        "job_url": f"/v1/jobs/{record.job_id}" if record.job_id else None,
        "record_count": record.record_count,
        "columns": list(record.columns),
        "files": [_file_out(record.dataset_id, record.version, f) for f in record.files],
        "validation": record.validation,
        "error": redact(record.problem),
        "metadata_url": url if record.metadata else None,
        "metadata_media_types": list(RDF_SYNTAXES) if record.metadata else [],
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "published_at": record.published_at,
        "deleted_at": record.deleted_at,
        "status_url": url,
    }


async def _version(state: ApiState, dataset_id: str, version: int) -> VersionRecord:
    async with state.client.pool.connection() as conn:
        if await get_dataset(conn, dataset_id) is None:
            raise not_found("dataset", repr(dataset_id))
        record = await get_version(conn, dataset_id, version)
    if record is None:
        raise Problem(404, "not-found", f"dataset {dataset_id!r} has no version {version}")
    return record


def _accepted(
    dataset_id: str, version: int, admitted: Enqueued, response: Response
) -> PublicationOut:
    """A 202 naming the job and the version it acts on (also in ``Location``)."""
    url = _version_url(dataset_id, version)
    response.headers["Location"] = url
    job_url = f"/v1/jobs/{admitted.id}"
    return PublicationOut(
        id=admitted.id,
        version=version,
        outcome=admitted.outcome.value,
        status_url=url,
        job_url=job_url,
    )


# --- datasets -----------------------------------------------------------------------------


@router.post(
    "/v1/datasets",
    status_code=201,
    responses=responses(401, 403, 409, 422),
    summary="Register a dataset, or update its description (200)",
)
async def register(
    body: DatasetIn, response: Response, state: State, principal: Submitter
) -> dict[str, Any]:
    """A recurrence creates (or changes) the schedule that republishes the dataset;
    registering again without one removes it. Sources that read the server's own
    database or files (``postgres_*``, ``csv``, ``jsonl``) need an ``admin`` key:
    whatever they read is published."""
    kind = body.source.type
    if kind != "generated" and not principal.allows("admin"):
        raise Problem(403, "forbidden", f"a {kind} source needs an API key with the admin scope")
    recurrence = body.recurrence.model_dump(exclude_none=True) if body.recurrence else None
    spec = body.model_dump(
        mode="json", exclude_none=True, exclude={"recurrence", "reason", "source"}
    )
    spec["source"] = source_dict(body.source)
    note = Note(principal.name, body.reason or NO_REASON)
    try:
        dataset, _recurrence = parse_dataset(spec)
        async with state.client.pool.connection() as conn:
            before = await get_dataset(conn, dataset.id)
        saved, created = await save_dataset(state.client, dataset, recurrence, note=note)
    except (MetadataError, SourceError) as exc:
        raise Problem(422, "invalid-dataset", str(exc)) from None
    except DatasetIdTaken as exc:
        raise Problem(409, "conflict", str(exc)) from None
    response.status_code = 201 if created else 200
    response.headers["Location"] = _dataset_url(saved.id)
    return _dataset_out(saved, removed=_removed(before, saved))


@router.get("/v1/datasets", responses=responses(401, 403, 422), summary="List datasets")
async def index(
    state: State, _: Reader, limit: Annotated[int, Query(ge=1, le=1000)] = 1000
) -> list[dict[str, Any]]:
    async with state.client.pool.connection() as conn:
        return [_dataset_out(d) for d in await list_datasets(conn, limit)]


@router.get(
    "/v1/datasets/{dataset_id}",
    responses=responses(401, 403, 404, 422),
    summary="Show a dataset",
)
async def show(dataset_id: DatasetId, state: State, _: Reader) -> dict[str, Any]:
    async with state.client.pool.connection() as conn:
        dataset = await get_dataset(conn, dataset_id)
    if dataset is None:
        raise not_found("dataset", repr(dataset_id))
    return _dataset_out(dataset)


@router.post(
    "/v1/datasets/{dataset_id}/publications",
    status_code=202,
    response_model=PublicationOut,
    responses=responses(401, 403, 404, 422),
    summary="Publish a new version (or find the one in progress)",
)
async def publish(
    dataset_id: DatasetId,
    response: Response,
    state: State,
    principal: Submitter,
    body: PublicationIn | None = None,
    idempotency_key: IdempotencyKey = None,
) -> PublicationOut:
    """202 with the job, the version number and the version's status URL (also in
    ``Location``); while a publication is active, that one (``in_progress``). An
    ``Idempotency-Key`` header seen before answers the original publication
    (``replay``), even once it has finished: a retried request never publishes twice."""
    note = Note(principal.name, (body.reason if body else None) or NO_REASON)
    try:
        admitted = await request_publication(
            state.client, dataset_id, idempotency_key=idempotency_key, note=note
        )
    except UnknownDataset as exc:
        raise Problem(404, "not-found", str(exc)) from None
    # The job's version is the dataset's version: one numbering.
    return _accepted(dataset_id, admitted.version, admitted, response)


# --- versions -----------------------------------------------------------------------------


@router.get(
    "/v1/datasets/{dataset_id}/versions",
    responses=responses(401, 403, 404, 422),
    summary="A dataset's versions, highest first",
)
async def versions(dataset_id: DatasetId, state: State, _: Reader) -> list[dict[str, Any]]:
    async with state.client.pool.connection() as conn:
        if await get_dataset(conn, dataset_id) is None:
            raise not_found("dataset", repr(dataset_id))
        records = await list_versions(conn, dataset_id)
    return [_version_out(r) for r in records]


@router.get(
    "/v1/datasets/{dataset_id}/versions/{version}",
    responses={
        **responses(401, 403, 404, 406, 422),
        200: {
            "description": "The version's state, step, files and validation report (JSON), "
            "or its DCAT-AP as Turtle, JSON-LD or RDF/XML by Accept",
            "content": {"application/json": {}, **{m: {} for m in RDF_SYNTAXES}},
        },
    },
    summary="A version: state, step, files, validation report, DCAT-AP",
)
async def version_status(
    dataset_id: DatasetId, version: VersionNo, request: Request, state: State, _: Reader
) -> Any:
    chosen = negotiate(request.headers.get("accept"), ["application/json", *RDF_SYNTAXES])
    record = await _version(state, dataset_id, version)
    if chosen != "application/json":
        if record.metadata is None:
            raise Problem(
                404,
                "no-metadata",
                f"version {version} of {dataset_id!r} has no DCAT-AP ({record.state})",
            )
        graph = Graph().parse(data=record.metadata, format="turtle")
        return await rdf_response(graph, chosen)
    body = _version_out(record)
    links = ", ".join(
        f'<{body["status_url"]}>; rel="describedby"; type="{m}"' for m in RDF_SYNTAXES
    )
    return JSONResponse(jsonable_encoder(body), headers={"Link": links} if record.metadata else {})


@router.delete(
    "/v1/datasets/{dataset_id}/versions/{version}",
    status_code=202,
    response_model=PublicationOut,
    responses=responses(401, 403, 404, 409, 422),
    summary="Remove a version's files and catalog entry (as a job)",
)
async def delete_version(
    dataset_id: DatasetId,
    version: VersionNo,
    body: ActionIn,
    response: Response,
    state: State,
    principal: Operator,
) -> PublicationOut:
    """Takes a ``reason`` (for the audit log), as every removal does."""
    note = Note(principal.name, body.reason)
    try:
        admitted = await request_deletion(state.client, dataset_id, version, note=note)
    except (UnknownDataset, UnknownVersion) as exc:
        raise Problem(404, "not-found", str(exc)) from None
    except CatalogError as exc:  # still being published, or already deleted
        raise Problem(409, "conflict", str(exc)) from None
    return _accepted(dataset_id, version, admitted, response)


_DOWNLOAD = "/v1/datasets/{dataset_id}/versions/{version}/files/{name}"


@router.get(
    _DOWNLOAD,
    responses={
        **responses(401, 403, 404, 416, 422),
        200: {"description": "The file", "content": {"application/octet-stream": {}}},
        206: {"description": "The requested range of the file"},
        304: {"description": "Not modified (If-None-Match)"},
    },
    summary="Download a published file (ETag, ranges, streamed)",
)
async def download(
    dataset_id: DatasetId,
    version: VersionNo,
    name: FileName,
    request: Request,
    state: State,
    _: Reader,
) -> Response:
    record = await _version(state, dataset_id, version)
    file = next((f for f in record.files if f.name == name), None)
    if record.state != VersionState.PUBLISHED or file is None:
        raise Problem(404, "not-found", f"version {version} of {dataset_id!r} has no file {name}")
    export_store, _triples = stores(state)
    try:
        size = await run_in_threadpool(export_store.size, file.store_key)
        handle = await run_in_threadpool(export_store.open, file.store_key)
    except FileNotFoundError:  # removed between the lookup and now
        raise Problem(404, "not-found", f"file {name} is no longer stored") from None
    return file_response(
        request,
        handle,
        size=size,
        sha256=file.sha256,
        media_type=file.media_type,
        filename=file.name,
    )


# HEAD shares the handler: the same checks and headers, file_response leaves the body out.
router.add_api_route(
    _DOWNLOAD,
    download,
    methods=["HEAD"],
    operation_id="download_headers",
    responses={
        **responses(401, 403, 404, 416, 422),
        200: {"description": "The file's headers (size, ETag), no body"},
        206: {"description": "The requested range's headers, no body"},
        304: {"description": "Not modified (If-None-Match)"},
    },
    summary="A published file's headers: size, ETag, ranges (no body)",
)
