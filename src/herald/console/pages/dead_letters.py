"""Dead letters: a filtered list to act on in bulk, and one dead letter in full."""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.console import data
from herald.console.render import render
from herald.console.web import Signed, choice, identifier, number, query, text
from herald.ops.deadletters import CLEANUP_STATES

router = APIRouter()


@router.get("/dead-letters")
async def dead_letters(request: Request, caller: Signed) -> Response:
    params = request.query_params
    shown = {
        "kind": text(params, "kind", 200),
        "queue": text(params, "queue", 200),
        "key": text(params, "key"),
        "error": text(params, "error"),
        "cleanup_state": choice(params, "cleanup_state", CLEANUP_STATES),
    }
    found = await data.dead_letters(
        caller, **shown, before_id=number(params, "before_id"), limit=100
    )
    older = query(**shown, before_id=found[-1].id) if len(found) == 100 else None
    return await render(
        request,
        "dead_letters.html",
        caller,
        letters=found,
        shown=shown,
        cleanup_states=CLEANUP_STATES,
        older=older,
    )


@router.get("/dead-letters/{dead_letter_id}")
async def dead_letter(dead_letter_id: str, request: Request, caller: Signed) -> Response:
    found = await data.dead_letter(caller, identifier(dead_letter_id, "dead letter id"))
    return await render(
        request,
        "dead_letter.html",
        caller,
        dead=found,
        tracebacks=data.may_see_tracebacks(caller),
    )
