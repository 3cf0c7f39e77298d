"""The Mastodon adapter against the sandbox over real loopback HTTP."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import replace

import httpx
import pytest

from herald.errors import Snooze
from herald.ops.secrets import Secret
from herald.social.adapters import MastodonAdapter, adapter_for
from herald.social.errors import (
    InvalidPost,
    NotReady,
    PermanentError,
    RateLimited,
    ReauthRequired,
    TransientError,
    to_job_outcome,
)
from herald.social.media import FetchedMedia
from herald.social.sandbox import Quota, Sandbox, SandboxConfig
from herald.social.sandbox.mediahost import sample_png
from tests.social.support import leaks, post


def png() -> FetchedMedia:
    return FetchedMedia.from_bytes(sample_png(3000), "image/png", source_url="http://x/a.png")


async def test_happy_path_verify_upload_publish(sandbox: Sandbox, http: httpx.AsyncClient) -> None:
    account = sandbox.account("mastodon", "alice")
    adapter = adapter_for(account, http)
    info = await adapter.verify()
    assert (info.account_id, info.name) == (account.ref, "alice")
    with png() as media:
        ref = await adapter.upload_media(media, key="k-media", description="a square of noise")
    assert not ref.pending and ref.sha256 == media.sha256
    published = await adapter.publish(post("first post"), [ref], key="k-publish")
    assert published.url and published.url.endswith(published.post_id) and not published.recovered
    [stored] = sandbox.posts("mastodon")
    assert stored["text"] == "first post" and stored["media"] == [ref.sha256]
    assert adapter.rate is not None and adapter.rate.limit == 300


async def test_the_idempotency_key_gives_one_status(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    adapter = adapter_for(sandbox.account("mastodon"), http)
    item = post("only once")
    results = await asyncio.gather(*(adapter.publish(item, [], key="same") for _ in range(20)))
    assert len({r.post_id for r in results}) == 1
    await adapter.publish(item, [], key="another")
    counts = sandbox.counts()["accounts"]["mastodon"]["mastodon-1"]
    assert counts["posts"] == 2 and counts["duplicates"] == 1  # the second key is a new post


async def test_media_still_processing_is_waited_for_then_snoozed(
    sandbox_factory: Callable[..., Sandbox], http: httpx.AsyncClient
) -> None:
    sandbox = sandbox_factory(SandboxConfig(media_processing=0.6))
    adapter = adapter_for(sandbox.account("mastodon"), http)
    assert isinstance(adapter, MastodonAdapter)
    with png() as media:
        ref = await adapter.upload_media(media, key="m")
    assert ref.pending
    published = await adapter.publish(post(), [ref], key="p")  # polls 206 until 200
    assert published.post_id
    with png() as media:
        slow = await adapter.upload_media(media, key="m2")
    adapter.media_wait = 0.1
    with pytest.raises(NotReady) as info:
        await adapter.publish(post(), [slow], key="p2")
    outcome = to_job_outcome(info.value)
    assert isinstance(outcome, Snooze) and outcome.seconds > 0


async def test_invalid_token_needs_reauthorisation_and_never_leaks(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    account = sandbox.account("mastodon")
    bad = replace(account, secrets={"access_token": Secret("not-the-right-token-0123")})
    with pytest.raises(ReauthRequired) as info:
        await adapter_for(bad, http).verify()
    assert info.value.status == 401
    assert "The access token is invalid" in str(info.value)
    assert leaks(info.value, bad) == []


async def test_validation_errors_are_permanent_with_the_body_kept(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    account = sandbox.account("mastodon")
    adapter = adapter_for(account, http)
    with pytest.raises(InvalidPost, match="limit of 500"):
        await adapter.publish(post("x" * 501), [], key="k")  # refused before any call
    lenient = adapter_for(replace(account, options={"max_characters": "1000"}), http)
    with pytest.raises(PermanentError) as info:
        await lenient.publish(post("x" * 501), [], key="k")
    assert info.value.status == 422
    assert info.value.body == '{"error":"Validation failed: Text character limit of 500 exceeded"}'
    assert sandbox.posts() == []


async def test_rate_limit_snoozes_until_the_reset(
    sandbox_factory: Callable[..., Sandbox], http: httpx.AsyncClient
) -> None:
    config = SandboxConfig()
    config.quotas["mastodon"]["requests"] = Quota(3, 60.0)
    sandbox = sandbox_factory(config)
    adapter = adapter_for(sandbox.account("mastodon"), http)
    await adapter.verify()
    await adapter.verify()
    assert adapter.rate is not None and adapter.rate.remaining == 1
    assert adapter.pacing is not None  # one call left: slow down
    await adapter.verify()
    with pytest.raises(RateLimited) as info:
        await adapter.verify()
    assert info.value.status == 429 and info.value.delay is not None and 1 <= info.value.delay <= 61
    quotas = sandbox.counts()["accounts"]["mastodon"]["mastodon-1"]["quotas"]["requests"]
    assert quotas["peak"] == 4 and quotas["rejected"] == 1


async def test_lookup_finds_the_post_an_earlier_attempt_made(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    adapter = adapter_for(sandbox.account("mastodon"), http)
    with png() as media:
        ref = await adapter.upload_media(media, key="m")
    text_post, media_post = post("a <b>text</b> & line\nbreak"), post("with media")
    first = await adapter.publish(text_post, [], key="t")
    second = await adapter.publish(media_post, [ref], key="m")
    found_text = await adapter.find_published(text_post, [], key="t", within=600)
    found_media = await adapter.find_published(media_post, [ref], key="m", within=600)
    assert found_text is not None and found_text.post_id == first.post_id and found_text.recovered
    assert found_media is not None and found_media.post_id == second.post_id
    assert await adapter.find_published(post("never posted"), [], key="n", within=600) is None


async def test_revoke(sandbox: Sandbox, http: httpx.AsyncClient) -> None:
    account = sandbox.account("mastodon")
    adapter = adapter_for(account, http)
    revoked = await adapter.revoke()
    assert revoked.remote
    with pytest.raises(ReauthRequired):
        await adapter.verify()
    without_client = replace(account, secrets={"access_token": account.secrets["access_token"]})
    assert not (await adapter_for(without_client, http).revoke()).remote


async def test_an_unreachable_instance_is_transient(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    account = replace(sandbox.account("mastodon"), base_url="http://127.0.0.1:9")
    with pytest.raises(TransientError, match="connection failed"):
        await adapter_for(account, http).verify()
