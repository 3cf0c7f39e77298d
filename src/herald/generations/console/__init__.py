"""Datasets published as generations in the operator console.

Pages: the datasets; a dataset's partitions (current generation, what is pending or
held), backfills and quarantine; a partition as its operator sees it (the pointer, its
publication history, every candidate with the coordinator's reason for choosing it or
not, tasks with their lease and fence, failures, quarantined input, late sources,
orphaned attempt output, consumers and their deliveries, backfills, the safe actions
and the manual actions taken); a generation's lineage (inputs, definition, run,
candidate, what it replaced and what replaced it); an input and the generations that
used it; a run; a backfill's progress.

The console does not import this package: the ``herald.console`` entry point of Herald's
distribution names :data:`extension`, enabled where the generations application is
installed on the served Herald application.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.console import Caller, Invalid, NavEntry, Signed, application_extension, render
from herald.console.web import identifier
from herald.generations.console import reads
from herald.generations.console.actions import ACTIONS, DATASET, NO_PARTITION, PARTITION
from herald.generations.shared import installed
from herald.registry import Herald

router = APIRouter()


def _dataset(name: str) -> str:
    if not DATASET.match(name):
        raise Invalid(f"{name[:40]!r} is not a dataset name")
    return name


def _partition(name: str) -> str:
    if not PARTITION.match(name):
        raise Invalid(f"{name[:40]!r} is not a partition name")
    return name


async def _page(request: Request, template: str, caller: Caller, **values: Any) -> Response:
    """A generations page, with what every one of its templates uses: the badge tones
    and the mark of a quarantined item without a partition."""
    return await render(
        request, f"generations/{template}", caller,
        tones=reads.TONES, no_partition=NO_PARTITION, **values,
    )  # fmt: skip


@router.get("/generations")
async def datasets(request: Request, caller: Signed) -> Response:
    found = await reads.datasets(caller)
    return await _page(request, "datasets.html", caller, datasets=found)


@router.get("/generations/runs/{run_id}")
async def run(run_id: str, request: Request, caller: Signed) -> Response:
    found = await reads.run(caller, identifier(run_id, "run id"))
    return await _page(request, "run.html", caller, **found)


@router.get("/generations/backfills/{backfill_id}")
async def backfill(backfill_id: str, request: Request, caller: Signed) -> Response:
    found = await reads.backfill_progress(caller, identifier(backfill_id, "backfill id"))
    return await _page(request, "backfill.html", caller, backfill=found)


@router.get("/generations/inputs/{manifest_id}")
async def manifest(manifest_id: str, request: Request, caller: Signed) -> Response:
    found = await reads.manifest(caller, identifier(manifest_id, "input id"))
    return await _page(request, "input.html", caller, **found)


@router.get("/generations/{name}")
async def dataset(name: str, request: Request, caller: Signed) -> Response:
    found = await reads.dataset(caller, _dataset(name))
    return await _page(request, "dataset.html", caller, **found)


@router.get("/generations/{name}/partitions/{part}")
async def partition(name: str, part: str, request: Request, caller: Signed) -> Response:
    # The operator's view of a partition (tasks and their errors, quarantined input,
    # orphaned output): for operate keys, as the API's partition view is.
    caller.require("operate")
    view = await reads.partition(caller, _dataset(name), _partition(part))
    return await _page(request, "partition.html", caller, view=view)


@router.get("/generations/{name}/partitions/{part}/generations/{number}")
async def generation(
    name: str, part: str, number: str, request: Request, caller: Signed
) -> Response:
    found = await reads.lineage(
        caller, _dataset(name), _partition(part), identifier(number, "generation")
    )
    return await _page(request, "generation.html", caller, **found)


def _enabled(app: Herald) -> bool:
    return installed(app) is not None


extension = application_extension(
    "herald.generations",
    router,
    NavEntry("Generations", "/generations", order=55),
    ACTIONS,
    enabled=_enabled,
)
