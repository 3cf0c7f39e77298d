"""``/v1/schedules``: create, read, change, delete, pause, resume, and the fired slots.

Changes need the ``operate`` scope and a ``reason``; the API key's name is the actor.
"""

from __future__ import annotations

from datetime import time
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response
from pydantic import Field

from herald.api.auth import Principal, require
from herald.api.jobs import check_submittable
from herald.api.models import (
    MAX_ID,
    ActionIn,
    IdPath,
    KeyQuery,
    LimitQuery,
    Name,
    NameQuery,
    ObjectKey,
    Reason,
    Strict,
)
from herald.api.problems import not_found, responses
from herald.api.state import State
from herald.ops.audit import NO_REASON
from herald.rows import to_dict
from herald.schedules import (
    ScheduleSpec,
    create_schedule,
    delete_schedule,
    get_schedule,
    list_fires,
    list_schedules,
    pause_schedule,
    resume_schedule,
    update_schedule,
)
from herald.schedules.rows import Schedule

router = APIRouter(prefix="/v1/schedules", tags=["schedules"])
Reader = Annotated[Principal, Depends(require("read"))]
Operator = Annotated[Principal, Depends(require("operate"))]

Zone = Annotated[str, Field(pattern=r"^[A-Za-z0-9_+\-/]{1,100}$")]
Cron = Annotated[str, Field(min_length=1, max_length=200, pattern=r"^[0-9A-Za-z*/,\- ?#]+$")]
Weekday = Annotated[int, Field(ge=1, le=7)]
Day = Annotated[int, Field(ge=1, le=31)]
Priority = Annotated[int, Field(ge=-32768, le=32767)]
Grace = Annotated[float, Field(ge=0, lt=1e9)]
Catchup = Annotated[int, Field(ge=1, le=1000)]
Frequency = Literal["daily", "weekly", "monthly", "cron"]
Misfire = Literal["once", "skip", "all"]


class ScheduleIn(Strict):
    kind: Name
    key: ObjectKey
    frequency: Frequency
    timezone: Zone
    at: time | None = None
    weekday: Weekday | None = None
    day: Day | None = None
    cron: Cron | None = None
    payload: dict[str, Any] = {}
    queue: Name | None = None
    priority: Priority | None = None
    misfire: Misfire = "once"
    misfire_grace: Grace = 60.0
    max_catchup: Catchup = 10
    reason: Reason | None = Field(default=None, description="why (for the audit log)")


class ScheduleChange(Strict):
    """Fields to change (kind and key name the object and stay fixed), and why."""

    reason: Reason
    frequency: Frequency | None = None
    timezone: Zone | None = None
    at: time | None = None
    weekday: Weekday | None = None
    day: Day | None = None
    cron: Cron | None = None
    payload: dict[str, Any] | None = None
    queue: Name | None = None
    priority: Priority | None = None
    misfire: Misfire | None = None
    misfire_grace: Grace | None = None
    max_catchup: Catchup | None = None


def _found(row: Schedule | None, schedule_id: int) -> dict[str, Any]:
    """The schedule as the API answers it; 404 when there is none."""
    if row is None:
        raise not_found("schedule", schedule_id)
    return row.to_json()


@router.post(
    "",
    status_code=201,
    responses=responses(401, 403, 422),
    summary="Create a schedule (first due at its first slot after now)",
)
async def create(
    body: ScheduleIn, response: Response, state: State, principal: Operator
) -> dict[str, Any]:
    """The creation is audited, with the ``reason`` given (it is optional)."""
    check_submittable(state, principal, body.kind)  # internal kinds are not scheduled here
    spec = ScheduleSpec(**body.model_dump(exclude={"reason"}))
    row = await create_schedule(
        state.client.pool,
        spec,
        app=state.app,
        actor=principal.name,
        reason=body.reason or NO_REASON,
    )
    response.headers["Location"] = f"/v1/schedules/{row.id}"
    return row.to_json()


@router.get("", responses=responses(401, 403, 422), summary="List schedules in id order")
async def index(
    state: State,
    _: Reader,
    kind: NameQuery = None,
    key: KeyQuery = None,
    paused: bool | None = None,
    after_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    limit: LimitQuery = 100,
) -> list[dict[str, Any]]:
    rows = await list_schedules(
        state.client.pool, kind=kind, key=key, paused=paused, after_id=after_id, limit=limit
    )
    return [row.to_json() for row in rows]


@router.get("/{schedule_id}", responses=responses(401, 403, 404, 422), summary="Show a schedule")
async def show(schedule_id: IdPath, state: State, _: Reader) -> dict[str, Any]:
    return _found(await get_schedule(state.client.pool, schedule_id), schedule_id)


@router.get(
    "/{schedule_id}/fires",
    responses=responses(401, 403, 404, 422),
    summary="Slots the schedule fired, latest first",
)
async def fires(
    schedule_id: IdPath, state: State, _: Reader, limit: LimitQuery = 100
) -> list[dict[str, Any]]:
    _found(await get_schedule(state.client.pool, schedule_id), schedule_id)
    return [to_dict(fire) for fire in await list_fires(state.client.pool, schedule_id, limit=limit)]


@router.patch(
    "/{schedule_id}",
    responses=responses(401, 403, 404, 422),
    summary="Change a schedule (a new rule re-times it from now)",
)
async def change(
    schedule_id: IdPath, body: ScheduleChange, state: State, principal: Operator
) -> dict[str, Any]:
    changes = body.model_dump(exclude_unset=True, exclude={"reason"})
    row = await update_schedule(
        state.client.pool,
        schedule_id,
        actor=principal.name,
        reason=body.reason,
        app=state.app,
        **changes,
    )
    return _found(row, schedule_id)


@router.delete(
    "/{schedule_id}",
    responses=responses(401, 403, 404, 422),
    summary="Delete a schedule and its fire records",
)
async def delete(
    schedule_id: IdPath, body: ActionIn, state: State, principal: Operator
) -> dict[str, Any]:
    row = await delete_schedule(
        state.client.pool, schedule_id, actor=principal.name, reason=body.reason
    )
    return _found(row, schedule_id)


@router.post(
    "/{schedule_id}/pause",
    responses=responses(401, 403, 404, 422),
    summary="Stop firing until resumed",
)
async def pause(
    schedule_id: IdPath, body: ActionIn, state: State, principal: Operator
) -> dict[str, Any]:
    row = await pause_schedule(
        state.client.pool, schedule_id, actor=principal.name, reason=body.reason
    )
    return _found(row, schedule_id)


@router.post(
    "/{schedule_id}/resume",
    responses=responses(401, 403, 404, 422),
    summary="Fire again from the next slot after now",
)
async def resume(
    schedule_id: IdPath, body: ActionIn, state: State, principal: Operator
) -> dict[str, Any]:
    row = await resume_schedule(
        state.client.pool, schedule_id, actor=principal.name, reason=body.reason
    )
    return _found(row, schedule_id)
