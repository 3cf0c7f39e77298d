"""What the social jobs of one application share in a process: settings, keys, HTTP.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): every
step asks the runtime for the platform HTTP client of its event loop - one connection
pool per loop, so connections are reused across jobs - built as
``QuotaTransport(FailureSimulator(real transport))``: each request takes a token of its
account's bucket, then meets the injected faults when ``HERALD_SOCIAL_FAULTS`` asks for
them (refused at start-up when ``HERALD_ENV=production``).
"""

from __future__ import annotations

import asyncio
import os
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx

from herald.config import Settings
from herald.context import JobContext
from herald.ops.crypto import TokenCipher
from herald.registry import Herald
from herald.social.accounts import decrypt_account
from herald.social.adapters.base import Account
from herald.social.config import SocialSettings
from herald.social.guards import Gate, QuotaTransport
from herald.social.media import MediaFetcher, MediaLimits
from herald.social.meters import MeteredTransport, SocialMeters
from herald.social.simulator import FailureSimulator, FaultPlan
from herald.social.tracing import TracingTransport

# The platform clients of a loop: several small connection pools rather than one big
# one, since the HTTP client scans every connection of its pool on each request (that
# scan cost more than the request itself with a hundred connections open). Together
# they keep enough connections for a worker's concurrency against a few hosts.
HTTP_SHARDS = 8
HTTP_LIMITS = httpx.Limits(max_connections=25, max_keepalive_connections=12)
# Decrypted accounts kept per process (the cache starts again when full).
ACCOUNTS_CACHED = 1000


@dataclass
class Attempt:
    """What the steps of one attempt of a ``social.post`` job share."""

    # The post and its account as the attempt's start read them (social_post_start);
    # None: an earlier job published the post already.
    row: dict[str, Any] | None
    # The verdict of the start's gate, and the token taken with it: for the attempt's
    # first platform call, which then asks the database for neither.
    gate: Gate | None = None
    prepaid: int = 0


@dataclass
class SocialRuntime:
    settings: Settings
    social: SocialSettings
    environ: Mapping[str, str] | None = None
    _cipher: TokenCipher | None = None
    _http: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[httpx.AsyncClient]] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    _media: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, MediaFetcher] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    faults: FaultPlan | None = None
    # What one attempt's steps share (its post and account rows), gone with the attempt.
    attempts: weakref.WeakKeyDictionary[JobContext, Attempt] = field(
        default_factory=weakref.WeakKeyDictionary
    )
    # This process's figures for /metrics (herald.social.meters).
    meters: SocialMeters = field(default_factory=SocialMeters)
    # Decrypted accounts by (account id, ciphertext): a new ciphertext (renewed, rotated,
    # revoked) is a new entry, so nothing stale is ever used; bounded.
    _accounts: dict[tuple[int, str], Account] = field(default_factory=dict)

    def __post_init__(self) -> None:
        env = os.environ if self.environ is None else self.environ
        self.faults = FaultPlan.from_env(env)
        # Refuses a fault plan in production now, at start-up, not at the first post.
        self._transport(httpx.AsyncHTTPTransport())

    @property
    def cipher(self) -> TokenCipher:
        if self._cipher is None:
            self._cipher = TokenCipher.from_env(self.environ)
        return self._cipher

    def reload_keys(self) -> None:
        """Read ``HERALD_TOKEN_KEYS`` again (after a key was added in front)."""
        self._cipher = None
        self._accounts.clear()

    def account(self, row: Mapping[str, Any]) -> Account:
        """The adapter's view of an account row, its credentials decrypted (once per
        ciphertext: decryption is the costliest part of starting a post's attempt)."""
        ciphertext = row["credentials"]
        if ciphertext is None:
            return decrypt_account(self.cipher, row)  # raises: revoked
        key = (int(row["id"]), str(ciphertext))
        account = self._accounts.get(key)
        if account is None:
            account = decrypt_account(self.cipher, row)
            if len(self._accounts) >= ACCOUNTS_CACHED:
                self._accounts.clear()
            self._accounts[key] = account
        return account

    @property
    def job_namespace(self) -> str:
        """Qualifies post ids in idempotency keys: unique per installation and schema."""
        return f"herald:{self.settings.schema}"

    def _transport(self, inner: httpx.AsyncBaseTransport) -> httpx.AsyncBaseTransport:
        if self.faults is not None and self.faults.active:
            inner = FailureSimulator(inner, self.faults, environ=self.environ)
        return QuotaTransport(TracingTransport(MeteredTransport(inner, self.meters)))

    def http(self, shard: int = 0) -> httpx.AsyncClient:
        """A platform client of the running event loop (``shard``: any number, e.g. the
        post's id, spreads the calls over the loop's clients)."""
        loop = asyncio.get_running_loop()
        clients = self._http.get(loop)
        if clients is None:
            clients = [
                httpx.AsyncClient(
                    transport=self._transport(httpx.AsyncHTTPTransport(limits=HTTP_LIMITS))
                )
                for _ in range(HTTP_SHARDS)
            ]
            self._http[loop] = clients
        return clients[shard % HTTP_SHARDS]

    def media(self) -> MediaFetcher:
        loop = asyncio.get_running_loop()
        fetcher = self._media.get(loop)
        if fetcher is None:
            fetcher = MediaFetcher(MediaLimits.from_env(self.environ))
            self._media[loop] = fetcher
        return fetcher

    async def aclose(self) -> None:
        """Close this loop's clients (tests, the demo; workers keep theirs to the end)."""
        loop = asyncio.get_running_loop()
        for client in self._http.pop(loop, []):
            await client.aclose()
        fetcher = self._media.pop(loop, None)
        if fetcher is not None:
            await fetcher.aclose()


_RUNTIMES: weakref.WeakKeyDictionary[Herald, SocialRuntime] = weakref.WeakKeyDictionary()


def social_runtime(app: Herald) -> SocialRuntime:
    """The runtime :func:`herald.social.pipeline.register_social` attached to ``app``."""
    try:
        return _RUNTIMES[app]
    except KeyError:
        raise LookupError("the social kinds are not registered on this application") from None


def attach_runtime(app: Herald, runtime: SocialRuntime) -> None:
    if app in _RUNTIMES:
        raise ValueError("the social kinds are already registered on this application")
    _RUNTIMES[app] = runtime
