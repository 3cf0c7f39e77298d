"""Facebook Pages through the Graph API, with a page access token.

Place in the pipeline (auth check -> media -> publish, each step checkpointed):

* auth check: ``GET /{version}/{page-id}?fields=id,name,link``;
* media: ``POST /{version}/{page-id}/photos`` with the image as ``source`` and
  ``published=false`` - an unpublished photo, invisible until a post attaches it;
* publish: ``POST /{version}/{page-id}/feed`` with ``message`` and
  ``attached_media[0]={"media_fbid": ...}`` (the documented multi-photo flow, which
  keeps upload and publish separate steps);
* revoke: ``DELETE /{version}/{user-id}/permissions`` with the user's token (option
  ``user_id``, credential ``user_access_token``).

Errors are read by their Graph code, not only the HTTP status (Graph answers 400 for
an expired token and for throttling alike): 190/102 and permission codes (10, 200-299)
need re-authorisation; 4, 17, 32, 341, 613 and 80001 are throttling (snooze, for the
``estimated_time_to_regain_access`` of ``X-Business-Use-Case-Usage`` when given);
1, 2 and ``is_transient`` are retried; 506 is Graph's duplicate-post refusal.

How a retried create is made safe: Graph has no idempotency key. A retry of the publish
step first calls :meth:`find_published`, which reads the page's latest posts
(``GET /{page-id}/published_posts``) created since the first attempt and matches the
attached photo ids, or for a text post the message (two posts of the same text and
photos to one page in that window cannot be told apart: Graph has nothing else to go
by). Graph's own #506 refusal of a repeated post stays a permanent error: on a first
try it means another job posted the same words, and a resumed try looks up before it
creates. An unpublished photo uploaded twice is never shown.

Credentials: ``page_access_token`` (and ``user_access_token`` for revoke). ``ref`` is
the page id. Options: ``api_version`` (default ``v21.0``), ``user_id``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

import httpx

from herald.social import ratelimit
from herald.social.adapters.base import (
    AccountInfo,
    Adapter,
    Capabilities,
    MediaRef,
    Post,
    Published,
    Revoked,
    json_body,
    normalise_text,
)
from herald.social.errors import (
    PermanentError,
    RateLimited,
    ReauthRequired,
    SocialError,
    TransientError,
    rate_limit_delay,
)
from herald.social.media import FetchedMedia
from herald.social.ratelimit import Headers, RateInfo

DEFAULT_VERSION = "v21.0"
THROTTLING_CODES = frozenset({4, 17, 32, 341, 613, 80001})
REAUTH_CODES = frozenset({102, 190, 10})
# Graph's windows roll over an hour; without an estimate, wait a good part of one.
DEFAULT_THROTTLE_SNOOZE = 300.0


class FacebookAdapter(Adapter):
    platform = "facebook"
    capabilities = Capabilities(
        dedupe_window=None,
        lookup=True,
        max_text=63_206,
        media_types=frozenset({"image/jpeg", "image/png", "image/gif"}),
        max_media_bytes=4 * 1024 * 1024,
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._version = self.account.options.get("api_version", DEFAULT_VERSION)

    def graph(self, path: str) -> str:
        return self.url(f"/{self._version}/{path.lstrip('/')}")

    def _auth(self, name: str = "page_access_token") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.account.secret(name).reveal()}"}

    def read_rate(self, headers: Headers, now: float) -> RateInfo | None:
        return ratelimit.facebook(headers)

    def error(
        self, response: httpx.Response, operation: str, now: float, rate: RateInfo | None
    ) -> SocialError:
        body = json_body(response) or {}
        found = body.get("error")
        details: dict[str, Any] = found if isinstance(found, dict) else {}
        code = details.get("code") if isinstance(details.get("code"), int) else None
        subcode = details.get("error_subcode")
        message = f"facebook {operation}: HTTP {response.status_code}"
        if code is not None:
            message += f" (#{code}" + (f"/{subcode}" if isinstance(subcode, int) else "") + ")"
        if isinstance(details.get("message"), str):
            message += f" - {self._redactor.text(details['message'])[:300]}"
        kwargs: dict[str, Any] = {
            "platform": self.platform,
            "operation": operation,
            "status": response.status_code,
            "code": None if code is None else str(code),
            "body": self._redactor.body(response.content),
            "rate": rate,
        }
        status = response.status_code
        if code in THROTTLING_CODES or status == 429:
            wait = rate_limit_delay(response.headers, now, rate)
            return RateLimited(message, delay=wait or DEFAULT_THROTTLE_SNOOZE, **kwargs)
        if code in REAUTH_CODES or (code is not None and 200 <= code <= 299) or status == 401:
            return ReauthRequired(message, **kwargs)
        if code in (1, 2) or details.get("is_transient") is True or status >= 500:
            return TransientError(message, **kwargs)
        if code == 368:  # temporarily blocked for a policy: worth a try much later
            return TransientError(message, delay=3600.0, **kwargs)
        return PermanentError(message, **kwargs)

    async def verify(self) -> AccountInfo:
        response = await self.send(
            "GET",
            self.graph(self.account.ref),
            operation="verify credentials",
            headers=self._auth(),
            params={"fields": "id,name,link"},
        )
        body = self.parse(response, "verify credentials")
        if body.get("id") != self.account.ref:
            raise PermanentError(
                f"facebook: the token does not answer for page {self.account.ref}",
                platform=self.platform,
                operation="verify credentials",
            )
        link = body.get("link")
        return AccountInfo(
            platform=self.platform,
            account_id=self.account.ref,
            name=str(body.get("name") or self.account.ref),
            url=link if isinstance(link, str) else None,
        )

    async def upload_media(
        self, media: FetchedMedia, *, key: str, description: str | None = None
    ) -> MediaRef:
        self.check_media(media)
        response = await self.send(
            "POST",
            self.graph(f"{self.account.ref}/photos"),
            operation="upload media",
            key=key,
            headers=self._auth(),
            files={"source": (media.filename, media.file(), media.content_type)},
            data={"published": "false", **({"caption": description} if description else {})},
        )
        return self.uploaded(media, self.parse(response, "upload media").get("id"))

    async def publish(self, post: Post, media: Sequence[MediaRef], *, key: str) -> Published:
        self.check_post(post, media)
        form = {"message": post.text}
        for index, item in enumerate(media):
            form[f"attached_media[{index}]"] = json.dumps({"media_fbid": item.id})
        response = await self.send(
            "POST",
            self.graph(f"{self.account.ref}/feed"),
            operation="publish",
            key=key,
            headers=self._auth(),
            data=form,
        )
        post_id = self.parse(response, "publish").get("id")
        if not isinstance(post_id, str):
            raise self.malformed("publish", "the post id")
        return Published(
            platform=self.platform, post_id=post_id, url=f"https://www.facebook.com/{post_id}"
        )

    async def find_published(
        self, post: Post, media: Sequence[MediaRef], *, key: str, within: float
    ) -> Published | None:
        response = await self.send(
            "GET",
            self.graph(f"{self.account.ref}/published_posts"),
            operation="look up post",
            headers=self._auth(),
            params={
                "fields": "id,message,created_time,permalink_url,attachments{target{id}}",
                "limit": "25",
            },
        )
        now = ratelimit.platform_now(response.headers, self._clock)
        entries = self.parse(response, "look up post").get("data")
        wanted_media = {item.id for item in media}
        wanted_text = normalise_text(post.text)
        for entry in self.recent(entries, "created_time", now, within):
            if normalise_text(str(entry.get("message") or "")) != wanted_text:
                continue
            if set(_targets(entry.get("attachments"))) != wanted_media:
                continue
            post_id = str(entry.get("id"))
            url = entry.get("permalink_url")
            return Published(
                platform=self.platform,
                post_id=post_id,
                url=url if isinstance(url, str) else f"https://www.facebook.com/{post_id}",
                recovered=True,
            )
        return None

    async def revoke(self) -> Revoked:
        user_id = self.account.options.get("user_id")
        if not user_id or "user_access_token" not in self.account.secrets:
            return Revoked(
                remote=False,
                detail="no user id and user token stored: remove the app in the user's "
                "Facebook settings (a page token has no revoke call of its own)",
            )
        await self.send(
            "DELETE",
            self.graph(f"{user_id}/permissions"),
            operation="revoke",
            headers=self._auth("user_access_token"),
        )
        return Revoked(remote=True, detail="the app's permissions were removed for the user")


def _targets(attachments: object) -> Iterator[str]:
    """Ids of the objects a post's attachments point at (photos), nested ones included."""
    if not isinstance(attachments, dict):
        return
    for item in attachments.get("data") or []:
        if not isinstance(item, dict):
            continue
        target = item.get("target")
        if isinstance(target, dict) and target.get("id") is not None:
            yield str(target["id"])
        yield from _targets(item.get("subattachments"))
