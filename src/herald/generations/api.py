"""``/v1/generations``: runs (producers), partitions and actions (operators), the feed
(consumers), quarantine, subscriptions and backfills.

Reading needs ``read``; declaring runs ``submit``; quarantine (even redacted), actions,
subscriptions and backfills ``operate``; an override of the coordinator's rules
``admin``. Every change names a reason; the API key's name is the actor in the audit log.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import Field

from herald.api.auth import Principal, require
from herald.api.models import Reason, Strict
from herald.api.problems import Problem, responses
from herald.api.state import State
from herald.db import AsyncConn
from herald.generations import backfill, operator, outbox, quarantine, records
from herald.generations.errors import NotFound, PlanError, QuarantineFull, Refused
from herald.generations.shared import Generations, installed

router = APIRouter(prefix="/v1/generations", tags=["generations"])
Reader = Annotated[Principal, Depends(require("read"))]
Submitter = Annotated[Principal, Depends(require("submit"))]
Operator = Annotated[Principal, Depends(require("operate"))]
Name = Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9_.-]{0,99}$")]
Partition = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}$")]


@asynccontextmanager
async def _session(state: Any) -> AsyncIterator[tuple[Generations, AsyncConn]]:
    gens = installed(state.app)
    if gens is None:
        raise Problem(404, "not-found", "this application has no generations installed")
    try:
        async with state.client.pool.connection() as conn:
            yield gens, conn
    except NotFound as exc:
        raise Problem(404, "not-found", str(exc)) from None
    except Refused as exc:
        raise Problem(409, "refused", str(exc)) from None
    except (PlanError, QuarantineFull) as exc:
        raise Problem(422, "invalid-request", str(exc)) from None


class RunIn(Strict):
    dataset: Name
    purpose: Literal["scheduled", "repair"]
    definition_version: Annotated[str, Field(min_length=1, max_length=100)]
    manifest_ids: Annotated[
        list[Annotated[int, Field(ge=1)]], Field(min_length=1, max_length=10000)
    ]
    partitions: Annotated[list[Partition], Field(min_length=1, max_length=1000)]
    policy: Literal["wait", "rebase", "discard"]
    intent: Literal["publish", "dry_run"] = "publish"
    reason: Reason


class ActionBody(Strict):
    action: Literal["retry", "skip", "discard", "publish", "override"]
    candidate: Annotated[int, Field(ge=1)] | None = None
    run: Annotated[int, Field(ge=1)] | None = None
    reason: Reason


class QuarantineAction(Strict):
    reason: Reason


class BackfillIn(Strict):
    dataset: Name
    source_from: datetime
    source_to: datetime
    definition_version: Annotated[str, Field(min_length=1, max_length=100)]
    partitions: Annotated[list[Partition], Field(min_length=1, max_length=10000)]
    policy: Literal["wait", "rebase", "discard"]
    intent: Literal["publish", "dry_run"] = "publish"
    expected_cost: dict[str, Any]
    writes_per_second: Annotated[float, Field(gt=0, le=100000)]
    concurrency: Annotated[int, Field(ge=1, le=1000)]
    reason: Reason


class SubscriptionIn(Strict):
    name: Annotated[str, Field(min_length=1, max_length=100)]
    url: Annotated[str, Field(pattern=r"^https?://", max_length=2000)]
    datasets: Annotated[list[Name], Field(min_length=1, max_length=100)]
    reason: Reason


@router.post(
    "/runs",
    status_code=201,
    responses=responses(401, 403, 404, 422),
    summary="Declare a run (inputs, definition, partitions, intent, policy)",
)
async def declare_run(body: RunIn, state: State, principal: Submitter) -> dict[str, Any]:
    async with _session(state) as (gens, conn):
        run = await records.plan_run(
            gens,
            conn,
            dataset_name=body.dataset,
            purpose=body.purpose,
            definition_version=body.definition_version,
            manifest_ids=body.manifest_ids,
            partitions=body.partitions,
            policy=body.policy,
            intent=body.intent,
            requested_by=principal.name,
            reason=body.reason,
        )
        return await records.run_status(conn, run.id)


@router.get(
    "/runs/{run_id}",
    responses=responses(401, 403, 404),
    summary="A run: per partition rejected, accepted, delayed or completed, and why",
)
async def run_status(run_id: int, state: State, _: Reader) -> dict[str, Any]:
    async with _session(state) as (_gens, conn):
        return await records.run_status(conn, run_id)


@router.get(
    "/datasets/{dataset}/partitions/{partition}",
    responses=responses(401, 403, 404),
    summary="The operator's view of a partition",
)
async def partition(dataset: str, partition: str, state: State, _: Operator) -> dict[str, Any]:
    async with _session(state) as (gens, conn):
        return await operator.partition_view(gens, conn, dataset, partition)


@router.post(
    "/datasets/{dataset}/partitions/{partition}/actions",
    responses=responses(401, 403, 404, 409, 422),
    summary="Retry, skip, discard, publish or override (audited, with a reason)",
)
async def act(
    dataset: str, partition: str, body: ActionBody, state: State, principal: Operator
) -> dict[str, Any]:
    if body.action == "override" and not principal.allows("admin"):
        raise Problem(403, "forbidden", "override needs the admin scope")
    scopes = frozenset({"operate", "admin"} if principal.allows("admin") else {"operate"})
    async with _session(state) as (gens, conn):
        return await operator.act(
            gens,
            conn,
            action=body.action,
            dataset_name=dataset,
            partition=partition,
            scopes=scopes,
            actor=principal.name,
            reason=body.reason,
            candidate_id=body.candidate,
            run_id=body.run,
        )


@router.get(
    "/datasets/{dataset}/partitions/{partition}/current",
    responses=responses(401, 403, 404),
    summary="The authoritative generation: publication id, inputs, definition, bytes",
)
async def current(dataset: str, partition: str, state: State, _: Reader) -> dict[str, Any]:
    async with _session(state) as (_gens, conn):
        return await records.authoritative(conn, dataset, partition)


@router.get(
    "/feed",
    responses=responses(401, 403, 422),
    summary="Publication events after a position (at-least-once; dedupe on event_id)",
)
async def feed(
    state: State,
    _: Reader,
    after: Annotated[int, Query(ge=0)] = 0,
    dataset: str | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
) -> list[dict[str, Any]]:
    async with _session(state) as (_gens, conn):
        return [
            e.to_json() for e in await outbox.feed(conn, after=after, dataset=dataset, limit=limit)
        ]


@router.get(
    "/datasets/{dataset}/quarantine",
    responses=responses(401, 403, 404),
    summary="Quarantined input of a dataset (redacted)",
)
async def held(dataset: str, state: State, _: Operator) -> list[dict[str, Any]]:
    async with _session(state) as (_gens, conn):
        await records.dataset(conn, dataset)
        return [item.to_json() for item in await quarantine.held_items(conn, dataset, state=None)]


@router.post(
    "/quarantine/{item_id}/{action}",
    responses=responses(401, 403, 404, 409, 422),
    summary="Repair, replay or discard a quarantined item (audited)",
)
async def resolve(
    item_id: int,
    action: Literal["repair", "replay", "discard"],
    body: QuarantineAction,
    state: State,
    principal: Operator,
) -> dict[str, Any]:
    async with _session(state) as (gens, conn):
        return await quarantine.resolve(
            gens, conn, item_id, action, actor=principal.name, reason=body.reason
        )


@router.post(
    "/subscriptions",
    status_code=201,
    responses=responses(401, 403, 422),
    summary="Subscribe a webhook; its signing secret is shown once",
)
async def subscribe(body: SubscriptionIn, state: State, principal: Operator) -> dict[str, Any]:
    async with _session(state) as (_gens, conn):
        row, secret = await outbox.subscribe(
            conn,
            name=body.name,
            url=body.url,
            datasets=body.datasets,
            actor=principal.name,
            reason=body.reason,
        )
        return {**row.to_json(), "secret": secret}


@router.post(
    "/backfills",
    status_code=201,
    responses=responses(401, 403, 404, 422),
    summary="Declare a backfill (range, definition, partitions, policy, cost)",
)
async def declare_backfill(body: BackfillIn, state: State, principal: Operator) -> dict[str, Any]:
    async with _session(state) as (gens, conn):
        row = await backfill.declare(
            gens,
            conn,
            dataset_name=body.dataset,
            source_from=body.source_from,
            source_to=body.source_to,
            definition_version=body.definition_version,
            partitions=body.partitions,
            policy=body.policy,
            intent=body.intent,
            expected_cost=body.expected_cost,
            writes_per_second=body.writes_per_second,
            concurrency=body.concurrency,
            actor=principal.name,
            reason=body.reason,
        )
        return await backfill.progress(conn, row.id)


@router.get(
    "/backfills/{backfill_id}",
    responses=responses(401, 403, 404),
    summary="A backfill's declaration and progress per partition",
)
async def backfill_progress(backfill_id: int, state: State, _: Reader) -> dict[str, Any]:
    async with _session(state) as (_gens, conn):
        return await backfill.progress(conn, backfill_id)
