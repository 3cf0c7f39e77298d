"""The sandbox's Graph API for Pages: the calls the adapter makes, with Graph's answers.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): stands in
for ``graph.facebook.com`` in tests, the demo and benchmarks.

Like Graph: errors are HTTP 400 with ``{"error": {message, type, code, ...}}`` even for
an invalid token (code 190, echoing a malformed token in the message as Graph does) and
for throttling (code 80001, with ``X-Business-Use-Case-Usage``); there is no
idempotency key. Optionally (``facebook_duplicate_guard``) a post repeating the page's
previous one is refused with code 506.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.social.sandbox.common import Upload, bearer, charge, fail, guarded, read_form, reply
from herald.social.sandbox.state import (
    MediaRecord,
    PostRecord,
    SandboxAccount,
    SandboxState,
    fingerprint,
)

P = "facebook"
_VERSION = re.compile(r"^v\d+\.\d+$")
_TOKEN = re.compile(r"^EAA[A-Za-z0-9]{20,}$")
MEDIA_TYPES = {"image/jpeg", "image/png", "image/gif"}
MAX_PHOTO = 4 * 1024 * 1024


def graph_time(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%S+0000")


def routes(state: SandboxState) -> list[Route]:
    async def params(request: Request) -> tuple[dict[str, str], dict[str, Upload]]:
        values = dict(request.query_params)
        files: dict[str, Upload] = {}
        if request.method in ("POST", "DELETE"):
            if request.headers.get("content-type", "").startswith("application/json"):
                body = await request.json()
                values.update(
                    {k: v if isinstance(v, str) else json.dumps(v) for k, v in body.items()}
                )
            else:
                form = await read_form(request)
                values.update({k: v[-1] for k, v in form.fields.items()})
                files = form.files
        return values, files

    def caller(request: Request, values: dict[str, str]) -> tuple[str, dict[str, str]]:
        """The owner of the token (a page id or a user id) and the quota headers."""
        value = bearer(request) or values.get("access_token")
        if not _VERSION.match(request.path_params["version"]):
            raise fail(
                P, 400, f"Unknown path components: /{request.path_params['version']}", code=2500
            )
        if value is None:
            state.admit(P, "-")
            raise fail(
                P,
                400,
                "An active access token must be used to query information about the current user.",
                code=2500,
            )
        owner, _ = state.owner(P, value)
        if owner is None:
            state.admit(P, "-")
            if not _TOKEN.match(value):
                raise fail(P, 400, f"Malformed access token {value}", code=190)
            raise fail(
                P,
                400,
                "Error validating access token: The user has not authorized application.",
                code=190,
                subcode=458,
            )
        return owner, charge(state, P, owner)

    def page_of(owner: str, node: str, headers: dict[str, str]) -> SandboxAccount:
        page = state.account(P, node)
        if page is None:
            raise fail(
                P,
                400,
                f"Unsupported get request. Object with ID '{node}' does not exist, cannot be "
                "loaded due to missing permissions, or does not support this operation.",
                headers,
                code=100,
                subcode=33,
            )
        if owner != page.id:
            raise fail(
                P, 403, "(#200) The page access token is required for this call", headers, code=200
            )
        return page

    async def node(request: Request) -> Response:
        values, _ = await params(request)
        owner, headers = caller(request, values)
        target = request.path_params["node"]
        page = page_of(owner, owner if target == "me" else target, headers)
        link = f"https://www.facebook.com/{page.id}"
        return reply({"id": page.id, "name": page.name, "link": link}, 200, headers)

    async def edge(request: Request) -> Response:
        values, files = await params(request)
        owner, headers = caller(request, values)
        target, edge_name = request.path_params["node"], request.path_params["edge"]
        if edge_name == "permissions" and request.method == "DELETE":
            return revoke(owner, target, headers)
        page = page_of(owner, target, headers)
        if edge_name == "photos" and request.method == "POST":
            return photo(page, values, files, headers)
        if edge_name == "feed" and request.method == "POST":
            return post(page, values, headers)
        if edge_name in ("published_posts", "posts", "feed") and request.method == "GET":
            return listing(page, values, headers)
        raise fail(P, 400, f"Unknown path components: /{edge_name}", headers, code=2500)

    def photo(
        page: SandboxAccount,
        values: dict[str, str],
        files: dict[str, Upload],
        headers: dict[str, str],
    ) -> Response:
        upload = files.get("source")
        if upload is None:
            raise fail(P, 400, "(#324) Requires upload file", headers, code=324)
        data, content_type = upload.data, upload.content_type
        if content_type not in MEDIA_TYPES or len(data) > MAX_PHOTO:
            raise fail(P, 400, "(#324) Missing or invalid image file", headers, code=324)
        photo_id = state.next_id()
        media = MediaRecord(
            platform=P,
            account_id=page.id,
            media_id=photo_id,
            content_type=content_type,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            created_at=state.clock(),
            ready_at=state.clock(),
        )
        with state.lock:
            state.media[(P, photo_id)] = media
        if values.get("published", "true").lower() == "false":
            return reply({"id": photo_id}, 200, headers)
        created = create(page, values.get("caption") or values.get("message") or "", [media])
        return reply({"id": photo_id, "post_id": created.post_id}, 200, headers)

    def post(page: SandboxAccount, values: dict[str, str], headers: dict[str, str]) -> Response:
        message = values.get("message", "")
        attached = []
        with state.lock:
            for index in range(64):
                raw = values.get(f"attached_media[{index}]")
                if raw is None:
                    break
                try:
                    media_id = str(json.loads(raw)["media_fbid"])
                except (ValueError, KeyError, TypeError):
                    raise fail(
                        P,
                        400,
                        f"(#100) param attached_media[{index}] must be a JSON object with "
                        "media_fbid",
                        headers,
                        code=100,
                    ) from None
                media = state.media.get((P, media_id))
                if media is None or media.account_id != page.id or media.attached_to is not None:
                    raise fail(
                        P,
                        400,
                        f"(#100) param attached_media[{index}] is not an unpublished photo of "
                        "this page",
                        headers,
                        code=100,
                    )
                attached.append(media)
            if not message.strip() and not attached and not values.get("link"):
                raise fail(P, 400, "(#100) Missing message or attachment", headers, code=100)
            if state.config.facebook_duplicate_guard:
                previous = state.posts_of(P, page.id)
                if previous and previous[-1].fingerprint == fingerprint(
                    message, [m.sha256 for m in attached]
                ):
                    raise fail(P, 400, "Duplicate status message", headers, code=506)
            created = create(page, message, attached)
        return reply({"id": created.post_id}, 200, headers)

    def create(page: SandboxAccount, message: str, attached: list[MediaRecord]) -> PostRecord:
        with state.lock:
            post_id = f"{page.id}_{state.next_id()}"
            for media in attached:
                media.attached_to = post_id
            return state.add_post(
                P,
                page.id,
                post_id,
                message,
                [m.sha256 for m in attached],
                photos=[m.media_id for m in attached],
            )

    def listing(page: SandboxAccount, values: dict[str, str], headers: dict[str, str]) -> Response:
        try:
            limit = max(1, min(100, int(values.get("limit", "25"))))
        except ValueError:
            raise fail(P, 400, "(#100) limit must be an integer", headers, code=100) from None
        posts = sorted(state.posts_of(P, page.id), key=lambda p: p.created_at, reverse=True)[:limit]
        data = []
        for item in posts:
            entry: dict[str, Any] = {
                "id": item.post_id,
                "created_time": graph_time(item.created_at),
                "permalink_url": f"https://www.facebook.com/{item.post_id}",
            }
            if item.text:
                entry["message"] = item.text
            photos = item.extra.get("photos") or []
            if len(photos) == 1:
                entry["attachments"] = {"data": [{"type": "photo", "target": {"id": photos[0]}}]}
            elif photos:
                sub = [{"type": "photo", "target": {"id": p}} for p in photos]
                entry["attachments"] = {
                    "data": [{"type": "album", "subattachments": {"data": sub}}]
                }
            data.append(entry)
        return reply({"data": data, "paging": {}}, 200, headers)

    def revoke(owner: str, user_id: str, headers: dict[str, str]) -> Response:
        if owner != user_id:
            raise fail(
                P,
                400,
                "(#100) Can only call this method on the user of the token",
                headers,
                code=100,
            )
        with state.lock:
            pages = [
                a
                for (p, _), a in state.accounts.items()
                if p == P and a.info.get("user_id") == user_id
            ]
            state.revoke_owner(P, user_id)
            for page in pages:
                state.revoke_owner(P, page.id)
        return reply({"success": True}, 200, headers)

    return [
        Route("/{version}/{node}", guarded(state, node), methods=["GET"]),
        Route("/{version}/{node}/{edge}", guarded(state, edge), methods=["GET", "POST", "DELETE"]),
    ]
