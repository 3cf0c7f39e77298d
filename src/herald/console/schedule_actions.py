"""Pausing, resuming and editing schedules from the console.

The edit form sends every field of the rule; :func:`changes` reads them into the
values :func:`herald.schedules.update_schedule` takes (fields the chosen frequency does
not use are dropped, an empty field means "none"), and the review shows each field
that changes, before and after, after the engine's own validation.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import time
from typing import Any

from herald.console.registry import Action, PerformFn, Review, Skip, per_target
from herald.console.render import when
from herald.console.sessions import Caller
from herald.console.web import Invalid, Missing, identifier
from herald.schedules import (
    get_schedule,
    pause_schedule,
    resume_schedule,
    update_schedule,
)
from herald.schedules.rows import Schedule
from herald.schedules.store import spec_of

FIELDS = (
    "frequency", "timezone", "at", "weekday", "day", "cron", "payload", "queue", "priority",
    "misfire", "misfire_grace", "max_catchup",
)  # fmt: skip
_USES = {
    "daily": {"at"},
    "weekly": {"at", "weekday"},
    "monthly": {"at", "day"},
    "cron": {"cron"},
}


def rule_text(row: Schedule) -> str:
    """A schedule's rule in words: ``daily at 03:00 (UTC)``."""
    zone = row.timezone
    at = row.at_time.strftime("%H:%M") if row.at_time is not None else ""
    days = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
    match row.frequency:
        case "daily":
            return f"daily at {at} ({zone})"
        case "weekly" if row.weekday is not None:
            return f"every {days[row.weekday - 1]} at {at} ({zone})"
        case "monthly":
            return f"monthly on day {row.day_of_month} at {at} ({zone})"
        case _:
            return f"cron {row.cron} ({zone})"


def _int(params: Mapping[str, str], name: str) -> int | None:
    value = params.get(name, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise Invalid(f"{name} must be a whole number, got {value[:40]!r}") from None


def changes(params: Mapping[str, str]) -> dict[str, Any]:
    """The edit form's fields as ``update_schedule`` keywords (every field, normalised)."""
    frequency = params.get("frequency", "").strip()
    if frequency not in _USES:
        raise Invalid(f"frequency must be one of {', '.join(_USES)}")
    uses = _USES[frequency]
    at_text = params.get("at", "").strip() if "at" in uses else ""
    try:
        at = time.fromisoformat(at_text) if at_text else None
    except ValueError:
        raise Invalid(f"at must be a time of day such as 03:00, got {at_text[:20]!r}") from None
    payload_text = params.get("payload", "").strip() or "{}"
    try:
        payload = json.loads(payload_text)
    except json.JSONDecodeError as exc:
        raise Invalid(f"payload is not valid JSON: {exc}") from None
    grace_text = params.get("misfire_grace", "").strip() or "60"
    try:
        grace = float(grace_text)
    except ValueError:
        raise Invalid(
            f"misfire grace must be a number of seconds, got {grace_text[:20]!r}"
        ) from None
    return {
        "frequency": frequency,
        "timezone": params.get("timezone", "").strip(),
        "at": at,
        "weekday": _int(params, "weekday") if "weekday" in uses else None,
        "day": _int(params, "day") if "day" in uses else None,
        "cron": (params.get("cron", "").strip() or None) if "cron" in uses else None,
        "payload": payload,
        "queue": params.get("queue", "").strip() or None,
        "priority": _int(params, "priority"),
        "misfire": params.get("misfire", "once").strip(),
        "misfire_grace": grace,
        "max_catchup": _int(params, "max_catchup") or 10,
    }


def _show(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, time):
        return value.strftime("%H:%M:%S")
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


async def _one(caller: Caller, target: str) -> Schedule | None:
    return await get_schedule(caller.state.client.pool, identifier(target, "schedule id"))


async def _review_update(
    caller: Caller, targets: Sequence[str], params: Mapping[str, str]
) -> Review:
    if len(targets) != 1:
        raise Invalid("a schedule is edited one at a time")
    row = await _one(caller, targets[0])
    if row is None:
        return Review(f"Edit schedule {targets[0]}", [], [f"schedule {targets[0]} does not exist"])
    wanted = changes(params)
    old = spec_of(row)
    new = replace(old, **wanted)
    title = f"Edit schedule {row.id} ({row.kind}/{row.key})"
    try:
        rule, _payload = new.validate(caller.state.app)
    except ValueError as exc:  # ScheduleError, UnknownKind
        return Review(title, [], [f"this edit cannot be saved: {exc}"], params=dict(params))
    details = [
        (name, _show(getattr(old, name)), _show(getattr(new, name)))
        for name in FIELDS
        if getattr(old, name) != getattr(new, name)
    ]
    if not details:
        return Review(title, [], ["nothing would change"], params=dict(params))
    effect = "Save the fields below."
    if rule != old.recurrence:
        effect += (
            " The rule changes, so the schedule is re-timed: next due at its first slot after now."
        )
    else:
        effect += f" Its next due time stays {when(row.next_due_at)}."
    return Review(title, [effect], params=dict(params), details=details)


async def _update(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> str:
    schedule_id = identifier(target, "schedule id")
    row = await update_schedule(
        caller.state.client.pool,
        schedule_id,
        actor=caller.name,
        reason=reason,
        app=caller.state.app,
        **changes(params),
    )
    if row is None:
        raise Missing(f"schedule {schedule_id} does not exist")
    return f"schedule {schedule_id} saved; next due {when(row.next_due_at)}"


def _pause_verdict(caller: Caller, row: Schedule) -> str | Skip:
    if row.paused:
        return Skip(f"schedule {row.id} is paused already")
    return (
        f"Pause schedule {row.id} ({row.kind}/{row.key}, {rule_text(row)}): it "
        f"will not fire until resumed (it was next due {when(row.next_due_at)})."
    )


def _resume_verdict(caller: Caller, row: Schedule) -> str | Skip:
    if not row.paused:
        return Skip(f"schedule {row.id} is not paused")
    return (
        f"Resume schedule {row.id} ({row.kind}/{row.key}, {rule_text(row)}): "
        "it fires again from its next slot after now; slots missed while it was "
        "paused are not fired."
    )


def _set_paused(paused: bool) -> PerformFn:
    change = pause_schedule if paused else resume_schedule

    async def perform(caller: Caller, target: str, reason: str, params: Mapping[str, str]) -> str:
        schedule_id = identifier(target, "schedule id")
        row = await change(caller.state.client.pool, schedule_id, actor=caller.name, reason=reason)
        if row is None:
            raise Missing(f"schedule {schedule_id} does not exist")
        if paused:
            return f"schedule {schedule_id} paused"
        return f"schedule {schedule_id} resumed; next due {when(row.next_due_at)}"

    return perform


def _back(targets: Sequence[str]) -> str:
    return f"/schedules/{targets[0]}" if len(targets) == 1 else "/schedules"


ACTIONS = (
    Action(
        "schedule.pause",
        "Pause",
        "operate",
        per_target("Pause {}", "schedule", _one, _pause_verdict),
        _set_paused(True),
        back=_back,
    ),
    Action(
        "schedule.resume",
        "Resume",
        "operate",
        per_target("Resume {}", "schedule", _one, _resume_verdict),
        _set_paused(False),
        back=_back,
    ),
    Action(
        "schedule.update", "Save", "operate", _review_update, _update, back=_back, max_targets=1
    ),
)
