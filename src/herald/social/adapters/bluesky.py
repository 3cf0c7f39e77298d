"""Bluesky (or any atproto PDS: ``base_url`` is the PDS) through XRPC.

Place in the pipeline (auth check -> media -> publish, each step checkpointed):

* auth check: a session from ``com.atproto.server.createSession`` (identifier and app
  password), renewed with ``refreshSession`` when the PDS answers ``ExpiredToken`` or
  ``InvalidToken`` (and by a new login when the refresh token is dead too), then
  ``com.atproto.server.getSession``;
* media: ``com.atproto.repo.uploadBlob`` (the raw bytes; the PDS answers a blob
  reference, content-addressed, so uploading the same bytes twice yields the same blob);
* publish: ``com.atproto.repo.createRecord`` of an ``app.bsky.feed.post`` with
  ``validate: true`` (the PDS checks the record against the lexicon, so a malformed post
  fails once, permanently, instead of being stored);
* revoke: ``com.atproto.server.deleteSession`` (the app password itself can only be
  revoked in the account's settings).

How a retried create is made safe: the record key (``rkey``) is not left to the PDS but
derived from the post's stable ``created_at`` and the step's idempotency key (a TID:
the time in microseconds and a 10-bit clock id taken from the key). A repeated create
of the same key names the same record, which the repository refuses to create twice;
on that refusal (the reference PDS answers 500), on any 5xx or a lost answer,
:meth:`publish` reads the record back with ``com.atproto.repo.getRecord`` and returns
it. :meth:`find_published` is the same exact lookup. ``swapCommit`` is deliberately not
used: it fails on any concurrent write to the account (another app posting), turning a
harmless race into failed jobs, and the record key already makes the create safe.

Credentials: ``app_password``; a persisted session as ``access_jwt``/``refresh_jwt``
(renewed ones come back from :meth:`updated_secrets` - store them: ``createSession`` is
limited to 30 per 5 minutes per account). ``ref`` is the handle or DID.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from typing import Any

import httpx

from herald.ops.secrets import Secret
from herald.social.adapters.base import (
    FOREVER,
    AccountInfo,
    Adapter,
    Capabilities,
    MediaRef,
    Post,
    Published,
    Revoked,
    json_body,
    utc_iso,
)
from herald.social.errors import (
    PermanentError,
    ReauthRequired,
    SocialError,
    TransientError,
)
from herald.social.media import FetchedMedia
from herald.social.ratelimit import RateInfo

POST_COLLECTION = "app.bsky.feed.post"
MAX_TEXT_BYTES = 3000
_TID_ALPHABET = "234567abcdefghijklmnopqrstuvwxyz"
_AUTH_ERRORS = frozenset(
    {
        "ExpiredToken",
        "InvalidToken",
        "AuthenticationRequired",
        "AccountTakedown",
        "AccountDeactivated",
        "AuthMissing",
    }
)
_URL = re.compile(r"https?://[^\s<>\"')\]]+[^\s<>\"')\].,;:!?]")
_TAG = re.compile(r"(?:^|(?<=\s))#(\w[\w-]{0,63})")


def tid(micros: int, clock_id: int) -> str:
    """An atproto TID: 53 bits of microseconds and a 10-bit clock id, base32-sortable."""
    if not 0 <= micros < 1 << 53 or not 0 <= clock_id < 1 << 10:
        raise ValueError("TID parts out of range")
    value = (micros << 10) | clock_id
    chars = []
    for _ in range(13):
        chars.append(_TID_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def record_key(post: Post, key: str) -> str:
    """The record key of ``post`` published under idempotency ``key`` (stable)."""
    micros = int(post.created_at.timestamp() * 1_000_000)
    clock_id = int.from_bytes(hashlib.sha256(key.encode()).digest()[:2], "big") & 0x3FF
    return tid(micros, clock_id)


def facets(text: str) -> list[dict[str, Any]]:
    """Link and hashtag facets (byte ranges in UTF-8), so links and tags are live."""
    found: list[dict[str, Any]] = []

    def span(start: int, end: int) -> dict[str, int]:
        return {
            "byteStart": len(text[:start].encode()),
            "byteEnd": len(text[:end].encode()),
        }

    for match in _URL.finditer(text):
        found.append(
            {
                "index": span(match.start(), match.end()),
                "features": [{"$type": "app.bsky.richtext.facet#link", "uri": match.group(0)}],
            }
        )
    for match in _TAG.finditer(text):
        if match.group(1).isdigit():  # "#1" is not a tag
            continue
        found.append(
            {
                "index": span(match.start(), match.end()),
                "features": [{"$type": "app.bsky.richtext.facet#tag", "tag": match.group(1)}],
            }
        )
    return found


class BlueskyAdapter(Adapter):
    platform = "bluesky"
    capabilities = Capabilities(
        dedupe_window=FOREVER,
        lookup=True,
        max_text=300,
        media_types=frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"}),
        max_media_bytes=1_000_000,
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        secrets = self.account.secrets
        self._access = secrets.get("access_jwt")
        self._refresh = secrets.get("refresh_jwt")
        self._did: str | None = self.account.options.get("did") or (
            self.account.ref if self.account.ref.startswith("did:") else None
        )
        self._handle: str | None = None
        self._renewed = False

    def updated_secrets(self) -> dict[str, Secret]:
        if not self._renewed or self._access is None or self._refresh is None:
            return {}
        return {"access_jwt": self._access, "refresh_jwt": self._refresh}

    def xrpc(self, nsid: str) -> str:
        return self.url(f"/xrpc/{nsid}")

    # --- errors -----------------------------------------------------------------------

    def error(
        self, response: httpx.Response, operation: str, now: float, rate: RateInfo | None
    ) -> SocialError:
        body = json_body(response) or {}
        name = body.get("error") if isinstance(body.get("error"), str) else None
        detail = body.get("message") if isinstance(body.get("message"), str) else name
        if name in _AUTH_ERRORS and response.status_code in (400, 401):
            return ReauthRequired(
                f"bluesky {operation}: HTTP {response.status_code} {name} - "
                f"{self._redactor.text(str(detail))[:300]}",
                platform=self.platform,
                operation=operation,
                status=response.status_code,
                code=name,
                body=self._redactor.body(response.content),
            )
        detail = f"{name}: {detail}" if name and detail != name else detail
        return self.classified(response, operation, now, rate, detail, code=name)

    # --- session ----------------------------------------------------------------------

    def _adopt(self, body: dict[str, Any], operation: str) -> None:
        access, refresh, did = body.get("accessJwt"), body.get("refreshJwt"), body.get("did")
        if not (isinstance(access, str) and isinstance(refresh, str) and isinstance(did, str)):
            raise self.malformed(operation, "the session tokens")
        self._access, self._refresh = Secret(access), Secret(refresh)
        self._redactor.add(self._access)
        self._redactor.add(self._refresh)
        self._did = did
        if isinstance(body.get("handle"), str):
            self._handle = body["handle"]
        self._renewed = True

    async def _login(self) -> None:
        response = await self.send(
            "POST",
            self.xrpc("com.atproto.server.createSession"),
            operation="create session",
            json={
                "identifier": self.account.ref,
                "password": self.account.secret("app_password").reveal(),
            },
        )
        self._adopt(self.parse(response, "create session"), "create session")

    async def _renew(self) -> None:
        """Refresh the session; when the refresh token is dead too, log in again."""
        if self._refresh is not None:
            try:
                response = await self.send(
                    "POST",
                    self.xrpc("com.atproto.server.refreshSession"),
                    operation="refresh session",
                    headers={"Authorization": f"Bearer {self._refresh.reveal()}"},
                )
            except ReauthRequired:
                if "app_password" not in self.account.secrets:
                    raise
            else:
                self._adopt(self.parse(response, "refresh session"), "refresh session")
                return
        await self._login()

    async def _call(
        self,
        method: str,
        nsid: str,
        *,
        operation: str,
        key: str | None = None,
        headers: dict[str, str] | None = None,
        content: Any = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """An authenticated XRPC call; an expired access token is renewed once.

        ``content`` may be a callable producing the body, for bodies that are streams
        (a second try needs a fresh one).
        """
        if self._access is None:
            await self._login()
        for renewed in (False, True):
            assert self._access is not None
            if content is not None:
                kwargs["content"] = content() if callable(content) else content
            try:
                return await self.send(
                    method,
                    self.xrpc(nsid),
                    operation=operation,
                    key=key,
                    headers={**(headers or {}), "Authorization": f"Bearer {self._access.reveal()}"},
                    **kwargs,
                )
            except ReauthRequired as exc:
                # Expired, or unknown to the PDS (its keys rotated): renew once.
                if renewed or exc.code not in ("ExpiredToken", "InvalidToken"):
                    raise
                await self._renew()
        raise AssertionError("unreachable")

    # --- the interface ----------------------------------------------------------------

    async def verify(self) -> AccountInfo:
        response = await self._call(
            "GET", "com.atproto.server.getSession", operation="verify credentials"
        )
        body = self.parse(response, "verify credentials")
        did, handle = body.get("did"), body.get("handle")
        if not isinstance(did, str) or not isinstance(handle, str):
            raise self.malformed("verify credentials", "the did and handle")
        self._did, self._handle = did, handle
        return AccountInfo(
            platform=self.platform, account_id=did, name=handle, url=self._profile_url(handle)
        )

    def _profile_url(self, actor: str) -> str:
        return (
            self.account.options.get("web_url", "https://bsky.app").rstrip("/")
            + f"/profile/{actor}"
        )

    async def upload_media(
        self, media: FetchedMedia, *, key: str, description: str | None = None
    ) -> MediaRef:
        self.check_media(media)
        response = await self._call(
            "POST",
            "com.atproto.repo.uploadBlob",
            operation="upload media",
            key=key,
            headers={"Content-Type": media.content_type, "Content-Length": str(media.size)},
            content=media.chunks,
        )
        blob = self.parse(response, "upload media").get("blob")
        link = blob.get("ref", {}).get("$link") if isinstance(blob, dict) else None
        return self.uploaded(media, link, data={"blob": json.dumps(blob, separators=(",", ":"))})

    def check_post(self, post: Post, media: Sequence[MediaRef]) -> None:
        super().check_post(post, media)
        if len(post.text.encode()) > MAX_TEXT_BYTES:
            raise self.invalid(f"the text is over {MAX_TEXT_BYTES} bytes in UTF-8")

    def record(self, post: Post, media: Sequence[MediaRef]) -> dict[str, Any]:
        record: dict[str, Any] = {
            "$type": POST_COLLECTION,
            "text": post.text,
            "createdAt": utc_iso(post.created_at),
        }
        if post.language:
            record["langs"] = [post.language]
        links = facets(post.text)
        if links:
            record["facets"] = links
        if media:
            record["embed"] = {
                "$type": "app.bsky.embed.images",
                "images": [
                    {"alt": post.media_description or "", "image": json.loads(item.data["blob"])}
                    for item in media
                ],
            }
        return record

    async def publish(self, post: Post, media: Sequence[MediaRef], *, key: str) -> Published:
        self.check_post(post, media)
        record = self.record(post, media)
        rkey = record_key(post, key)
        if self._did is None:
            await self.verify()
        try:
            response = await self._call(
                "POST",
                "com.atproto.repo.createRecord",
                operation="publish",
                key=key,
                json={
                    "repo": self._did,
                    "collection": POST_COLLECTION,
                    "rkey": rkey,
                    "validate": True,
                    "record": record,
                },
            )
        except (TransientError, PermanentError) as exc:
            if isinstance(exc, ReauthRequired) or (
                isinstance(exc, PermanentError) and "exist" not in (exc.message or "").lower()
            ):
                raise
            # The record may exist: refused as a duplicate, or created before the answer
            # was lost. Read it back; if the lookup fails too, the original error stands.
            try:
                found = await self._existing(rkey, record)
            except SocialError:
                raise exc from None
            if found is None:
                raise
            return found
        body = self.parse(response, "publish")
        uri = body.get("uri")
        if not isinstance(uri, str):
            raise self.malformed("publish", "the record uri")
        return Published(platform=self.platform, post_id=uri, url=self._post_url(rkey))

    def _post_url(self, rkey: str) -> str:
        return f"{self._profile_url(self._handle or self._did or self.account.ref)}/post/{rkey}"

    async def _existing(self, rkey: str, record: dict[str, Any]) -> Published | None:
        response = await self._call(
            "GET",
            "com.atproto.repo.getRecord",
            operation="look up post",
            params={"repo": self._did or "", "collection": POST_COLLECTION, "rkey": rkey},
            ok=(400,),
        )
        body = json_body(response) or {}
        if response.status_code == 400:
            if body.get("error") == "RecordNotFound":
                return None
            raise self.error(response, "look up post", self._clock(), None)
        value = body.get("value")
        uri = body.get("uri")
        if not isinstance(value, dict) or not isinstance(uri, str):
            raise self.malformed("look up post", "the record")
        if value.get("text") != record["text"] or value.get("createdAt") != record["createdAt"]:
            raise PermanentError(
                f"bluesky: record {rkey} already holds another post (record key collision)",
                platform=self.platform,
                operation="publish",
            )
        return Published(
            platform=self.platform, post_id=uri, url=self._post_url(rkey), recovered=True
        )

    async def find_published(
        self, post: Post, media: Sequence[MediaRef], *, key: str, within: float
    ) -> Published | None:
        if self._did is None:
            await self.verify()
        return await self._existing(record_key(post, key), self.record(post, media))

    async def revoke(self) -> Revoked:
        if self._refresh is None:
            return Revoked(
                remote=False,
                detail="no session is open; revoke the app password in the account's settings",
            )
        await self.send(
            "POST",
            self.xrpc("com.atproto.server.deleteSession"),
            operation="revoke",
            headers={"Authorization": f"Bearer {self._refresh.reveal()}"},
        )
        self._access = self._refresh = None
        return Revoked(
            remote=True,
            detail="session deleted; the app password itself is revoked in the account's settings",
        )
