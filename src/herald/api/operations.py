"""Operator surface: queues, dead letters, audit log, and the manual actions (cancel,
retry-now, replay, discard). Every manual action needs an API key with the
``operate`` scope (its name is the actor) and a ``reason`` in the body."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from herald.api.auth import Principal, require
from herald.api.models import KeyQuery, LimitQuery, NameQuery, QueueOut
from herald.api.problems import responses
from herald.api.state import State

router = APIRouter(prefix="/v1")
Reader = Annotated[Principal, Depends(require("read"))]
Operator = Annotated[Principal, Depends(require("operate"))]


@router.get(
    "/queues",
    tags=["queues"],
    response_model=list[QueueOut],
    responses=responses(401, 403),
    summary="Depth, scheduled, running and oldest waiting age of each queue",
)
async def queues(state: State, _: Reader) -> list[dict[str, Any]]:
    return await state.client.queue_stats()


@router.get(
    "/dead-letters",
    tags=["dead letters"],
    responses=responses(401, 403, 422),
    summary="List dead-lettered jobs",
)
async def list_dead_letters(
    state: State,
    _: Reader,
    kind: NameQuery = None,
    queue: NameQuery = None,
    key: KeyQuery = None,
    limit: LimitQuery = 50,
) -> list[dict[str, Any]]:
    return await state.client.list_dead(kind=kind, queue=queue, key=key, limit=limit)
