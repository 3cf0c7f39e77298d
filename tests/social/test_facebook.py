"""The Facebook Pages adapter against the sandbox Graph API over real loopback HTTP."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import httpx
import pytest

from herald.ops.secrets import Secret
from herald.social.adapters import adapter_for
from herald.social.errors import PermanentError, RateLimited, ReauthRequired, TransientError
from herald.social.media import FetchedMedia
from herald.social.sandbox import Quota, Sandbox, SandboxConfig
from herald.social.sandbox.mediahost import sample_png
from herald.social.simulator import FailureSimulator, FaultPlan, FaultProfile
from herald.social.steps import publish
from tests.social.support import leaks, post


async def test_happy_path_photo_then_feed_post(sandbox: Sandbox, http: httpx.AsyncClient) -> None:
    account = sandbox.account("facebook", "Bakery")
    adapter = adapter_for(account, http)
    info = await adapter.verify()
    assert (info.account_id, info.name) == (account.ref, "Bakery")
    with FetchedMedia.from_bytes(sample_png(5000), "image/png") as media:
        photo = await adapter.upload_media(media, key="m", description="bread")
    assert sandbox.posts("facebook") == []  # an unpublished photo is no post
    published = await adapter.publish(post("fresh bread"), [photo], key="p")
    assert published.post_id.startswith(f"{account.ref}_")
    [stored] = sandbox.posts("facebook")
    assert stored["media"] == [photo.sha256]
    assert adapter.rate is not None and adapter.rate.usage_percent is not None


async def test_graph_has_no_idempotency_key_so_retries_look_up_first(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    adapter = adapter_for(sandbox.account("facebook"), http)
    item = post("twice?")
    first = await adapter.publish(item, [], key="p")
    # The platform itself would take a second post: the lookup is what prevents it.
    again = await publish(adapter, item, [], key="p", since_first_try=5.0)
    assert again.recovered and again.post_id == first.post_id
    assert len(sandbox.posts("facebook")) == 1
    await adapter.publish(item, [], key="p")
    assert len(sandbox.posts("facebook")) == 2


async def test_a_lost_answer_is_found_by_the_retry(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    account = sandbox.account("facebook")
    plan = FaultPlan(seed=3, profiles={"facebook": FaultProfile(drop=1.0)})
    item = post("posted, but the answer was lost")
    with FetchedMedia.from_bytes(sample_png(3000), "image/png") as media:
        photo = await adapter_for(account, http).upload_media(media, key="m")
    lossy_transport = FailureSimulator(httpx.AsyncHTTPTransport(), plan)
    async with httpx.AsyncClient(transport=lossy_transport) as lossy:
        lossy_adapter = adapter_for(account, lossy)
        # With seed 3 the first drop happens after sending: the post exists.
        for _ in range(10):
            with pytest.raises(TransientError):
                await lossy_adapter.publish(item, [photo], key="p")
            if sandbox.posts("facebook"):
                break
    assert len(sandbox.posts("facebook")) == 1
    retried = await publish(adapter_for(account, http), item, [photo], key="p", since_first_try=2.0)
    assert retried.recovered and len(sandbox.posts("facebook")) == 1


async def test_graphs_duplicate_refusal_is_permanent_unless_the_retry_finds_its_post(
    sandbox_factory: Callable[..., Sandbox], http: httpx.AsyncClient
) -> None:
    sandbox = sandbox_factory(SandboxConfig(facebook_duplicate_guard=True))
    adapter = adapter_for(sandbox.account("facebook"), http)
    item = post("same words")
    first = await adapter.publish(item, [], key="p")
    with pytest.raises(PermanentError, match="#506"):
        await adapter.publish(post("same words"), [], key="another-job")
    resumed = await publish(adapter, item, [], key="p", since_first_try=30.0)
    assert resumed.recovered and resumed.post_id == first.post_id
    assert len(sandbox.posts("facebook")) == 1


async def test_invalid_and_malformed_tokens_need_reauthorisation_without_leaking(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    account = sandbox.account("facebook")
    for token in ("EAAB" + "7" * 40, "clearly-not-a-graph-token-42"):
        bad = replace(account, secrets={"page_access_token": Secret(token)})
        with pytest.raises(ReauthRequired) as info:
            await adapter_for(bad, http).verify()
        assert info.value.status == 400 and info.value.code == "190"
        assert leaks(info.value, bad) == []
    # Graph echoes a malformed token in its message; the kept body must not.
    assert "Malformed access token [redacted]" in str(info.value)


async def test_a_token_of_another_page_lacks_permission(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    mine, theirs = sandbox.account("facebook", "mine"), sandbox.account("facebook", "theirs")
    with pytest.raises(ReauthRequired) as info:
        await adapter_for(replace(mine, ref=theirs.ref), http).verify()
    assert info.value.status == 403 and info.value.code == "200"


async def test_page_throttling_snoozes_for_the_estimated_time(
    sandbox_factory: Callable[..., Sandbox], http: httpx.AsyncClient
) -> None:
    config = SandboxConfig()
    config.quotas["facebook"]["requests"] = Quota(4, 600.0)
    sandbox = sandbox_factory(config)
    adapter = adapter_for(sandbox.account("facebook"), http)
    for _ in range(3):
        await adapter.verify()
    assert adapter.rate is not None and adapter.rate.usage_percent == 75
    assert adapter.pacing is not None
    await adapter.verify()
    with pytest.raises(RateLimited) as info:
        await adapter.verify()
    assert info.value.status == 400 and info.value.code == "80001"
    assert info.value.delay is not None and 60 <= info.value.delay <= 600


async def test_revoke_removes_the_apps_permissions(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    account = sandbox.account("facebook")
    adapter = adapter_for(account, http)
    assert (await adapter.revoke()).remote
    with pytest.raises(ReauthRequired):
        await adapter.verify()
    page_only = replace(
        account, options={}, secrets={"page_access_token": Secret("EAA" + "1" * 30)}
    )
    assert not (await adapter_for(page_only, http).revoke()).remote
