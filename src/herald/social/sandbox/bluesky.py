"""The sandbox's Bluesky PDS: the XRPC methods the adapter calls, with atproto's answers.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): stands in
for a PDS in tests, the demo and benchmarks.

Like the reference PDS: an expired access token is ``400 ExpiredToken``, an unknown one
``401 InvalidToken``; access tokens are stateless (valid until they expire, even after
the session is refreshed or deleted) while a refresh token works once; blobs are
content-addressed (raw CIDv1); ``createRecord`` refuses a record key already in the
repository (the reference PDS fails that write with 500 ``InternalServerError``),
honours ``swapCommit`` (``400 InvalidSwap``) and, unless ``validate`` is false, checks
the post against the lexicon (``400 InvalidRequest``).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.social.adapters.base import count_graphemes
from herald.social.sandbox.common import Answer, bearer, charge, fail, guarded, json_object, reply
from herald.social.sandbox.state import (
    MediaRecord,
    SandboxAccount,
    SandboxState,
    token,
)

P = "bluesky"
REFRESH = "bluesky-refresh"  # refresh tokens live in their own namespace
REFRESH_TTL = 90 * 24 * 3600.0
MAX_BLOB = 50 * 1024 * 1024
MAX_IMAGE = 1_000_000
_TID = re.compile(r"^[234567abcdefghij][234567abcdefghijklmnopqrstuvwxyz]{12}$")
_TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"


def raw_cid(data: bytes) -> str:
    """CIDv1, raw codec, sha2-256, base32: how a PDS names a blob."""
    digest = bytes([0x01, 0x55, 0x12, 0x20]) + hashlib.sha256(data).digest()
    return "b" + base64.b32encode(digest).decode().lower().rstrip("=")


def record_cid(record: dict[str, Any]) -> str:
    # A stand-in for the dag-cbor CID: stable for the same record, "bafyrei" like the real.
    data = json.dumps(record, sort_keys=True, separators=(",", ":")).encode()
    digest = bytes([0x01, 0x71, 0x12, 0x20]) + hashlib.sha256(data).digest()
    return "b" + base64.b32encode(digest).decode().lower().rstrip("=")


def _jwt(did: str, scope: str) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return ".".join(
        [
            part({"typ": "at+jwt", "alg": "ES256K"}),
            part({"scope": scope, "sub": did, "jti": token()}),
            token(),
        ]
    )


def routes(state: SandboxState) -> list[Route]:
    commits: dict[str, str] = {}  # did -> current commit cid

    def authed(request: Request) -> tuple[SandboxAccount, dict[str, str]]:
        value = bearer(request)
        if value is None:
            state.admit(P, "-")
            raise fail(P, 401, "Authentication Required", name="AuthMissing")
        owner, expired = state.owner(P, value)
        account = None if owner is None else state.account(P, owner)
        if account is None:
            state.admit(P, "-")
            raise fail(P, 401, "Token could not be verified", name="InvalidToken")
        if expired:
            state.admit(P, account.id)
            raise fail(P, 400, "Token has expired", name="ExpiredToken")
        return account, charge(state, P, account.id)

    def open_session(account: SandboxAccount) -> dict[str, Any]:
        access = _jwt(account.id, "com.atproto.access")
        refresh = _jwt(account.id, "com.atproto.refresh")
        with state.lock:
            state.tokens[(P, access)] = (account.id, state.clock() + state.config.access_ttl)
            state.tokens[(REFRESH, refresh)] = (account.id, state.clock() + REFRESH_TTL)
        return {
            "did": account.id,
            "handle": account.name,
            "accessJwt": access,
            "refreshJwt": refresh,
            "active": True,
        }

    def close_session(refresh: str) -> None:
        # Access tokens are stateless: they stay valid until they expire.
        state.revoke(REFRESH, refresh)

    def refresh_owner(request: Request) -> tuple[str, SandboxAccount]:
        value = bearer(request)
        owner, expired = (None, False) if value is None else state.owner(REFRESH, value)
        account = None if owner is None else state.account(P, owner)
        if value is None or account is None or expired:
            state.admit(P, "-")
            raise fail(P, 400, "Token has been revoked", name="ExpiredToken")
        return value, account

    async def create_session(request: Request) -> Response:
        body = await json_object(request, P)
        identifier, password = str(body.get("identifier") or ""), str(body.get("password") or "")
        account = state.by_name(P, identifier)
        if account is None:
            state.admit(P, "-")
            raise fail(P, 401, "Invalid identifier or password", name="AuthenticationRequired")
        headers = charge(state, P, account.id, "requests", "session")
        if account.credentials["app_password"] != password:
            raise fail(
                P, 401, "Invalid identifier or password", headers, name="AuthenticationRequired"
            )
        return reply(open_session(account), 200, headers)

    async def refresh_session(request: Request) -> Response:
        old, account = refresh_owner(request)
        headers = charge(state, P, account.id)
        close_session(old)
        return reply(open_session(account), 200, headers)

    async def delete_session(request: Request) -> Response:
        old, account = refresh_owner(request)
        headers = charge(state, P, account.id)
        close_session(old)
        return Response(status_code=200, headers=headers)

    async def get_session(request: Request) -> Response:
        account, headers = authed(request)
        return reply({"did": account.id, "handle": account.name, "active": True}, 200, headers)

    async def upload_blob(request: Request) -> Response:
        account, headers = authed(request)
        data = b""
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_BLOB:
                raise fail(P, 413, "request entity too large", headers, name="PayloadTooLarge")
        content_type = request.headers.get("content-type", "application/octet-stream").split(";")[0]
        cid = raw_cid(data)
        with state.lock:
            state.media[(P, f"{account.id}/{cid}")] = MediaRecord(
                platform=P,
                account_id=account.id,
                media_id=cid,
                content_type=content_type,
                size=len(data),
                sha256=hashlib.sha256(data).hexdigest(),
                created_at=state.clock(),
                ready_at=state.clock(),
            )
        blob = {"$type": "blob", "ref": {"$link": cid}, "mimeType": content_type, "size": len(data)}
        return reply({"blob": blob}, 200, headers)

    async def create_record(request: Request) -> Response:
        account, headers = authed(request)
        body = await json_object(request, P)
        if body.get("repo") not in (account.id, account.name):
            raise fail(P, 401, "Authentication Required", headers, name="AuthenticationRequired")
        collection = body.get("collection")
        if collection != "app.bsky.feed.post":
            raise fail(
                P, 400, f"the sandbox stores only app.bsky.feed.post, not {collection}", headers
            )
        record = body.get("record")
        if not isinstance(record, dict):
            raise fail(P, 400, "Input/record must be an object", headers)
        rkey = body.get("rkey")
        if rkey is None:
            rkey = _now_tid(state.clock())
        if not isinstance(rkey, str) or not _TID.match(rkey):
            raise fail(P, 400, f"Invalid record key for app.bsky.feed.post: {rkey}", headers)
        media = [] if body.get("validate") is False else _validate(state, account, record, headers)
        with state.lock:
            swap = body.get("swapCommit")
            if swap is not None and swap != commits.get(account.id):
                raise fail(
                    P, 400, f"Commit was at {commits.get(account.id)}", headers, name="InvalidSwap"
                )
            post_id = f"at://{account.id}/app.bsky.feed.post/{rkey}"
            if state.find_post(P, post_id) is not None:
                # The repository refuses a second value at the key; the reference PDS lets
                # that surface as an internal error.
                raise fail(P, 500, "Internal Server Error", headers, name="InternalServerError")
            cid = record_cid(record)
            commit = record_cid({"prev": commits.get(account.id), "record": cid})
            commits[account.id] = commit
            text = str(record.get("text") or "")
            state.add_post(
                P,
                account.id,
                post_id,
                text,
                [m.sha256 for m in media],
                key=rkey,
                record=record,
                cid=cid,
            )
        answer = {
            "uri": post_id,
            "cid": cid,
            "commit": {"cid": commit, "rev": rkey},
            "validationStatus": "valid",
        }
        return reply(answer, 200, headers)

    async def get_record(request: Request) -> Response:
        _, headers = authed(request)
        query = request.query_params
        repo = state.by_name(P, query.get("repo", ""))
        did = repo.id if repo else query.get("repo")
        uri = f"at://{did}/{query.get('collection')}/{query.get('rkey')}"
        post = state.find_post(P, uri)
        if post is None:
            raise fail(P, 400, f"Could not locate record: {uri}", headers, name="RecordNotFound")
        return reply(
            {"uri": uri, "cid": post.extra["cid"], "value": post.extra["record"]}, 200, headers
        )

    async def not_implemented(request: Request) -> Response:
        raise fail(P, 501, "Method Not Implemented", name="MethodNotImplemented")

    methods = {
        "com.atproto.server.createSession": (create_session, "POST"),
        "com.atproto.server.refreshSession": (refresh_session, "POST"),
        "com.atproto.server.deleteSession": (delete_session, "POST"),
        "com.atproto.server.getSession": (get_session, "GET"),
        "com.atproto.repo.uploadBlob": (upload_blob, "POST"),
        "com.atproto.repo.createRecord": (create_record, "POST"),
        "com.atproto.repo.getRecord": (get_record, "GET"),
    }
    found = [
        Route(f"/xrpc/{nsid}", guarded(state, h), methods=[m]) for nsid, (h, m) in methods.items()
    ]
    return [*found, Route("/xrpc/{nsid}", guarded(state, not_implemented), methods=["GET", "POST"])]


def _now_tid(now: float) -> str:
    value = int(now * 1_000_000) << 10
    return "".join(_TID_ALPHABET[(value >> (5 * i)) & 31] for i in reversed(range(13)))


def _validate(
    state: SandboxState, account: SandboxAccount, record: dict[str, Any], headers: dict[str, str]
) -> list[MediaRecord]:
    """The lexicon's rules for app.bsky.feed.post that matter here."""

    def invalid(message: str) -> Answer:
        return fail(P, 400, f"Invalid app.bsky.feed.post record: {message}", headers)

    if record.get("$type") != "app.bsky.feed.post":
        raise invalid("Record/$type must be app.bsky.feed.post")
    text = record.get("text")
    if not isinstance(text, str):
        raise invalid("Record/text must be a string")
    if count_graphemes(text) > 300 or len(text.encode()) > 3000:
        raise invalid("Record/text must not be longer than 300 graphemes")
    try:
        datetime.fromisoformat(str(record.get("createdAt")).replace("Z", "+00:00"))
    except ValueError:
        raise invalid("Record/createdAt must be an valid atproto datetime") from None
    embed = record.get("embed")
    if embed is None:
        return []
    if not isinstance(embed, dict) or embed.get("$type") != "app.bsky.embed.images":
        raise invalid("Record/embed must be app.bsky.embed.images (the sandbox knows no other)")
    images = embed.get("images")
    if not isinstance(images, list) or not 1 <= len(images) <= 4:
        raise invalid("Record/embed/images must hold 1 to 4 images")
    found = []
    for index, image in enumerate(images):
        blob = image.get("image") if isinstance(image, dict) else None
        link = blob.get("ref", {}).get("$link") if isinstance(blob, dict) else None
        media = state.media.get((P, f"{account.id}/{link}"))
        if not isinstance(image, dict) or not isinstance(image.get("alt"), str):
            raise invalid(f"Record/embed/images/{index}/alt must be a string")
        if media is None:
            raise invalid(f"Record/embed/images/{index}/image: blob {link} not found")
        if not media.content_type.startswith("image/") or media.size > MAX_IMAGE:
            raise invalid(
                f"Record/embed/images/{index}/image must be an image of at most {MAX_IMAGE} bytes"
            )
        found.append(media)
    return found
