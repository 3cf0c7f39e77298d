"""The adapter interface every platform implements, its data types and shared HTTP plumbing.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): the
auth-check step calls :meth:`Adapter.verify`, the media step :meth:`Adapter.upload_media`
(after :mod:`herald.social.media` fetched the file), the publish step
:meth:`Adapter.publish` - or first :meth:`Adapter.find_published` when an earlier attempt
may already have created the post (see :mod:`herald.social.steps`). Disconnecting an
account calls :meth:`Adapter.revoke`. What each returns is JSON-able for checkpoints.

An adapter is bound to one account and one shared :class:`httpx.AsyncClient` (whose
transport a worker may wrap in the failure simulator). Every request names its platform
and idempotency key in the request's extensions (``herald.platform``, ``herald.key``)
so transport wrappers can see them without parsing bodies.
"""

from __future__ import annotations

import abc
import hashlib
import json
import math
import re
import time
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, ClassVar

import httpx

from herald.ops.secrets import Redactor, Secret
from herald.social import ratelimit
from herald.social.errors import (
    InvalidPost,
    PermanentError,
    SocialError,
    TransientError,
    classify,
)
from herald.social.media import FetchedMedia
from herald.social.ratelimit import Headers, RateInfo, SlowDown

PLATFORMS = ("mastodon", "bluesky", "facebook", "webhook")
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=10.0)


def operation_key(job_ref: str, step: str) -> str:
    """The idempotency key of one step of one job: stable across attempts and workers.

    ``job_ref`` must be unique across every Herald installation posting to the same
    account (use the job's id qualified by the installation, e.g. ``"<schema>:<id>"``).
    """
    if not job_ref or not step:
        raise ValueError("an operation key needs a job reference and a step name")
    digest = hashlib.sha256(f"herald\x00{job_ref}\x00{step}".encode()).hexdigest()
    return f"herald-{digest[:40]}"


@dataclass(frozen=True)
class Account:
    """One linked account: where it lives, who it is, and its credentials.

    ``ref`` is the platform's name for the account: the page id (Facebook), the handle
    or DID (Bluesky), the account id if known (Mastodon, may be empty) or a label
    (webhook). ``base_url`` is the API root, so a self-hosted Mastodon or PDS works.
    """

    platform: str
    base_url: str
    ref: str
    secrets: Mapping[str, Secret]
    options: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.platform not in PLATFORMS:
            raise ValueError(f"unknown platform {self.platform!r} (known: {', '.join(PLATFORMS)})")
        url = httpx.URL(self.base_url)
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"base_url must be an http(s) URL, got {self.base_url!r}")
        for name, value in self.secrets.items():
            if not isinstance(value, Secret):
                raise TypeError(f"credential {name!r} must be a Secret")

    def secret(self, name: str) -> Secret:
        try:
            return self.secrets[name]
        except KeyError:
            raise PermanentError(
                f"{self.platform} account {self.ref!r} has no {name!r} credential",
                platform=self.platform,
                operation="configure",
            ) from None


@dataclass(frozen=True)
class Post:
    """What to publish. ``created_at`` must be stable across attempts (the job's time)."""

    text: str
    created_at: datetime
    media_description: str | None = None
    language: str | None = None

    def __post_init__(self) -> None:
        if self.created_at.tzinfo is None:
            raise ValueError("Post.created_at must be timezone-aware")


@dataclass(frozen=True)
class MediaRef:
    """Media uploaded to a platform, ready (or soon ready) to attach to a post."""

    platform: str
    id: str
    content_type: str
    size: int
    sha256: str
    # Uploaded but still being processed by the platform (Mastodon answered 202).
    pending: bool = False
    # Platform specifics: the Bluesky blob reference, the webhook's source URL.
    data: Mapping[str, str] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "data": dict(self.data)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MediaRef:
        return cls(**{**data, "data": dict(data.get("data") or {})})


@dataclass(frozen=True)
class Published:
    """A post that exists on the platform."""

    platform: str
    post_id: str
    url: str | None
    # True when this call found the post an earlier attempt created instead of creating it.
    recovered: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Published:
        return cls(**data)


@dataclass(frozen=True)
class AccountInfo:
    platform: str
    account_id: str
    name: str
    url: str | None = None


@dataclass(frozen=True)
class Revoked:
    """``remote`` False: the platform has no revoke call usable with what we hold."""

    remote: bool
    detail: str


@dataclass(frozen=True)
class Capabilities:
    """What a platform offers, and how a retried create is made safe on it.

    ``dedupe_window``: seconds during which the platform itself refuses to create a
    second object for the same idempotency key (``math.inf``: forever; ``None``: no
    such support). ``lookup``: :meth:`Adapter.find_published` can find a post an
    earlier attempt made.
    """

    dedupe_window: float | None
    lookup: bool
    max_text: int
    media_types: frozenset[str]
    max_media_bytes: int
    max_media: int = 4


