"""Social publishing over HTTP: users, accounts, posts, jobs, dead letters per service.

Routes (the social application's API table): ``POST /users``; ``GET/POST /accounts``;
``DELETE /accounts/{id}``; ``POST /social/posts`` (an ``Idempotency-Key`` header is
required); ``GET /jobs/{job_id}``; ``GET /dlq/{service}``;
``POST /dlq/{service}/{message_id}/replay``; ``GET /health``. Every route but
``/health`` needs an API key, like ``/v1``: ``read`` to look, ``submit`` to post,
``operate`` to link, disconnect and replay (audited, with a reason). Credentials are
accepted once and never shown again; answers name accounts by id.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, Header, Path, Query, Request, Response
from pydantic import BaseModel, Field

from herald.api.auth import Principal, require
from herald.api.disclosure import public_row
from herald.api.models import MAX_ID, TEXT, IdPath, Reason, Strict
from herald.api.problems import Problem, responses
from herald.api.state import ApiState, State
from herald.metrics import HeraldMetrics
from herald.ops import audit, deadletters
from herald.ops.crypto import CipherError
from herald.ops.errors import NotFound
from herald.registry import Herald
from herald.rows import to_dict
from herald.social import accounts, admission, records
from herald.social.runtime import SocialRuntime, social_runtime
from herald.social.tracing import traced_admission, traced_request

router = APIRouter(tags=["social"])
Reader = Annotated[Principal, Depends(require("read"))]
Submitter = Annotated[Principal, Depends(require("submit"))]
Operator = Annotated[Principal, Depends(require("operate"))]

IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        min_length=1,
        max_length=255,
        pattern=r"^[\x21-\x7e]+$",
        description="Required. The same key and body within 24 hours return the same job; "
        "the same key with another body is a 409.",
    ),
]
Text = Annotated[str, Field(min_length=1, max_length=200, pattern=TEXT)]
Name = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,100}$")]
URL = r"^https?://[^\x00\s]+$"


class UserIn(Strict):
    username: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]{1,100}$")]
    email: Annotated[str, Field(max_length=320, pattern=r"^[^@\s]+@[^@\s]+$")]
    reason: Reason | None = None


class AccountIn(Strict):
    provider: Annotated[str, Field(pattern=r"^(mastodon|bluesky|facebook|webhook)$")]
    name: Text
    page_id: Annotated[str, Field(min_length=1, max_length=500, pattern=TEXT)]
    access_token: Annotated[str, Field(min_length=1, max_length=8000, pattern=TEXT)]
    base_url: Annotated[str, Field(max_length=2000, pattern=URL)] | None = None
    credentials: dict[Name, Annotated[str, Field(max_length=8000, pattern=TEXT)]] | None = None
    options: dict[Name, Annotated[str, Field(max_length=2000, pattern=TEXT)]] | None = None
    user_id: Annotated[int, Field(ge=1, le=MAX_ID)] | None = None
    reason: Reason | None = None


class PostIn(Strict):
    """Name the account by ``account_id``, or by ``provider`` and ``page_id``."""

    account_id: Annotated[int, Field(ge=1, le=MAX_ID)] | None = None
    page_id: Annotated[str, Field(min_length=1, max_length=500, pattern=TEXT)] | None = None
    provider: Annotated[str, Field(pattern=r"^(mastodon|bluesky|facebook|webhook)$")] | None = None
    message: Annotated[str, Field(max_length=100_000, pattern=r"^[^\x00]*$")]
    media_url: Annotated[str, Field(max_length=4000, pattern=URL)] | None = None


class PostAccepted(BaseModel):
    job_id: int
    post_id: int
    outcome: str
    status_url: str


class ReasonIn(Strict):
    reason: Reason


def runtime_of(state: ApiState) -> SocialRuntime:
    try:
        return social_runtime(state.app)
    except LookupError:
        raise Problem(
            404, "not-found", "social publishing is not registered in this application"
        ) from None


def _service(service: Annotated[str, Path(pattern=r"^[a-z][a-z0-9_]{0,49}$")]) -> str:
    return service


def include_meters(herald_app: Herald, metrics: HeraldMetrics) -> None:
    """Serve the social figures of this process on ``/metrics`` (when social runs here)."""
    with contextlib.suppress(LookupError):  # social is not registered on this app
        metrics.include(social_runtime(herald_app).meters)


def status_url(job_id: int) -> str:
    return f"/jobs/{job_id}"


@router.post(
    "/users", status_code=201, responses=responses(401, 403, 409, 422), summary="Register a user"
)
async def create_user(body: UserIn, state: State, principal: Operator) -> dict[str, Any]:
    note = audit.Note(principal.name, body.reason or audit.NO_REASON)
    try:
        async with state.client.pool.connection() as conn:
            user = await accounts.create_user(conn, body.username, body.email, note=note)
        return dataclasses.asdict(user)
    except accounts.InvalidAccount as exc:
        raise Problem(422, "invalid-user", str(exc)) from None


@router.get("/accounts", responses=responses(401, 403), summary="Linked accounts")
async def list_accounts(
    state: State, _: Reader, include_revoked: bool = False
) -> list[dict[str, Any]]:
    runtime_of(state)
    async with state.client.pool.connection() as conn:
        rows = await accounts.list_accounts(conn, include_revoked=include_revoked)
    return [accounts.public_account(r) for r in rows]


@router.post(
    "/accounts",
    status_code=201,
    responses=responses(401, 403, 404, 409, 422),
    summary="Link an account (its credentials are stored encrypted, never shown again)",
)
async def link_account(body: AccountIn, state: State, principal: Operator) -> dict[str, Any]:
    runtime = runtime_of(state)
    request = accounts.LinkRequest(
        provider=body.provider,
        name=body.name,
        page_id=body.page_id,
        access_token=body.access_token,
        base_url=body.base_url,
        credentials=body.credentials,
        options=body.options,
        user_id=body.user_id,
    )
    note = audit.Note(principal.name, body.reason or audit.NO_REASON)
    try:
        cipher = runtime.cipher
    except CipherError as exc:  # the deployment's keys, not the caller's request
        raise Problem(503, "not-configured", str(exc)) from None
    try:
        async with state.client.pool.connection() as conn:
            row = await accounts.link_account(conn, cipher, principal.name, request, note=note)
    except (accounts.InvalidAccount, ValueError) as exc:
        raise Problem(422, "invalid-account", str(exc)) from None
    return accounts.public_account(row)


@router.delete(
    "/accounts/{account_id}",
    status_code=202,
    responses=responses(401, 403, 404, 409, 422),
    summary="Disconnect an account: revoke at the platform (a job), fail its queued posts",
)
async def disconnect_account(
    account_id: IdPath,
    state: State,
    principal: Operator,
    response: Response,
    reason: Annotated[str | None, Query(min_length=1, max_length=2000, pattern=TEXT)] = None,
    body: Annotated[ReasonIn | None, Body()] = None,
) -> dict[str, Any]:
    runtime_of(state)
    why = body.reason if body is not None else reason
    if why is None:
        raise Problem(422, "reason-required", "say why: a reason in the body or the query")
    done = await admission.request_disconnect(
        state.client, account_id, actor=principal.name, reason=why
    )
    response.headers["Location"] = status_url(done.job_id)
    return {
        "account_id": account_id,
        "status": "revoking",
        "job_id": done.job_id,
        "status_url": status_url(done.job_id),
        "failed_posts": done.failed_posts,
    }


@router.post(
    "/social/posts",
    status_code=202,
    response_model=PostAccepted,
    responses=responses(400, 401, 403, 404, 409, 422),
    summary="Publish a post (asynchronously): 202 with the job and its status URL",
)
async def submit_post(
    body: PostIn,
    request: Request,
    state: State,
    principal: Submitter,
    response: Response,
    idempotency_key: IdempotencyKey = None,
) -> PostAccepted:
    runtime = runtime_of(state)
    if idempotency_key is None:
        raise Problem(400, "idempotency-key-required", "this route needs an Idempotency-Key header")
    account_id = body.account_id
    if account_id is None:
        if body.provider is None or body.page_id is None:
            raise Problem(422, "account-required", "name account_id, or provider and page_id")
        async with state.client.pool.connection() as conn:
            account_id = await accounts.find_account(conn, body.provider, body.page_id)
    with (
        traced_request(request.headers, "POST /social/posts"),
        traced_admission(idempotency_key) as trace,
    ):
        admitted = await admission.submit_post(
            state.client,
            principal.name,
            account_id,
            body.message,
            body.media_url,
            idempotency_key=idempotency_key,
            request_body=body.model_dump(),
            trace=trace,
        )
    if admitted.provider is not None:
        runtime.meters.post(admitted.provider, "accepted")
    url = status_url(admitted.job_id)
    response.headers["Location"] = url
    return PostAccepted(
        job_id=admitted.job_id,
        post_id=admitted.post_id,
        outcome="created" if admitted.created else "replay",
        status_url=url,
    )


@router.get(
    "/jobs/{job_id}",
    responses=responses(401, 403, 404, 422),
    summary="A job's status, current step and, once published, the platform's post",
)
async def show_job(job_id: IdPath, state: State, _: Reader) -> dict[str, Any]:
    job = await state.client.get_job(job_id)
    if job is None:
        raise NotFound("job", job_id)
    row = to_dict(job)
    shown = public_row(row, values=("payload", "checkpoint", "result"))
    answer: dict[str, Any] = {
        k: shown[k]
        for k in (
            "id",
            "kind",
            "state",
            "step",
            "attempt",
            "max_attempts",
            "snoozes",
            "rescues",
            "run_at",
            "created_at",
            "finished_at",
            "result",
            "errors",
            "replay_of",
        )
    }
    if job.kind.startswith(f"{admission.SERVICE}."):
        async with state.client.pool.connection() as conn:
            post = await records.post_of_job(conn, row)
        if post is not None:
            answer["post"] = public_row(post)
    return answer


@router.get(
    "/dlq/{service}",
    responses=responses(401, 403, 422),
    summary="Dead letters of one service (its kinds are named <service>.*)",
)
async def list_dead(
    service: Annotated[str, Depends(_service)],
    state: State,
    _: Reader,
    before_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
) -> list[dict[str, Any]]:
    async with state.client.pool.connection() as conn:
        rows = await records.dead_letters(conn, service, before_id, limit)
    return [public_row(r, values=("payload",)) for r in rows]


@router.post(
    "/dlq/{service}/{message_id}/replay",
    status_code=202,
    responses=responses(401, 403, 404, 409, 422),
    summary="Replay a dead letter of the service as a new job (once; audited)",
)
async def replay_dead(
    service: Annotated[str, Depends(_service)],
    message_id: IdPath,
    body: ReasonIn,
    state: State,
    principal: Operator,
    response: Response,
) -> dict[str, Any]:
    async with state.client.pool.connection() as conn:
        dead = await records.dead_letter_kind(conn, message_id)
    if dead is None or not str(dead["kind"]).startswith(f"{service}."):
        raise NotFound(f"{service} dead letter", message_id)
    replayed = await deadletters.replay(
        state.client, message_id, actor=principal.name, reason=body.reason
    )
    url = status_url(replayed.job_id)
    response.headers["Location"] = url
    if not replayed.created:
        response.status_code = 200
    return {
        "message_id": message_id,
        "original_job_id": replayed.original_job_id,
        "job_id": replayed.job_id,
        "outcome": "created" if replayed.created else "replay",
        "status_url": url,
    }
