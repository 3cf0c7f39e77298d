"""Social publishing in the operator console: linked accounts (never their credentials)
and their posts, one post in full, and disconnecting an account.

The console does not import this package: the ``herald.console`` entry point of Herald's
distribution names :data:`extension`.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.console import Caller, Missing, NavEntry, Signed, application_extension, render
from herald.console.data import audit_entries
from herald.console.web import choice, identifier, number, query
from herald.rows import fetch_all, fetch_one
from herald.social.accounts import LinkedAccount, list_accounts
from herald.social.console.actions import ACTIONS

router = APIRouter()
POST_STATES = ("queued", "publishing", "published", "failed")


@dataclass(frozen=True)
class ListedPost:
    """A post as the console lists it, with its account (``social_post_list``)."""

    id: int
    owner: str
    account_id: int
    provider: str
    account_name: str
    message: str
    media_url: str | None
    job_id: int | None
    state: str  # one of POST_STATES
    step: str | None
    platform_url: str | None
    error: str | None
    created_at: dt.datetime
    published_at: dt.datetime | None


@dataclass(frozen=True)
class PostDetail:
    """One post in full with its account's provider (``social_post_get``)."""

    id: int
    owner: str
    account_id: int
    provider: str
    message: str
    media_url: str | None
    idempotency_key: str
    job_id: int | None
    state: str  # one of POST_STATES
    step: str | None
    media: Any  # what the media step uploaded (JSON), if it ran
    publish_started_at: dt.datetime | None
    platform_post_id: str | None
    platform_url: str | None
    error: str | None
    created_at: dt.datetime
    updated_at: dt.datetime
    published_at: dt.datetime | None


async def posts(caller: Caller, **filters: Any) -> list[ListedPost]:
    params = {"account_id": None, "state": None, "before_id": None, "limit": 50, **filters}
    async with caller.state.client.pool.connection() as conn:
        return await fetch_all(conn, "social_post_list", params, ListedPost)


async def accounts(caller: Caller) -> list[LinkedAccount]:
    """Every linked account, revoked ones too (never their credentials)."""
    async with caller.state.client.pool.connection() as conn:
        return await list_accounts(conn, include_revoked=True)


@router.get("/social")
async def social(request: Request, caller: Signed) -> Response:
    params = request.query_params
    shown = {
        "account_id": number(params, "account"),
        "state": choice(params, "state", POST_STATES),
    }
    found = await posts(caller, **shown, before_id=number(params, "before_id"))
    older = (
        query(account=shown["account_id"], state=shown["state"], before_id=found[-1].id)
        if len(found) == 50
        else None
    )
    return await render(
        request,
        "social/social.html",
        caller,
        accounts=await accounts(caller),
        posts=found,
        shown=shown,
        states=POST_STATES,
        older=older,
    )


@router.get("/social/posts/{post_id}")
async def post(post_id: str, request: Request, caller: Signed) -> Response:
    chosen = identifier(post_id, "post id")
    async with caller.state.client.pool.connection() as conn:
        params = {"id": chosen, "job_id": None}
        found = await fetch_one(conn, "social_post_get", params, PostDetail)
    if found is None:
        raise Missing(f"social post {post_id} does not exist")
    job = await caller.state.client.get_job(found.job_id) if found.job_id else None
    return await render(request, "social/post.html", caller, post=found, job=job)


@router.get("/social/accounts/{account_id}")
async def account(account_id: str, request: Request, caller: Signed) -> Response:
    chosen = identifier(account_id, "account id")
    found = [a for a in await accounts(caller) if a.id == chosen]
    if not found:
        raise Missing(f"social account {account_id} does not exist")
    history = await audit_entries(
        caller, target_type="social_account", target_id=str(chosen), limit=20
    )
    return await render(
        request,
        "social/account.html",
        caller,
        account=found[0],
        posts=await posts(caller, account_id=chosen, limit=20),
        history=history,
    )


extension = application_extension(
    "herald.social", router, NavEntry("Social", "/social", order=70), ACTIONS
)
