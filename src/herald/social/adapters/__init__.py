"""Platform adapters: one class per platform behind one interface (:class:`Adapter`).

Place in the pipeline (auth check -> media -> publish, each step checkpointed): the
worker builds an adapter per job with :func:`adapter_for` from the account (credentials
decrypted into secrets) and its shared HTTP client, then runs the steps of
:mod:`herald.social.steps` with it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx

from herald.social.adapters.base import (
    DEFAULT_TIMEOUT,
    PLATFORMS,
    Account,
    AccountInfo,
    Adapter,
    Capabilities,
    MediaRef,
    Post,
    Published,
    Revoked,
    operation_key,
)
from herald.social.adapters.bluesky import BlueskyAdapter
from herald.social.adapters.facebook import FacebookAdapter
from herald.social.adapters.mastodon import MastodonAdapter
from herald.social.adapters.webhook import WebhookAdapter

ADAPTERS: dict[str, type[Adapter]] = {
    "mastodon": MastodonAdapter,
    "bluesky": BlueskyAdapter,
    "facebook": FacebookAdapter,
    "webhook": WebhookAdapter,
}


def adapter_for(
    account: Account,
    http: httpx.AsyncClient,
    *,
    clock: Callable[[], float] = time.time,
    timeout: httpx.Timeout = DEFAULT_TIMEOUT,
) -> Adapter:
    return ADAPTERS[account.platform](account, http, clock=clock, timeout=timeout)


__all__ = [
    "ADAPTERS",
    "PLATFORMS",
    "Account",
    "AccountInfo",
    "Adapter",
    "BlueskyAdapter",
    "Capabilities",
    "FacebookAdapter",
    "MastodonAdapter",
    "MediaRef",
    "Post",
    "Published",
    "Revoked",
    "WebhookAdapter",
    "adapter_for",
    "operation_key",
]
