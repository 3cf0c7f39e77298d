"""A generic signed webhook, in the style of the Standard Webhooks specification.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): the
auth check validates the endpoint and signing secret locally (a webhook has no
credentials call, and sending a test event would be a side effect); the media step
only records the fetched media's source URL, size, type and SHA-256 for the event (the
receiver downloads it); publish POSTs one JSON event.

Each delivery carries ``webhook-id`` (stable across retries: the step's idempotency
key), ``webhook-timestamp`` (Unix seconds of this try) and ``webhook-signature``
(``v1,`` + base64 of HMAC-SHA256 over ``id.timestamp.body`` keyed with the secret's
bytes; the secret is written ``whsec_`` + base64).

How a retried create is made safe: receivers following the specification deduplicate
on ``webhook-id``, which never changes between tries of a step; there is nothing to
look up. A 410 Gone means the endpoint was withdrawn: permanent.

Credentials: ``signing_secret``. ``base_url`` is the endpoint URL itself.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import httpx

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
from herald.social.errors import PermanentError, SocialError
from herald.social.media import DEFAULT_CONTENT_TYPES, FetchedMedia, safe_url
from herald.social.ratelimit import RateInfo

EVENT_TYPE = "social.post.published"
SECRET_PREFIX = "whsec_"
# How far a receiver lets a timestamp be from its clock (the specification's advice).
TOLERANCE = 300


def secret_bytes(secret: str) -> bytes:
    """The HMAC key of a ``whsec_...`` secret."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a signing secret is written {SECRET_PREFIX}<base64>")
    try:
        key = base64.b64decode(secret[len(SECRET_PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("the signing secret is not valid base64 after its prefix") from None
    if not 24 <= len(key) <= 64:
        raise ValueError("a signing secret must hold 24 to 64 bytes")
    return key


def sign(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    mac = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(mac.digest()).decode("ascii")


def signature_valid(key: bytes, message_id: str, timestamp: int, body: bytes, header: str) -> bool:
    """Whether any ``v1,`` signature in ``header`` (space separated) matches."""
    expected = sign(key, message_id, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in header.split())


class WebhookAdapter(Adapter):
    platform = "webhook"
    capabilities = Capabilities(
        dedupe_window=FOREVER,
        lookup=False,
        max_text=100_000,
        media_types=DEFAULT_CONTENT_TYPES,
        max_media_bytes=100 * 1024 * 1024,
    )

    def _key(self, operation: str) -> bytes:
        try:
            return secret_bytes(self.account.secret("signing_secret").reveal())
        except ValueError as exc:
            raise PermanentError(
                f"webhook {operation}: {exc}", platform=self.platform, operation=operation
            ) from None

    def error(
        self, response: httpx.Response, operation: str, now: float, rate: RateInfo | None
    ) -> SocialError:
        if response.status_code == 410:
            return PermanentError(
                "webhook: the endpoint answered 410 Gone (withdrawn by the receiver)",
                platform=self.platform,
                operation=operation,
                status=410,
                body=self._redactor.body(response.content),
            )
        return super().error(response, operation, now, rate)

    async def verify(self) -> AccountInfo:
        self._key("verify credentials")
        return AccountInfo(
            platform=self.platform,
            account_id=safe_url(self.account.base_url),
            name=self.account.ref or safe_url(self.account.base_url),
            url=None,
        )

    async def upload_media(
        self, media: FetchedMedia, *, key: str, description: str | None = None
    ) -> MediaRef:
        self.check_media(media)
        if not media.source_url:
            raise self.invalid("webhook media must come from a URL the receiver can fetch")
        data = {"url": media.source_url, **({"description": description} if description else {})}
        return self.uploaded(media, media.sha256, data=data)

    def event(self, post: Post, media: Sequence[MediaRef], message_id: str) -> dict[str, Any]:
        return {
            "type": EVENT_TYPE,
            "timestamp": utc_iso(datetime.now(UTC)),
            "data": {
                "id": message_id,
                "account": self.account.ref,
                "text": post.text,
                "created_at": utc_iso(post.created_at),
                "language": post.language,
                "media": [
                    {
                        "url": item.data.get("url"),
                        "content_type": item.content_type,
                        "size": item.size,
                        "sha256": item.sha256,
                        "description": post.media_description or item.data.get("description"),
                    }
                    for item in media
                ],
            },
        }

    async def publish(self, post: Post, media: Sequence[MediaRef], *, key: str) -> Published:
        self.check_post(post, media)
        secret = self._key("publish")
        message_id = f"msg_{key}"
        body = json.dumps(self.event(post, media, message_id), separators=(",", ":")).encode()
        timestamp = int(self._clock())
        response = await self.send(
            "POST",
            self.account.base_url,
            operation="publish",
            key=key,
            content=body,
            headers={
                "Content-Type": "application/json",
                "webhook-id": message_id,
                "webhook-timestamp": str(timestamp),
                "webhook-signature": sign(secret, message_id, timestamp, body),
            },
        )
        answer = json_body(response) or {}
        post_id = answer.get("id")
        url = answer.get("url")
        return Published(
            platform=self.platform,
            post_id=post_id if isinstance(post_id, str) else message_id,
            url=url if isinstance(url, str) else None,
        )

    async def find_published(
        self, post: Post, media: Sequence[MediaRef], *, key: str, within: float
    ) -> Published | None:
        return None  # the receiver deduplicates on webhook-id; nothing to read back

    async def revoke(self) -> Revoked:
        return Revoked(
            remote=False,
            detail="a webhook has nothing to revoke remotely; the signing secret is deleted "
            "with the account",
        )