class Adapter(abc.ABC):
    """One account on one platform (see the module docstring for the life cycle)."""

    platform: ClassVar[str]

    def __init__(
        self,
        account: Account,
        http: httpx.AsyncClient,
        *,
        clock: Callable[[], float] = time.time,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
    ) -> None:
        if account.platform != self.platform:
            raise ValueError(f"a {self.platform} adapter cannot serve a {account.platform} account")
        self.account = account
        self._http = http
        self._clock = clock
        self._timeout = timeout
        self._redactor = Redactor(account.secrets.values())
        # What the last response said about the quota, and the advice drawn from it.
        self.rate: RateInfo | None = None
        self.pacing: SlowDown | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.account.ref!r} at {self.account.base_url}>"

    # --- the interface ------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def capabilities(self) -> Capabilities: ...

    @abc.abstractmethod
    async def verify(self) -> AccountInfo:
        """Check the credentials work; who the account is."""

    @abc.abstractmethod
    async def upload_media(
        self, media: FetchedMedia, *, key: str, description: str | None = None
    ) -> MediaRef:
        """Upload fetched media for a later :meth:`publish`."""

    @abc.abstractmethod
    async def publish(self, post: Post, media: Sequence[MediaRef], *, key: str) -> Published:
        """Create the post, carrying ``key`` wherever the platform honours one."""

    @abc.abstractmethod
    async def find_published(
        self, post: Post, media: Sequence[MediaRef], *, key: str, within: float
    ) -> Published | None:
        """The post an earlier attempt (at most ``within`` seconds ago) created, if any."""

    @abc.abstractmethod
    async def revoke(self) -> Revoked:
        """Invalidate the credentials at the platform."""

    def updated_secrets(self) -> dict[str, Secret]:
        """Credentials renewed during calls (a refreshed session) to store again."""
        return {}

    def check_post(self, post: Post, media: Sequence[MediaRef]) -> None:
        """Refuse, before any call, a post the platform is documented to reject."""
        caps = self.capabilities
        if not post.text.strip() and not media:
            raise self.invalid("the post has neither text nor media")
        length = count_graphemes(post.text)
        if length > caps.max_text:
            raise self.invalid(
                f"the text is {length} characters, over {self.platform}'s limit of {caps.max_text}"
            )
        if len(media) > caps.max_media:
            raise self.invalid(f"{len(media)} media, over the limit of {caps.max_media}")

    def check_media(self, media: FetchedMedia) -> None:
        caps = self.capabilities
        if media.content_type not in caps.media_types:
            raise self.invalid(
                f"{self.platform} does not accept {media.content_type} media (accepted: "
                f"{', '.join(sorted(caps.media_types))})"
            )
        if media.size > caps.max_media_bytes:
            raise self.invalid(
                f"the media is {media.size} bytes, over {self.platform}'s limit of "
                f"{caps.max_media_bytes} bytes"
            )

    def invalid(self, message: str) -> InvalidPost:
        return InvalidPost(f"{self.platform}: {message}", platform=self.platform, operation="check")

    # --- HTTP plumbing ------------------------------------------------------------------

    def url(self, path: str) -> str:
        return self.account.base_url.rstrip("/") + path

    async def send(
        self,
        method: str,
        url: str,
        *,
        operation: str,
        key: str | None = None,
        ok: Sequence[int] = (),
        **kwargs: Any,
    ) -> httpx.Response:
        """One request; a non-2xx answer (other than those in ``ok``) raises a SocialError."""
        extensions = {"herald.platform": self.platform, "herald.key": key or ""}
        try:
            response = await self._http.request(
                method, url, timeout=self._timeout, extensions=extensions, **kwargs
            )
        except httpx.TimeoutException as exc:
            raise TransientError(
                f"{self.platform} {operation}: no answer in time ({type(exc).__name__})",
                platform=self.platform,
                operation=operation,
            ) from None
        except httpx.TransportError as exc:
            raise TransientError(
                f"{self.platform} {operation}: connection failed or dropped "
                f"({type(exc).__name__}: {self._redactor.text(str(exc))[:200]})",
                platform=self.platform,
                operation=operation,
            ) from None
        now = ratelimit.platform_now(response.headers, self._clock)
        rate = self.read_rate(response.headers, now)
        if rate is not None:
            self.rate = rate
            self.pacing = rate.slow_down()
        if response.is_success or response.status_code in ok:
            return response
        raise self.error(response, operation, now, rate)

    def read_rate(self, headers: Headers, now: float) -> RateInfo | None:
        return ratelimit.ietf(headers, now)

    def error(
        self, response: httpx.Response, operation: str, now: float, rate: RateInfo | None
    ) -> SocialError:
        """Classify an error response (platforms override to read their error codes)."""
        body = json_body(response)
        detail = None
        if body is not None:
            for name in ("message", "error_description", "error"):
                value = body.get(name)
                if isinstance(value, str) and value:
                    detail = value
                    break
        return self.classified(response, operation, now, rate, detail)

    def classified(
        self,
        response: httpx.Response,
        operation: str,
        now: float,
        rate: RateInfo | None,
        detail: str | None,
        code: str | None = None,
    ) -> SocialError:
        """The generic classification (:func:`~herald.social.errors.classify`)."""
        return classify(
            response.status_code,
            response.headers,
            response.content,
            platform=self.platform,
            operation=operation,
            redactor=self._redactor,
            now=now,
            rate=rate,
            detail=detail,
            code=code,
        )

    def parse(self, response: httpx.Response, operation: str) -> dict[str, Any]:
        """The JSON object of a successful response (anything else is a transient fault)."""
        body = json_body(response)
        if body is None:
            raise TransientError(
                f"{self.platform} {operation}: HTTP {response.status_code} without a JSON "
                "object (a proxy's page?)",
                platform=self.platform,
                operation=operation,
                status=response.status_code,
                body=self._redactor.body(response.content),
            )
        return body

    def uploaded(self, media: FetchedMedia, media_id: object, **extra: Any) -> MediaRef:
        """The reference to ``media`` the platform named ``media_id`` (checked)."""
        if not isinstance(media_id, str) or not media_id:
            raise self.malformed("upload media", "the id of the uploaded media")
        return MediaRef(
            platform=self.platform,
            id=media_id,
            content_type=media.content_type,
            size=media.size,
            sha256=media.sha256,
            **extra,
        )

    def recent(
        self, entries: object, created_field: str, now: float, within: float
    ) -> Iterator[dict[str, Any]]:
        """The posts among ``entries`` (a listing) created at most ``within`` s before ``now``."""
        if not isinstance(entries, list):
            raise self.malformed("look up post", "a list of posts")
        for entry in entries:
            if isinstance(entry, dict):
                created = parse_time(entry.get(created_field))
                if created is not None and created >= now - within:
                    yield entry

    def malformed(self, operation: str, what: str) -> TransientError:
        return TransientError(
            f"{self.platform} {operation}: the answer lacks {what}",
            platform=self.platform,
            operation=operation,
        )


