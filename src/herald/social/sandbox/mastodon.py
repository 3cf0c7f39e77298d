"""The sandbox's Mastodon: the REST endpoints the adapter calls, with Mastodon's answers.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): stands in
for a Mastodon instance in tests, the demo and benchmarks.

Honours ``Idempotency-Key`` as Mastodon does: within the key's lifetime (an hour) a
repeated key returns the status it first created, with 200, and creates nothing.
"""

from __future__ import annotations

import hashlib
import html
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.social import wire
from herald.social.adapters.base import count_graphemes
from herald.social.sandbox.common import bearer, charge, fail, guarded, read_form, reply
from herald.social.sandbox.state import (
    MediaRecord,
    SandboxAccount,
    SandboxState,
)

P = "mastodon"
MAX_CHARACTERS = 500
MEDIA_TYPES = {"image/jpeg", "image/png", "image/gif", "image/webp", "video/mp4", "video/quicktime"}


def routes(state: SandboxState) -> list[Route]:
    def auth(request: Request, *buckets: str) -> tuple[SandboxAccount, dict[str, str]]:
        value = bearer(request)
        owner = None if value is None else state.owner(P, value)[0]
        account = None if owner is None else state.account(P, owner)
        if account is None:
            state.admit(P, "-")
            raise fail(P, 401, "The access token is invalid")
        return account, charge(state, P, account.id, *buckets)

    def base(request: Request) -> str:
        return str(request.base_url).rstrip("/")

    def account_json(request: Request, account: SandboxAccount) -> dict[str, Any]:
        return {
            "id": account.id,
            "username": account.name,
            "acct": account.name,
            "display_name": account.name,
            "url": f"{base(request)}/@{account.name}",
            "bot": True,
        }

    def media_json(request: Request, media: MediaRecord) -> dict[str, Any]:
        ready = media.ready_at <= state.clock()
        kind = "video" if media.content_type.startswith("video/") else "image"
        url = f"{base(request)}/system/media_attachments/{media.media_id}"
        return {
            "id": media.media_id,
            "type": kind,
            "url": url if ready else None,
            "preview_url": f"{url}/small",
            "remote_url": None,
            "meta": {},
            "description": None,
            "blurhash": None,
        }

    async def verify_credentials(request: Request) -> Response:
        account, headers = auth(request)
        return reply(
            {**account_json(request, account), "source": {"privacy": "public"}}, 200, headers
        )

    async def upload_media(request: Request) -> Response:
        account, headers = auth(request, "requests", "media")
        form = await read_form(request)
        upload = form.files.get("file")
        if upload is None:
            raise fail(P, 422, "Validation failed: File can't be blank", headers)
        data, content_type = upload.data, upload.content_type
        if content_type not in MEDIA_TYPES or not data:
            raise fail(
                P, 422, "Validation failed: File content type is invalid, File is invalid", headers
            )
        now = state.clock()
        media = MediaRecord(
            platform=P,
            account_id=account.id,
            media_id=state.next_id(),
            content_type=content_type,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            created_at=now,
            ready_at=now + state.config.media_processing,
        )
        with state.lock:
            state.media[(P, media.media_id)] = media
        body = media_json(request, media)
        body["description"] = form.get("description")
        return reply(body, 200 if body["url"] else 202, headers)

    async def get_media(request: Request) -> Response:
        account, headers = auth(request)
        media = state.media.get((P, request.path_params["id"]))
        if media is None or media.account_id != account.id:
            raise fail(P, 404, "Record not found", headers)
        body = media_json(request, media)
        return reply(body, 200 if body["url"] else 206, headers)

    async def post_status(request: Request) -> Response:
        account, headers = auth(request)
        params = await _params(request)
        text = str(params.get("status") or "")
        media_ids = [str(m) for m in params.get("media_ids") or []]
        key = request.headers.get("idempotency-key")
        with state.lock:
            if key:
                existing = state.remembered(P, account.id, key)
                if existing is not None:
                    post = state.find_post(P, existing)
                    assert post is not None
                    return reply(post.extra["json"], 200, headers)
            attached = _check(state, account, text, media_ids, headers)
            status_id = state.next_id()
            now = state.clock()
            status = {
                "id": status_id,
                "created_at": wire.iso_ms(now),
                "content": "<p>" + html.escape(text).replace("\n", "<br />") + "</p>",
                "visibility": str(params.get("visibility") or "public"),
                "language": params.get("language"),
                "uri": f"{base(request)}/users/{account.name}/statuses/{status_id}",
                "url": f"{base(request)}/@{account.name}/{status_id}",
                "account": account_json(request, account),
                "media_attachments": [media_json(request, m) for m in attached],
            }
            for media in attached:
                media.attached_to = status_id
            state.add_post(
                P,
                account.id,
                status_id,
                text,
                [m.sha256 for m in attached],
                key=key,
                key_ttl=state.config.idempotency_ttl if key else None,
                json=status,
            )
        return reply(status, 200, headers)

    async def account_statuses(request: Request) -> Response:
        _, headers = auth(request)
        try:
            limit = max(1, min(40, int(request.query_params.get("limit", "20"))))
        except ValueError:
            raise fail(P, 400, "limit must be a number", headers) from None
        posts = state.posts_of(P, request.path_params["id"])
        newest = sorted(posts, key=lambda p: int(p.post_id), reverse=True)[:limit]
        return reply([p.extra["json"] for p in newest], 200, headers)

    async def revoke(request: Request) -> Response:
        form = await read_form(request)
        client_id, client_secret, value = (
            str(form.get(k) or "") for k in ("client_id", "client_secret", "token")
        )
        state.admit(P, "-")
        with state.lock:
            app = next(
                (
                    a
                    for (p, _), a in state.accounts.items()
                    if p == P and a.credentials.get("client_id") == client_id
                ),
                None,
            )
        if app is None or app.credentials.get("client_secret") != client_secret:
            body = {
                "error": "unauthorized_client",
                "error_description": "You are not authorized to revoke this token",
            }
            return reply(body, 403)
        owner, _ = state.owner(P, value)
        if owner == app.id:
            state.revoke(P, value)
        return reply({}, 200)

    return [
        Route("/api/v1/accounts/verify_credentials", guarded(state, verify_credentials)),
        Route("/api/v2/media", guarded(state, upload_media), methods=["POST"]),
        Route("/api/v1/media/{id}", guarded(state, get_media)),
        Route("/api/v1/statuses", guarded(state, post_status), methods=["POST"]),
        Route("/api/v1/accounts/{id}/statuses", guarded(state, account_statuses)),
        Route("/oauth/revoke", guarded(state, revoke), methods=["POST"]),
    ]


