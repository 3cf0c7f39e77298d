"""The social figures on /metrics: in-process counters beside the database's gauges."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from herald import sql
from herald.client import open_connection
from herald.config import Settings
from herald.social import guards
from herald.social.sandbox import Sandbox
from tests.social.service import Service, social_service

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


@pytest.fixture
async def service(settings: Settings, sandbox: Sandbox) -> AsyncIterator[Service]:
    async with social_service(settings, sandbox) as svc:
        yield svc


def parse(text: str) -> Samples:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


async def test_metrics_count_posts_calls_snoozes_credentials_and_show_breakers(
    service: Service, sandbox: Sandbox
) -> None:
    good = await service.link("mastodon")
    refused = await service.link("mastodon")
    bad_token = [a for a in sandbox.state.accounts.values()][1].credentials["access_token"]
    sandbox.state.revoke("mastodon", bad_token)  # its posts meet a 401
    async with await open_connection(service.settings) as conn:
        # The good account is paused for a moment: its post snoozes once, then goes out.
        await guards.pause(conn, good["id"], 0.5, "a test's pause")
        # The bluesky breaker opens (threshold 1), as after a failing call.
        await conn.execute(
            sql.query("social_breaker_failure"),
            {"platform": "bluesky", "threshold": 1, "open_s": 60.0},
        )
    published = (await service.post(good["id"], "counted", "m-1")).json()
    failed = (await service.post(refused["id"], "refused", "m-2")).json()
    again = await service.post(good["id"], "counted", "m-1")  # a replay: not accepted twice
    assert again.json()["outcome"] == "replay"
    async with service.worker(concurrency=4):
        assert (await service.settled(published["job_id"]))["state"] == "succeeded"
        assert (await service.settled(failed["job_id"]))["state"] == "dead"
        gone = await service.http.delete(
            f"/accounts/{good['id']}", params={"reason": "metrics test"}, headers=service.auth()
        )
        assert (await service.settled(gone.json()["job_id"]))["state"] == "succeeded"

    scraped = await service.http.get("/metrics")
    assert scraped.status_code == 200
    text = scraped.text
    samples = parse(text)
    posts = "herald_social_posts_total"
    assert value(samples, posts, platform="mastodon", outcome="accepted") == 2
    assert value(samples, posts, platform="mastodon", outcome="published") == 1
    assert value(samples, posts, platform="mastodon", outcome="failed") == 1
    calls = "herald_social_platform_calls_total"
    assert value(samples, calls, platform="mastodon", outcome="ok") >= 2  # verify, post, revoke
    assert value(samples, calls, platform="mastodon", outcome="unauthorized") == 1
    count = value(samples, "herald_social_platform_call_seconds_count", platform="mastodon")
    assert count == sum(v for (n, _), v in samples.items() if n == calls)
    snoozes = "herald_social_snoozes_total"
    assert value(samples, snoozes, platform="mastodon", reason="paused") >= 1
    credentials = "herald_social_credentials_total"
    assert value(samples, credentials, platform="mastodon", action="reauth", outcome="marked") == 1
    assert value(samples, credentials, platform="mastodon", action="revoke", outcome="ok") == 1
    # Read from the database at scrape time: the same in every process.
    retained = "herald_social_posts_retained"
    assert value(samples, retained, platform="mastodon", state="published") == 1
    assert value(samples, retained, platform="mastodon", state="failed") == 1
    accounts = "herald_social_accounts"
    assert value(samples, accounts, platform="mastodon", status="needs_reauth") == 1
    assert value(samples, accounts, platform="mastodon", status="revoked") == 1
    breaker = "herald_social_breaker_state"
    assert value(samples, breaker, platform="bluesky", state="open") == 1
    assert value(samples, breaker, platform="bluesky", state="closed") == 0
    assert value(samples, "herald_social_breaker_opened", platform="bluesky") == 1
    # Bounded labels, and never a credential.
    for made in sandbox.state.accounts.values():
        for secret in made.credentials.values():
            assert secret not in text
    labels = {
        key: label
        for (name, pairs) in samples
        if name.startswith("herald_social_")
        for key, label in pairs
    }
    assert set(labels) <= {"platform", "outcome", "reason", "action", "state", "status", "le"}