def json_body(response: httpx.Response) -> dict[str, Any] | None:
    try:
        value = json.loads(response.content) if response.content else None
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def count_graphemes(text: str) -> int:
    """User-perceived characters, close to Unicode grapheme clusters.

    Combining marks, variation selectors, emoji modifiers and whatever a zero-width
    joiner glues on do not start a new character; a pair of regional indicators (a flag)
    is one. Exact for the text people post; never more than the code point count.
    """
    count = 0
    join_next = False
    pending_flag = False
    for char in text:
        code = ord(char)
        if join_next:
            join_next = False
            continue
        if char == "\u200d":
            join_next = True
            continue
        if (
            unicodedata.combining(char)
            or unicodedata.category(char) in ("Mn", "Me")
            or 0xFE00 <= code <= 0xFE0F
            or 0x1F3FB <= code <= 0x1F3FF
            or 0xE0020 <= code <= 0xE007F
        ):
            continue
        if 0x1F1E6 <= code <= 0x1F1FF:
            if pending_flag:
                pending_flag = False
                continue
            pending_flag = True
        else:
            pending_flag = False
        count += 1
    return count


def utc_iso(moment: datetime) -> str:
    """``2024-05-01T12:00:00.123Z``: the datetime form every platform here accepts."""
    utc = moment.astimezone(UTC)
    return utc.strftime("%Y-%m-%dT%H:%M:%S.") + f"{utc.microsecond // 1000:03d}Z"


def parse_time(raw: object) -> float | None:
    """Seconds since the epoch of an ISO 8601 or Graph (``+0000``) timestamp."""
    if not isinstance(raw, str):
        return None
    text = raw.strip().replace("Z", "+00:00")
    if len(text) > 5 and text[-5] in "+-" and text[-3] != ":":
        text = text[:-2] + ":" + text[-2:]
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo else None


def normalise_text(text: str) -> str:
    """Whitespace collapsed: how two renderings of the same post text are compared."""
    return re.sub(r"\s+", " ", text).strip()


FOREVER = math.inf
