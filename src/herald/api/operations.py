"""Operator surface: queues, dead letters, audit log, and the manual actions (cancel,
retry-now, replay, discard). Every manual action needs an API key with the
``operate`` scope (its name is the actor) and a ``reason`` in the body; each writes an
audit record in the action's own transaction (see :mod:`herald.ops`)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Response

from herald.api.auth import Principal, require
from herald.api.disclosure import public_row
from herald.api.jobs import status_url
from herald.api.models import (
    MAX_ID,
    TEXT,
    ActionIn,
    IdPath,
    KeyQuery,
    LimitQuery,
    NameQuery,
    QueueOut,
)
from herald.api.problems import responses
from herald.api.state import State
from herald.ops import audit, deadletters
from herald.ops import jobs as job_actions
from herald.rows import to_dict

router = APIRouter(prefix="/v1")
Reader = Annotated[Principal, Depends(require("read"))]
Operator = Annotated[Principal, Depends(require("operate"))]
BeforeId = Annotated[int | None, Query(ge=1, le=MAX_ID, description="page: last id seen")]
TextQuery = Annotated[str | None, Query(min_length=1, max_length=1000, pattern=TEXT)]
ACTION = responses(401, 403, 404, 409, 422)


class DiscardIn(ActionIn):
    force: bool = False  # discard even though its cleanup is still pending


@router.get(
    "/queues",
    tags=["queues"],
    response_model=list[QueueOut],
    responses=responses(401, 403),
    summary="Depth, scheduled, running and oldest waiting age of each queue",
)
async def queues(state: State, _: Reader) -> list[dict[str, Any]]:
    return [to_dict(stats) for stats in await state.client.queue_stats()]


@router.post(
    "/jobs/{job_id}/cancel",
    tags=["jobs"],
    responses=ACTION,
    summary="Cancel a waiting or running job",
)
async def cancel_job(
    job_id: IdPath, body: ActionIn, state: State, principal: Operator
) -> dict[str, Any]:
    cancelled = await job_actions.cancel(
        state.client.pool, job_id, actor=principal.name, reason=body.reason
    )
    return to_dict(cancelled)


@router.post(
    "/jobs/{job_id}/retry",
    tags=["jobs"],
    responses=ACTION,
    summary="Make a waiting job (scheduled, backing off, snoozed) due now",
)
async def retry_job(
    job_id: IdPath, body: ActionIn, state: State, principal: Operator
) -> dict[str, Any]:
    channel = state.settings.channel if state.settings.notify else None
    moved = await job_actions.retry_now(
        state.client.pool, job_id, actor=principal.name, reason=body.reason, channel=channel
    )
    return to_dict(moved)


@router.get(
    "/dead-letters",
    tags=["dead letters"],
    responses=responses(401, 403, 422),
    summary="List dead letters, newest first",
)
async def list_dead_letters(
    state: State,
    _: Reader,
    kind: NameQuery = None,
    queue: NameQuery = None,
    key: KeyQuery = None,
    error: Annotated[TextQuery, Query(description="fragment of an error message")] = None,
    cleanup_state: Literal["pending", "done", "not_needed"] | None = None,
    before_id: BeforeId = None,
    limit: LimitQuery = 50,
) -> list[dict[str, Any]]:
    rows = await deadletters.list_dead(
        state.client.pool,
        kind=kind,
        queue=queue,
        key=key,
        error=error,
        cleanup_state=cleanup_state,
        before_id=before_id,
        limit=limit,
    )
    return [public_row(to_dict(row)) for row in rows]


@router.get(
    "/dead-letters/{dead_letter_id}",
    tags=["dead letters"],
    responses=responses(401, 403, 404, 422),
    summary="One dead letter in full: payload, errors, cleanup state, replays",
)
async def show_dead_letter(dead_letter_id: IdPath, state: State, _: Reader) -> dict[str, Any]:
    row = await deadletters.get(state.client.pool, dead_letter_id)
    return public_row(to_dict(row), values=("payload", "cleanup"))


@router.post(
    "/dead-letters/{dead_letter_id}/replay",
    tags=["dead letters"],
    status_code=202,
    responses=ACTION,
    summary="Enqueue the dead job again with a fresh attempt budget (once)",
)
async def replay_dead_letter(
    dead_letter_id: IdPath, body: ActionIn, response: Response, state: State, principal: Operator
) -> dict[str, Any]:
    """202 with the new job. A dead letter is replayed once: asking again answers 200
    with the job of its first replay (``outcome: replay``) and creates nothing."""
    replayed = await deadletters.replay(
        state.client, dead_letter_id, actor=principal.name, reason=body.reason
    )
    url = status_url(replayed.job_id)
    response.headers["Location"] = url
    if not replayed.created:
        response.status_code = 200
    return {
        "dead_letter_id": replayed.dead_letter_id,
        "original_job_id": replayed.original_job_id,
        "id": replayed.job_id,
        "version": replayed.version,
        "outcome": "created" if replayed.created else "replay",
        "status_url": url,
    }


@router.post(
    "/dead-letters/{dead_letter_id}/discard",
    tags=["dead letters"],
    responses=ACTION,
    summary="Remove a dead letter (409 while its cleanup is pending, unless forced)",
)
async def discard_dead_letter(
    dead_letter_id: IdPath, body: DiscardIn, state: State, principal: Operator
) -> dict[str, Any]:
    removed = await deadletters.discard(
        state.client.pool,
        dead_letter_id,
        actor=principal.name,
        reason=body.reason,
        force=body.force,
    )
    return to_dict(removed)


@router.get(
    "/audit",
    tags=["audit"],
    responses=responses(401, 403, 422),
    summary="Audit log of manual actions, newest first",
)
async def audit_log(
    state: State,
    _: Reader,
    target_type: NameQuery = None,
    target_id: TextQuery = None,
    actor: TextQuery = None,
    action: NameQuery = None,
    before_id: BeforeId = None,
    limit: LimitQuery = 50,
) -> list[dict[str, Any]]:
    entries = await audit.entries(
        state.client.pool,
        target_type=target_type,
        target_id=target_id,
        actor=actor,
        action=action,
        before_id=before_id,
        limit=limit,
    )
    return [to_dict(entry) for entry in entries]
