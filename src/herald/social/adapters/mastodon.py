"""Mastodon (any instance: ``base_url`` is the instance) through its REST API.

Place in the pipeline (auth check -> media -> publish, each step checkpointed):

* auth check: ``GET /api/v1/accounts/verify_credentials``;
* media: ``POST /api/v2/media`` (multipart ``file`` and ``description``); 200 means
  processed, 202 means still processing (the checkpointed :class:`MediaRef` is then
  ``pending``);
* publish: pending media are polled with ``GET /api/v1/media/:id`` (206 while
  processing; still processing after ``media_wait`` seconds -> :class:`NotReady`, a
  snooze), then ``POST /api/v1/statuses`` with the ``Idempotency-Key`` header;
* revoke: ``POST /oauth/revoke`` (needs the app's ``client_id`` and ``client_secret``).

How a retried create is made safe: Mastodon keeps idempotency keys for one hour and
answers a repeated key with the status it created. Past that window
(:mod:`herald.social.steps` decides) :meth:`find_published` reads the account's latest
statuses (``GET /api/v1/accounts/:id/statuses``) created since the first attempt and
matches the attached media ids, or for text-only posts the text. A re-uploaded media
object nobody attached is invisible and removed by the instance.

Credentials: ``access_token`` (and optionally ``client_id``, ``client_secret``).
Options: ``max_characters`` (the instance's limit, default 500), ``visibility``.
"""

from __future__ import annotations

import asyncio
import html
from collections.abc import Sequence
from html.parser import HTMLParser
from typing import Any

from herald.social import ratelimit
from herald.social.adapters.base import (
    AccountInfo,
    Adapter,
    Capabilities,
    MediaRef,
    Post,
    Published,
    Revoked,
    normalise_text,
)
from herald.social.errors import NotReady
from herald.social.media import FetchedMedia
from herald.social.ratelimit import Headers, RateInfo

IDEMPOTENCY_WINDOW = 3600.0
_MEDIA_TYPES = frozenset(
    {"image/jpeg", "image/png", "image/gif", "image/webp", "video/mp4", "video/quicktime"}
)


class MastodonAdapter(Adapter):
    platform = "mastodon"
    # How long publish waits for pending media before snoozing the job.
    media_wait = 20.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._account_id = self.account.ref or None
        options = self.account.options
        self._caps = Capabilities(
            dedupe_window=IDEMPOTENCY_WINDOW,
            lookup=True,
            max_text=int(options.get("max_characters", "500")),
            media_types=_MEDIA_TYPES,
            max_media_bytes=int(options.get("max_media_bytes", str(16 * 1024 * 1024))),
        )

    @property
    def capabilities(self) -> Capabilities:
        return self._caps

    def _auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.account.secret('access_token').reveal()}"}

    def read_rate(self, headers: Headers, now: float) -> RateInfo | None:
        return ratelimit.mastodon(headers, now)

    async def verify(self) -> AccountInfo:
        response = await self.send(
            "GET",
            self.url("/api/v1/accounts/verify_credentials"),
            operation="verify credentials",
            headers=self._auth(),
        )
        body = self.parse(response, "verify credentials")
        account_id = body.get("id")
        if not isinstance(account_id, str):
            raise self.malformed("verify credentials", "the account id")
        self._account_id = account_id
        return AccountInfo(
            platform=self.platform,
            account_id=account_id,
            name=str(body.get("acct") or body.get("username") or account_id),
            url=body.get("url") if isinstance(body.get("url"), str) else None,
        )

    async def upload_media(
        self, media: FetchedMedia, *, key: str, description: str | None = None
    ) -> MediaRef:
        self.check_media(media)
        data = {"description": description} if description else {}
        response = await self.send(
            "POST",
            self.url("/api/v2/media"),
            operation="upload media",
            key=key,
            headers=self._auth(),
            files={"file": (media.filename, media.file(), media.content_type)},
            data=data,
        )
        body = self.parse(response, "upload media")
        pending = response.status_code == 202 or body.get("url") is None
        return self.uploaded(media, body.get("id"), pending=pending)

    async def _wait_processed(self, media: MediaRef) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.media_wait
        pause = 0.2
        while True:
            response = await self.send(
                "GET",
                self.url(f"/api/v1/media/{media.id}"),
                operation="check media",
                headers=self._auth(),
            )
            if response.status_code == 200:
                return
            if loop.time() + pause > deadline:
                raise NotReady(
                    f"mastodon: media {media.id} is still being processed",
                    platform=self.platform,
                    operation="check media",
                    status=response.status_code,
                    delay=5.0,
                )
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)

    async def publish(self, post: Post, media: Sequence[MediaRef], *, key: str) -> Published:
        self.check_post(post, media)
        for item in media:
            if item.pending:
                await self._wait_processed(item)
        form: dict[str, str | list[str]] = {"status": post.text}
        if media:
            form["media_ids[]"] = [item.id for item in media]
        if post.language:
            form["language"] = post.language
        visibility = self.account.options.get("visibility")
        if visibility:
            form["visibility"] = visibility
        response = await self.send(
            "POST",
            self.url("/api/v1/statuses"),
            operation="publish",
            key=key,
            headers={**self._auth(), "Idempotency-Key": key},
            data=form,
        )
        return self._published(self.parse(response, "publish"), recovered=False)

    def _published(self, status: dict[str, Any], *, recovered: bool) -> Published:
        status_id = status.get("id")
        if not isinstance(status_id, str):
            raise self.malformed("publish", "the status id")
        url = status.get("url")
        return Published(
            platform=self.platform,
            post_id=status_id,
            url=url if isinstance(url, str) else None,
            recovered=recovered,
        )

    async def find_published(
        self, post: Post, media: Sequence[MediaRef], *, key: str, within: float
    ) -> Published | None:
        if self._account_id is None:
            await self.verify()
        response = await self.send(
            "GET",
            self.url(f"/api/v1/accounts/{self._account_id}/statuses"),
            operation="look up post",
            headers=self._auth(),
            params={"limit": "40", "exclude_reblogs": "true", "exclude_replies": "true"},
        )
        now = ratelimit.platform_now(response.headers, self._clock)
        wanted_media = {item.id for item in media}
        wanted_text = normalise_text(post.text)
        for status in self.recent(response.json(), "created_at", now, within):
            attached = {
                str(m.get("id"))
                for m in status.get("media_attachments") or []
                if isinstance(m, dict)
            }
            if wanted_media:
                matches = attached == wanted_media
            else:
                matches = not attached and html_text(str(status.get("content", ""))) == wanted_text
            if matches:
                return self._published(status, recovered=True)
        return None

    async def revoke(self) -> Revoked:
        secrets = self.account.secrets
        if "client_id" not in secrets or "client_secret" not in secrets:
            return Revoked(
                remote=False,
                detail="no client_id/client_secret stored: revoke the app in the account's "
                "settings on the instance",
            )
        await self.send(
            "POST",
            self.url("/oauth/revoke"),
            operation="revoke",
            data={
                "client_id": secrets["client_id"].reveal(),
                "client_secret": secrets["client_secret"].reveal(),
                "token": secrets["access_token"].reveal(),
            },
        )
        return Revoked(remote=True, detail="token revoked at the instance")


class _TextOf(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("br", "p"):
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def html_text(content: str) -> str:
    """The plain text of a status's HTML ``content``, normalised for comparison."""
    parser = _TextOf()
    parser.feed(content)
    parser.close()
    return normalise_text(html.unescape("".join(parser.parts)))
