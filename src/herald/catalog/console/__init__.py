"""The catalog's pages in the operator console: datasets, their versions, files,
validation reports and catalog entries.

The console does not import this module: the ``herald.console`` entry point of Herald's
distribution names :data:`extension`, and the console picks it up like any
application's. Reads take the signed-in caller, as the console's own do.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.catalog.console.actions import ACTIONS
from herald.catalog.console.actions import dataset_id as dataset_id_of
from herald.catalog.datasets import Dataset, VersionRecord, get_dataset, get_version, list_datasets
from herald.catalog.datasets import list_versions as versions_of
from herald.console import Caller, Missing, NavEntry, Signed, application_extension, render
from herald.console.data import audit_entries
from herald.console.web import identifier

router = APIRouter()


async def datasets(caller: Caller) -> list[Dataset]:
    async with caller.state.client.pool.connection() as conn:
        return await list_datasets(conn)


async def dataset(caller: Caller, dataset_id: str) -> tuple[Dataset, list[VersionRecord]]:
    async with caller.state.client.pool.connection() as conn:
        found = await get_dataset(conn, dataset_id)
        if found is None:
            raise Missing(f"no dataset {dataset_id!r} is registered")
        return found, await versions_of(conn, dataset_id)


async def version(caller: Caller, dataset_id: str, number: int) -> tuple[Dataset, VersionRecord]:
    async with caller.state.client.pool.connection() as conn:
        found = await get_dataset(conn, dataset_id)
        record = await get_version(conn, dataset_id, number) if found else None
    if found is None or record is None:
        raise Missing(f"dataset {dataset_id!r} has no version {number}")
    return found, record


@router.get("/datasets")
async def dataset_list(request: Request, caller: Signed) -> Response:
    return await render(request, "catalog/datasets.html", caller, datasets=await datasets(caller))


@router.get("/datasets/{dataset_id}")
async def dataset_page(dataset_id: str, request: Request, caller: Signed) -> Response:
    found, records = await dataset(caller, dataset_id_of(dataset_id))
    history = await audit_entries(caller, target_type="dataset", target_id=found.id, limit=20)
    return await render(
        request,
        "catalog/dataset.html",
        caller,
        dataset=found,
        info=found.info,
        versions=records,
        history=history,
    )


@router.get("/datasets/{dataset_id}/versions/{number}")
async def version_page(dataset_id: str, number: str, request: Request, caller: Signed) -> Response:
    found, record = await version(
        caller, dataset_id_of(dataset_id), identifier(number, "version number")
    )
    job = await caller.state.client.get_job(record.job_id) if record.job_id else None
    return await render(
        request, "catalog/version.html", caller, dataset=found, record=record, job=job
    )


extension = application_extension(
    "herald.catalog", router, NavEntry("Datasets", "/datasets", order=50), ACTIONS
)
