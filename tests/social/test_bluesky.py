"""The Bluesky adapter against the sandbox PDS over real loopback HTTP."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import replace

import httpx
import pytest

from herald.ops.secrets import Secret
from herald.social.adapters import BlueskyAdapter, MediaRef, adapter_for
from herald.social.adapters.bluesky import facets, record_key, tid
from herald.social.errors import (
    InvalidPost,
    PermanentError,
    RateLimited,
    ReauthRequired,
    TransientError,
)
from herald.social.media import FetchedMedia
from herald.social.sandbox import Quota, Sandbox, SandboxConfig
from herald.social.sandbox.mediahost import sample_png
from herald.social.simulator import FailureSimulator, FaultPlan, FaultProfile
from tests.social.support import leaks, post

TID = re.compile(r"^[234567abcdefghij][234567abcdefghijklmnopqrstuvwxyz]{12}$")


def test_record_keys_are_valid_tids_derived_from_time_and_key() -> None:
    item = post()
    assert TID.match(record_key(item, "k1"))
    assert record_key(item, "k1") == record_key(item, "k1")
    assert record_key(item, "k1") != record_key(item, "k2")
    assert tid(0, 0) == "2222222222222"
    # Sortable: a later time gives a larger key.
    assert tid(1_000_000, 5) < tid(2_000_000, 0)


def test_facets_count_utf8_bytes() -> None:
    text = "héllo https://example.org/ä? #herald #1"
    found = facets(text)
    encoded = text.encode()
    link, tag = found
    assert (
        encoded[link["index"]["byteStart"] : link["index"]["byteEnd"]]
        == "https://example.org/ä".encode()
    )
    assert encoded[tag["index"]["byteStart"] : tag["index"]["byteEnd"]] == b"#herald"
    assert tag["features"][0]["tag"] == "herald" and len(found) == 2


async def test_happy_path_session_blob_record(sandbox: Sandbox, http: httpx.AsyncClient) -> None:
    account = sandbox.account("bluesky", "bob")
    adapter = adapter_for(account, http)
    info = await adapter.verify()
    assert info.name == "bob.sandbox.test" and info.account_id.startswith("did:plc:")
    with FetchedMedia.from_bytes(sample_png(4000), "image/png") as media:
        ref = await adapter.upload_media(media, key="m")
    assert ref.id.startswith("bafkrei")
    item = post("a post with a picture", media_description="noise")
    published = await adapter.publish(item, [ref], key="p")
    assert published.post_id == f"at://{info.account_id}/app.bsky.feed.post/{record_key(item, 'p')}"
    assert published.url is not None and published.url.endswith(record_key(item, "p"))
    [stored] = sandbox.posts("bluesky")
    assert stored["media"] == [ref.sha256]
    renewed = adapter.updated_secrets()
    assert set(renewed) == {"access_jwt", "refresh_jwt"}  # a session to store for next time


async def test_a_repeated_create_is_refused_by_the_repository_and_recovered(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    adapter = adapter_for(sandbox.account("bluesky"), http)
    item = post("once")
    first = await adapter.publish(item, [], key="p")
    results = await asyncio.gather(*(adapter.publish(item, [], key="p") for _ in range(10)))
    assert {r.post_id for r in results} == {first.post_id}
    assert all(r.recovered for r in results)
    assert len(sandbox.posts("bluesky")) == 1
    found = await adapter.find_published(item, [], key="p", within=60)
    assert found is not None and found.post_id == first.post_id
    assert await adapter.find_published(item, [], key="other", within=60) is None


async def test_a_lost_answer_is_recovered_by_the_next_try(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    account = sandbox.account("bluesky")
    plan = FaultPlan(seed=1, profiles={"bluesky": FaultProfile(timeout=1.0)})
    item = post("lost")  # created_at is part of the post: the same on every try
    async with httpx.AsyncClient(
        transport=FailureSimulator(httpx.AsyncHTTPTransport(), plan)
    ) as lossy:
        session = adapter_for(account, http)
        info = await session.verify()  # log in over the good client
        known = replace(
            account,
            secrets={**account.secrets, **session.updated_secrets()},
            options={"did": info.account_id},
        )
        faulty = adapter_for(known, lossy)
        with pytest.raises(TransientError, match="no answer in time"):
            await faulty.publish(item, [], key="p")
    assert len(sandbox.posts("bluesky")) == 1  # the PDS did create it
    recovered = await session.publish(item, [], key="p")
    assert recovered.recovered and len(sandbox.posts("bluesky")) == 1


async def test_an_expired_session_is_refreshed_then_renewed_by_login(
    sandbox_factory: Callable[..., Sandbox], http: httpx.AsyncClient
) -> None:
    sandbox = sandbox_factory(SandboxConfig(access_ttl=0.3))
    account = sandbox.account("bluesky")
    adapter = adapter_for(account, http)
    assert isinstance(adapter, BlueskyAdapter)
    await adapter.verify()
    first = adapter.updated_secrets()
    await asyncio.sleep(0.4)
    await adapter.verify()  # 400 ExpiredToken -> refreshSession -> retried
    second = adapter.updated_secrets()
    assert second["access_jwt"] != first["access_jwt"]
    # A stored session whose refresh token was revoked: log in again with the password.
    stale = replace(account, secrets={**account.secrets, **first})
    await asyncio.sleep(0.4)
    again = adapter_for(stale, http)
    await again.verify()
    assert again.updated_secrets()["access_jwt"] not in (first["access_jwt"], second["access_jwt"])


async def test_wrong_password_needs_reauthorisation(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    account = sandbox.account("bluesky")
    bad = replace(account, secrets={"app_password": Secret("aaaa-bbbb-cccc-dddd")})
    with pytest.raises(ReauthRequired) as info:
        await adapter_for(bad, http).verify()
    assert info.value.code == "AuthenticationRequired" and info.value.status == 401
    assert leaks(info.value, bad, account.secrets["app_password"].reveal()) == []


async def test_record_validation_and_local_limits(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    adapter = adapter_for(sandbox.account("bluesky"), http)
    with pytest.raises(InvalidPost, match="limit of 300"):
        await adapter.publish(post("é" * 301), [], key="p")
    assert (await adapter.publish(post("é" * 300), [], key="ok")).post_id
    missing = MediaRef(
        platform="bluesky",
        id="bafkreinothere",
        content_type="image/png",
        size=1,
        sha256="0",
        data={"blob": json.dumps({"$type": "blob", "ref": {"$link": "bafkreinothere"}, "size": 1})},
    )
    with pytest.raises(PermanentError, match="not found") as info:
        await adapter.publish(post(), [missing], key="p2")
    assert info.value.status == 400 and info.value.code == "InvalidRequest"
    with (
        FetchedMedia.from_bytes(sample_png(1_200_000), "image/png") as big,
        pytest.raises(InvalidPost),
    ):
        await adapter.upload_media(big, key="m")


async def test_rate_limit_headers_and_429(
    sandbox_factory: Callable[..., Sandbox], http: httpx.AsyncClient
) -> None:
    config = SandboxConfig()
    config.quotas["bluesky"]["requests"] = Quota(3, 30.0)
    sandbox = sandbox_factory(config)
    adapter = adapter_for(sandbox.account("bluesky"), http)
    await adapter.verify()  # createSession + getSession
    assert adapter.rate is not None and adapter.rate.limit == 3 and adapter.rate.remaining == 1
    await adapter.verify()
    with pytest.raises(RateLimited) as info:
        await adapter.verify()
    assert info.value.code == "RateLimitExceeded"
    assert info.value.delay is not None and 1 <= info.value.delay <= 31


async def test_revoke_deletes_the_session(
    sandbox_factory: Callable[..., Sandbox], http: httpx.AsyncClient
) -> None:
    sandbox = sandbox_factory(SandboxConfig(access_ttl=0.3))
    account = sandbox.account("bluesky")
    adapter = adapter_for(account, http)
    assert not (await adapter.revoke()).remote  # no session yet
    await adapter.verify()
    session = adapter.updated_secrets()
    assert (await adapter.revoke()).remote
    # Without the app password, the stored session is all there is: once its access token
    # expires, the revoked refresh token cannot renew it.
    stale = adapter_for(replace(account, secrets=session), http)
    await asyncio.sleep(0.4)
    with pytest.raises(ReauthRequired) as info:
        await stale.verify()
    assert info.value.code == "ExpiredToken" and "revoked" in str(info.value)
    assert leaks(info.value, stale.account, *(s.reveal() for s in account.secrets.values())) == []