async def _params(request: Request) -> dict[str, Any]:
    """Status parameters from a form or JSON body (``media_ids[]`` or ``media_ids``)."""
    if request.headers.get("content-type", "").startswith("application/json"):
        value = await request.json()
        return value if isinstance(value, dict) else {}
    form = await read_form(request)
    params: dict[str, Any] = {k: v[-1] for k, v in form.fields.items()}
    params["media_ids"] = form.getlist("media_ids[]")
    return params


def _check(
    state: SandboxState,
    account: SandboxAccount,
    text: str,
    media_ids: list[str],
    headers: dict[str, str],
) -> list[MediaRecord]:
    if not text.strip() and not media_ids:
        raise fail(P, 422, "Validation failed: Text can't be blank", headers)
    if count_graphemes(text) > MAX_CHARACTERS:
        raise fail(
            P, 422, f"Validation failed: Text character limit of {MAX_CHARACTERS} exceeded", headers
        )
    if len(media_ids) > 4:
        raise fail(P, 422, "Validation failed: You can't attach more than 4 files", headers)
    attached = []
    for media_id in media_ids:
        media = state.media.get((P, media_id))
        if media is None or media.account_id != account.id or media.attached_to is not None:
            raise fail(
                P, 422, f"Validation failed: media {media_id} not found or already used", headers
            )
        if media.ready_at > state.clock():
            raise fail(
                P,
                422,
                "Cannot attach files that have not finished processing. Try again in a moment!",
                headers,
            )
        attached.append(media)
    return attached
