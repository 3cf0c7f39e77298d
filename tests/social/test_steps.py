"""The three steps end to end: each post appears exactly once, whatever fails in between."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import replace

import httpx
import pytest

from herald.social.adapters import Account, MediaRef, Published, adapter_for
from herald.social.errors import Disposition, SocialError
from herald.social.media import MediaFetcher, MediaLimits, MediaRejected
from herald.social.sandbox import Sandbox, SandboxConfig
from herald.social.simulator import FailureSimulator, FaultPlan, FaultProfile
from herald.social.steps import StepKeys, check_auth, lookup_needed, prepare_media, publish
from tests.social.support import post

PLATFORMS = ("mastodon", "bluesky", "facebook", "webhook")


async def test_when_a_lookup_is_needed(http: httpx.AsyncClient) -> None:
    mastodon, bluesky, facebook, webhook = (
        adapter_for(Account(p, "http://127.0.0.1:1", "x", {}), http) for p in PLATFORMS
    )
    assert not lookup_needed(facebook, None)  # first try
    assert lookup_needed(facebook, 1.0)  # Graph has no idempotency key
    assert not lookup_needed(mastodon, 600.0)  # inside Mastodon's hour
    assert lookup_needed(mastodon, 3400.0)  # near its end
    assert not lookup_needed(bluesky, 10 * 86400.0)  # record keys last
    assert not lookup_needed(webhook, 10 * 86400.0)  # so do webhook ids


async def test_media_limits_are_narrowed_to_the_platforms(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    adapter = adapter_for(sandbox.account("bluesky"), http)
    async with MediaFetcher(MediaLimits()) as fetcher:
        with pytest.raises(MediaRejected, match="over the limit of 1000000 bytes"):
            await prepare_media(adapter, fetcher, sandbox.media_url(size=1_500_000), key="m")
        ref = await prepare_media(adapter, fetcher, sandbox.media_url(size=50_000), key="m")
    assert ref.platform == "bluesky" and ref.size > 40_000


async def test_mastodon_after_its_key_window_is_saved_by_the_lookup(
    sandbox_factory: Callable[..., Sandbox], http: httpx.AsyncClient
) -> None:
    sandbox = sandbox_factory(SandboxConfig(idempotency_ttl=0.2))
    adapter = adapter_for(sandbox.account("mastodon"), http)
    item = post("an hour later")
    await adapter.publish(item, [], key="p")
    await asyncio.sleep(0.3)  # the platform forgot the key
    again = await publish(adapter, item, [], key="p", since_first_try=3600.0)
    assert again.recovered and len(sandbox.posts("mastodon")) == 1


async def run_job(
    account: Account,
    transport: httpx.AsyncBaseTransport,
    fetcher: MediaFetcher,
    job: str,
    media_url: str,
) -> tuple[Published, int]:
    """One job as the worker will run it: steps checkpointed, every failure retried."""
    item = post(f"job {job}: exactly once, whatever happens")
    keys = StepKeys.for_job(job)
    checkpoints: dict[str, object] = {}
    publish_started: float | None = None
    attempts = 0
    while "published" not in checkpoints:
        attempts += 1
        assert attempts < 60, f"job {job} never finished"
        async with httpx.AsyncClient(transport=transport) as http:
            adapter = adapter_for(account, http)
            try:
                if "auth" not in checkpoints:
                    checkpoints["auth"] = await check_auth(adapter)
                if "media" not in checkpoints:
                    checkpoints["media"] = await prepare_media(
                        adapter, fetcher, media_url, key=keys.media
                    )
                if publish_started is None:
                    publish_started = time.monotonic()  # checkpointed before the first try
                    since = None
                else:
                    since = time.monotonic() - publish_started
                media = checkpoints["media"]
                assert isinstance(media, MediaRef)
                checkpoints["published"] = await publish(
                    adapter, item, [media], key=keys.publish, since_first_try=since
                )
            except SocialError as error:
                assert error.disposition in (Disposition.RETRY, Disposition.SNOOZE), error.report()
            finally:
                # A renewed session is stored with the account, as the worker will.
                account = replace(account, secrets={**account.secrets, **adapter.updated_secrets()})
    result = checkpoints["published"]
    assert isinstance(result, Published)
    return result, attempts


@pytest.mark.slow
@pytest.mark.parametrize("platform", PLATFORMS)
async def test_every_post_appears_exactly_once_under_faults(
    sandbox: Sandbox, platform: str
) -> None:
    plan = FaultPlan(seed=2024, profiles={"*": FaultProfile.transient(0.35, retry_after=0.0)})
    transport = FailureSimulator(httpx.AsyncHTTPTransport(), plan, environ={})
    account = sandbox.account(platform)
    jobs = 12
    async with MediaFetcher(MediaLimits()) as fetcher:
        results = [
            await run_job(
                account,
                transport,
                fetcher,
                f"{platform}-{n}",
                sandbox.media_url(f"p{n}.png", size=3000),
            )
            for n in range(jobs)
        ]
    await transport.aclose()
    name = sandbox.state.by_name(platform, account.ref) or sandbox.state.account(
        platform, account.ref
    )
    assert name is not None
    counts = sandbox.counts()["accounts"][platform][name.name]
    assert counts["posts"] == jobs and counts["duplicates"] == 0
    assert len({r.post_id for r, _ in results}) == jobs
    assert sum(transport.injected.values()) >= 5  # faults really happened
    assert sum(attempts for _, attempts in results) > jobs
