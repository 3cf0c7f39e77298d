"""Schedules: when each fires next, what it fired, what it folded or skipped; edit form."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.console import data
from herald.console.render import render
from herald.console.schedule_actions import rule_text
from herald.console.sessions import Caller
from herald.console.web import Missing, Signed, identifier, number, query, text
from herald.schedules.rows import Schedule

router = APIRouter()
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@router.get("/schedules")
async def schedules(request: Request, caller: Signed) -> Response:
    params = request.query_params
    shown = {"kind": text(params, "kind", 200), "key": text(params, "key")}
    paused_text = text(params, "paused", 5)
    paused = {"yes": True, "no": False}.get(paused_text or "")
    after_id = number(params, "after_id")
    found = await data.schedules(caller, **shown, paused=paused, after_id=after_id, limit=100)
    newer = query(**shown, paused=paused_text, after_id=found[-1].id) if len(found) == 100 else None
    return await render(
        request,
        "schedules.html",
        caller,
        schedules=found,
        shown=shown,
        paused=paused_text,
        more=newer,
        rule_text=rule_text,
    )


async def _schedule(caller: Caller, schedule_id: str) -> Schedule:
    found = await data.schedule(caller, identifier(schedule_id, "schedule id"))
    if found is None:
        raise Missing(f"schedule {schedule_id} does not exist")
    return found


@router.get("/schedules/{schedule_id}")
async def schedule(schedule_id: str, request: Request, caller: Signed) -> Response:
    found = await _schedule(caller, schedule_id)
    fires = await data.schedule_fires(caller, found.id)
    history = await data.audit_entries(
        caller, target_type="schedule", target_id=str(found.id), limit=20
    )
    return await render(
        request,
        "schedule.html",
        caller,
        schedule=found,
        fires=fires,
        history=history,
        rule=rule_text(found),
    )


@router.get("/schedules/{schedule_id}/edit")
async def edit(schedule_id: str, request: Request, caller: Signed) -> Response:
    caller.require("operate")
    found = await _schedule(caller, schedule_id)
    return await render(
        request,
        "schedule_edit.html",
        caller,
        schedule=found,
        weekdays=WEEKDAYS,
        kinds=sorted(k.name for k in caller.state.app.kinds()),
    )
