"""The sandbox's memory: accounts, credentials, posts, media, idempotency keys and quotas.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): the
sandbox stands in for the platforms each step calls. This module records every post it
accepts with a fingerprint of its content, so a test, the demo or a benchmark can count
duplicates, and every request per account per rate window, so a proof can check no
window ever saw more requests than the platform allows.

One lock guards everything: handlers run on the server's event loop while tests read
and add accounts from their own thread.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from herald.ops.secrets import Secret
from herald.social.adapters.base import Account


@dataclass(frozen=True)
class Quota:
    """At most ``requests`` per account in each fixed window of ``window`` seconds."""

    requests: int
    window: float

    def __post_init__(self) -> None:
        if self.requests <= 0 or self.window <= 0:
            raise ValueError("a quota needs a positive number of requests and window")


# Documented defaults. Mastodon: 300 calls per 5 minutes per account, media uploads 30
# per 30 minutes. Bluesky: 3000 per 5 minutes, sessions 30 per 5 minutes. Facebook
# pages: 4800 calls per day per engaged user (one here).
DEFAULT_QUOTAS: dict[str, dict[str, Quota]] = {
    "mastodon": {"requests": Quota(300, 300.0), "media": Quota(30, 1800.0)},
    "bluesky": {"requests": Quota(3000, 300.0), "session": Quota(30, 300.0)},
    "facebook": {"requests": Quota(4800, 86400.0)},
    "webhook": {},
}


@dataclass
class SandboxConfig:
    quotas: dict[str, dict[str, Quota]] = field(
        default_factory=lambda: {p: dict(q) for p, q in DEFAULT_QUOTAS.items()}
    )
    # Seconds added before every platform answer (admin calls excepted).
    latency: float = 0.0
    # Mastodon: seconds a media upload stays "processing" (0: processed at once, 200).
    media_processing: float = 0.0
    # Bluesky: lifetime of an access token (the refresh token lives 90 days).
    access_ttl: float = 7200.0
    # Mastodon: how long an Idempotency-Key is remembered.
    idempotency_ttl: float = 3600.0
    # Facebook: refuse a post repeating the page's previous message (Graph's #506).
    # Off by default so duplicate counts measure the client, not this guard.
    facebook_duplicate_guard: bool = False

    def quota(self, platform: str, bucket: str) -> Quota | None:
        return self.quotas.get(platform, {}).get(bucket)


@dataclass
class SandboxAccount:
    platform: str
    id: str
    name: str
    credentials: dict[str, str]
    # Platform specifics: Mastodon's app client, Facebook's user id, ...
    info: dict[str, str] = field(default_factory=dict)

    def account(self, base_url: str) -> Account:
        """The :class:`Account` an adapter needs to reach this sandbox account."""
        ref = {"mastodon": self.id, "facebook": self.id, "bluesky": self.name}.get(
            self.platform, self.name
        )
        url = base_url.rstrip("/")
        if self.platform == "webhook":
            url += f"/webhooks/{self.id}"
        options = {"user_id": self.info["user_id"]} if "user_id" in self.info else {}
        return Account(
            platform=self.platform,
            base_url=url,
            ref=ref,
            secrets={k: Secret(v) for k, v in self.credentials.items()},
            options=options,
        )


@dataclass
class PostRecord:
    platform: str
    account_id: str
    post_id: str
    text: str
    media: list[str]
    key: str | None
    created_at: float
    fingerprint: str
    extra: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "platform": self.platform,
            "account": self.account_id,
            "id": self.post_id,
            "text": self.text,
            "media": self.media,
            "key": self.key,
            "created_at": self.created_at,
        }


@dataclass
class MediaRecord:
    platform: str
    account_id: str
    media_id: str
    content_type: str
    size: int
    sha256: str
    created_at: float
    ready_at: float
    attached_to: str | None = None


@dataclass
class _Window:
    start: float = -1.0
    count: int = 0
    peak: int = 0
    rejected: int = 0


def token(prefix: str = "", size: int = 32) -> str:
    """A random credential; with a prefix (Facebook's ``EAA...``) letters and digits only."""
    return prefix + (secrets.token_hex(size) if prefix else secrets.token_urlsafe(size))


def fingerprint(text: str, media: list[str]) -> str:
    return hashlib.sha256("\x00".join([text, *media]).encode()).hexdigest()


class SandboxState:
    def __init__(self, config: SandboxConfig, clock: Callable[[], float] = time.time) -> None:
        self.config = config
        self.clock = clock
        self.lock = threading.RLock()
        self.accounts: dict[tuple[str, str], SandboxAccount] = {}
        # (platform, token) -> (account id, expires at or None)
        self.tokens: dict[tuple[str, str], tuple[str, float | None]] = {}
        self.posts: list[PostRecord] = []
        # Indexes of ``posts``: a benchmark records tens of thousands.
        self._post_ids: dict[tuple[str, str], PostRecord] = {}
        self._account_posts: dict[tuple[str, str], list[PostRecord]] = {}
        self.media: dict[tuple[str, str], MediaRecord] = {}
        # (platform, account, key) -> (post id, remembered until)
        self.keys: dict[tuple[str, str, str], tuple[str, float]] = {}
        self.windows: dict[tuple[str, str, str], _Window] = {}
        self.requests: dict[str, int] = {}
        self._ids = itertools.count(100_000_000_000_000_000)

    def next_id(self) -> str:
        with self.lock:
            return str(next(self._ids))

    # --- accounts and credentials -------------------------------------------------------

    def add_account(self, platform: str, name: str | None = None) -> SandboxAccount:
        with self.lock:
            number = sum(1 for p, _ in self.accounts if p == platform) + 1
            name = name or f"{platform}-{number}"
            if any(a.name == name for (p, _), a in self.accounts.items() if p == platform):
                raise ValueError(f"the sandbox already has a {platform} account {name!r}")
            account = _new_account(platform, name, self.next_id())
            self.accounts[(platform, account.id)] = account
            for kind in ("access_token", "page_access_token", "user_access_token"):
                if kind in account.credentials:
                    owner = account.id if kind != "user_access_token" else account.info["user_id"]
                    self.tokens[(platform, account.credentials[kind])] = (owner, None)
            return account

    def account(self, platform: str, account_id: str) -> SandboxAccount | None:
        with self.lock:
            return self.accounts.get((platform, account_id))

    def by_name(self, platform: str, name: str) -> SandboxAccount | None:
        with self.lock:
            for (p, _), account in self.accounts.items():
                if p == platform and name in (account.name, account.id):
                    return account
            return None

    def issue(self, platform: str, owner: str, prefix: str = "", ttl: float | None = None) -> str:
        value = token(prefix)
        with self.lock:
            expires = None if ttl is None else self.clock() + ttl
            self.tokens[(platform, value)] = (owner, expires)
        return value

    def owner(self, platform: str, value: str) -> tuple[str | None, bool]:
        """(owner of the token, expired?); owner None for an unknown token."""
        with self.lock:
            found = self.tokens.get((platform, value))
        if found is None:
            return None, False
        owner, expires = found
        return owner, expires is not None and expires <= self.clock()

    def revoke(self, platform: str, value: str) -> bool:
        with self.lock:
            return self.tokens.pop((platform, value), None) is not None

    def revoke_owner(self, platform: str, owner: str) -> int:
        with self.lock:
            doomed = [k for k, (o, _) in self.tokens.items() if k[0] == platform and o == owner]
            for k in doomed:
                del self.tokens[k]
            return len(doomed)

    # --- quotas -------------------------------------------------------------------------

    def admit(self, platform: str, account: str, bucket: str = "requests") -> dict[str, Any] | None:
        """Count a request; ``None`` when the platform has no such quota.

        Returns the quota state: ``allowed``, ``limit``, ``remaining``, ``reset`` (epoch),
        ``window``. Windows are fixed and aligned to multiples of their length, as
        Mastodon's are.
        """
        quota = self.config.quota(platform, bucket)
        with self.lock:
            self.requests[platform] = self.requests.get(platform, 0) + 1
            if quota is None:
                return None
            now = self.clock()
            start = now - (now % quota.window)
            window = self.windows.setdefault((platform, account, bucket), _Window())
            if window.start != start:
                window.start, window.count = start, 0
            window.count += 1
            window.peak = max(window.peak, window.count)
            allowed = window.count <= quota.requests
            if not allowed:
                window.rejected += 1
            return {
                "allowed": allowed,
                "limit": quota.requests,
                "remaining": max(0, quota.requests - window.count),
                "reset": start + quota.window,
                "window": quota.window,
            }

    # --- posts --------------------------------------------------------------------------

    def remembered(self, platform: str, account: str, key: str) -> str | None:
        with self.lock:
            found = self.keys.get((platform, account, key))
            if found is None or found[1] <= self.clock():
                return None
            return found[0]

    def add_post(
        self,
        platform: str,
        account_id: str,
        post_id: str,
        text: str,
        media: list[str],
        *,
        key: str | None = None,
        key_ttl: float | None = None,
        **extra: Any,
    ) -> PostRecord:
        """Record an accepted post (``media``: the SHA-256 of each attached file)."""
        post = PostRecord(
            platform=platform,
            account_id=account_id,
            post_id=post_id,
            text=text,
            media=media,
            key=key,
            created_at=self.clock(),
            fingerprint=fingerprint(text, media),
            extra=extra,
        )
        with self.lock:
            self.posts.append(post)
            self._post_ids[(platform, post_id)] = post
            self._account_posts.setdefault((platform, account_id), []).append(post)
            if key is not None and key_ttl is not None:
                self.keys[(platform, account_id, key)] = (
                    post.post_id,
                    self.clock() + key_ttl,
                )
            return post

    def find_post(self, platform: str, post_id: str) -> PostRecord | None:
        with self.lock:
            return self._post_ids.get((platform, post_id))

    def posts_of(self, platform: str, account: str) -> list[PostRecord]:
        with self.lock:
            return list(self._account_posts.get((platform, account), []))

    # --- what the admin endpoint shows ----------------------------------------------------

    def counts(self) -> dict[str, Any]:
        with self.lock:
            result: dict[str, Any] = {}
            for (platform, account_id), account in self.accounts.items():
                posts = self._account_posts.get((platform, account_id), [])
                distinct = len({p.fingerprint for p in posts})
                windows = {
                    bucket: {
                        "limit": q.requests,
                        "window": q.window,
                        "peak": w.peak,
                        "rejected": w.rejected,
                    }
                    for (p, a, bucket), w in self.windows.items()
                    if p == platform and a == account_id
                    for q in [self.config.quota(platform, bucket)]
                    if q is not None
                }
                result.setdefault(platform, {})[account.name] = {
                    "id": account_id,
                    "posts": len(posts),
                    "distinct": distinct,
                    "duplicates": len(posts) - distinct,
                    "quotas": windows,
                }
            return {"accounts": result, "requests": dict(self.requests)}

    def reset(self) -> None:
        with self.lock:
            self.posts.clear()
            self._post_ids.clear()
            self._account_posts.clear()
            self.media.clear()
            self.keys.clear()
            self.windows.clear()
            self.requests.clear()


def _new_account(platform: str, name: str, number: str) -> SandboxAccount:
    if platform == "mastodon":
        return SandboxAccount(
            platform,
            number,
            name,
            {
                "access_token": token(),
                "client_id": token(size=24),
                "client_secret": token(size=24),
            },
        )
    if platform == "bluesky":
        did = (
            "did:plc:"
            + base64.b32encode(hashlib.sha256(number.encode()).digest()).decode()[:24].lower()
        )
        handle = f"{name}.sandbox.test"
        password = "-".join(secrets.token_hex(2) for _ in range(4))
        return SandboxAccount(platform, did, handle, {"app_password": password})
    if platform == "facebook":
        user_id = str(int(number) + 7)
        return SandboxAccount(
            platform,
            number,
            name,
            {"page_access_token": token("EAAS", 40), "user_access_token": token("EAAU", 40)},
            {"user_id": user_id},
        )
    if platform == "webhook":
        secret = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
        return SandboxAccount(platform, number, name, {"signing_secret": secret})
    raise ValueError(f"the sandbox has no platform {platform!r}")
