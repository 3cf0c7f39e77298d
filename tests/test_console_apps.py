"""The applications' pages in the console over HTTP against a real database: ingestion
(providers, runs, a run's failed and quarantined records, the quarantine, "fetch now")
and social publishing (accounts without their credentials, posts, disconnecting), each
action reviewed, reasoned and audited, none offered to a reader and a forged one refused.

Runs, records, accounts and posts are written as the applications write them (rows in
their tables); the actions go through the applications' own admission.
"""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator

import pytest

from herald import Herald, Settings
from herald.api import ApiSettings, create_app
from herald.client import Client
from herald.console import install
from herald.console.registry import discover
from herald.ingest.jobs import register_ingest
from herald.ingest.providers import ProviderSpec, save_provider
from herald.ops import audit
from herald.ops.audit import Note
from herald.ops.crypto import TokenCipher
from herald.social.pipeline import register_social
from tests.console_kit import CSRF, Console, sign_in


@pytest.fixture
async def console(settings: Settings) -> AsyncIterator[Console]:
    """The API and console of an application running ingestion and social publishing."""
    app = Herald()
    register_ingest(app, settings)
    register_social(app, settings, environ={})
    api = create_app(app, settings, ApiSettings())
    install(api, app, extensions=discover())
    async with api.router.lifespan_context(api), await Client.open(app, settings) as client:
        yield Console(api, settings, client)


def _text(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


async def ingestion_scene(console: Console) -> int:
    """A provider with one staged run: a failed record and a quarantined one."""
    async with console.client.pool.connection() as conn:
        await save_provider(
            conn,
            ProviderSpec("city-events", "https://events.example.org/feed.xml", auth="secret-token"),
            note=Note("setup", "a provider to look at"),
        )
    rows = await console.rows(
        "INSERT INTO ingest_runs (provider, state, job_id, job_fence, snapshot_at, staged_at, "
        "rows_staged, rejected, bytes, http_attempts) VALUES ('city-events', 'staged', 99, 1, "
        "herald_now(), herald_now(), 2, 1, 20480, 2) RETURNING id"
    )
    run_id = int(rows[0]["id"])
    await console.rows(
        "INSERT INTO ingest_staged (run_id, state, attempts, last_error, base_plan_id, plan_id, "
        "title, starts_at, ends_at, sell_mode, online, zones) VALUES "
        "(%s, 'failed', 3, 'price below zero', 'b-1', 'p-1', 'Concert', herald_now(), "
        "herald_now(), 'online', true, '[]'), "
        "(%s, 'done', 1, NULL, 'b-2', 'p-2', 'Play', herald_now(), herald_now(), 'online', "
        "true, '[]') RETURNING 1",
        run_id,
        run_id,
    )
    await console.rows(
        "INSERT INTO ingest_quarantine (run_id, provider, reason, raw, truncated, byte_offset, "
        "line, expires_at) VALUES (%s, 'city-events', 'unclosed element <zone>', "
        "'<plan id=\"9\"><zone>', false, 4096, 17, herald_now() + interval '7 days') RETURNING 1",
        run_id,
    )
    return run_id


async def test_ingestion_pages_and_fetch_now(
    console: Console, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HERALD_TOKEN_KEYS", TokenCipher.generate_key())  # the auth is stored
    run_id = await ingestion_scene(console)
    ops = await console.key("ops", ["read", "operate"])
    viewer = await console.key("viewer", ["read"])
    async with console.browser() as http:
        csrf = await sign_in(http, ops)
        home = await http.get("/ui/")
        assert 'href="/ui/ingestion"' in home.text
        page = _text((await http.get("/ui/ingestion")).text)
        assert "city-events" in page and "https://events.example.org/feed.xml" in page
        assert "secret-token" not in page and "Fetch now…" in page
        run = _text((await http.get(f"/ui/ingestion/runs/{run_id}")).text)
        for shown in ("Ingestion run", "staged", "20.0 KiB in 2 HTTP attempts",
                      "price below zero", "b-1/p-1", "unclosed element <zone>",
                      "line 17, byte 4096", '<plan id="9"><zone>'):  # fmt: skip
            assert shown in run, shown
        live = await http.get(f"/ui/ingestion/runs/{run_id}", headers={"X-Herald-Fragment": "run"})
        assert live.status_code == 200 and "<html" not in live.text
        quarantine = _text((await http.get("/ui/ingestion/quarantine?provider=city-events")).text)
        assert "unclosed element <zone>" in quarantine
        provider = _text((await http.get("/ui/ingestion/providers/city-events")).text)
        assert "header Authorization (stored encrypted, never shown)" in provider
        assert (await http.get("/ui/ingestion/runs/424242")).status_code == 404
        assert (await http.get("/ui/ingestion/providers/nope")).status_code == 404

        review = _text(
            (await http.get("/ui/actions/ingest_provider.fetch?target=city-events")).text
        )
        assert "Fetch the snapshot of provider city-events now" in review
        done = await http.post(
            "/ui/actions/ingest_provider.fetch/run",
            data={"csrf": csrf, "target": "city-events", "reason": "the feed was fixed"},
        )
        assert done.status_code == 303
        outcome = _text((await http.get("/ui/ingestion/providers/city-events")).text)
        assert re.search(r"provider city-events: fetch requested \(job \d+\)", outcome), outcome
        assert "fetch by ops: “the feed was fixed”" in outcome
        again = await http.post(
            "/ui/actions/ingest_provider.fetch/run",
            data={"csrf": csrf, "target": "city-events", "reason": "once more"},
        )
        assert again.status_code == 303
        said = _text((await http.get("/ui/ingestion")).text)
        assert "a fetch is under way already" in said

    async with console.browser() as http:
        await sign_in(http, viewer)
        seen = await http.get(f"/ui/ingestion/runs/{run_id}")
        assert "unclosed element" in seen.text and "&lt;plan id" not in seen.text  # no raw
        listing = await http.get("/ui/ingestion")
        assert "/actions/" not in listing.text
        match = CSRF.search(listing.text)
        assert match
        forged = await http.post(
            "/ui/actions/ingest_provider.fetch/run",
            data={"csrf": match.group(1), "target": "city-events", "reason": "forged"},
        )
        assert forged.status_code == 403
    entries = await audit.entries(
        console.client.pool, target_type="ingest_provider", action="fetch"
    )
    assert [(e.actor, e.reason) for e in entries] == [("ops", "the feed was fixed")]


async def social_scene(console: Console) -> tuple[int, int, int]:
    """A linked account with a queued post and a published one."""
    rows = await console.rows(
        "INSERT INTO social_accounts (owner, provider, name, external_id, base_url, credentials) "
        "VALUES ('newsroom', 'mastodon', '@news', '1001', 'https://social.example.org', "
        "'gAAAA-ciphertext') RETURNING id"
    )
    account = int(rows[0]["id"])
    posts = await console.rows(
        "INSERT INTO social_posts (owner, account_id, message, idempotency_key, body_hash, state, "
        "platform_post_id, platform_url, published_at) VALUES "
        "('newsroom', %s, 'Road closed on Main Street', 'k1', repeat('a', 64), 'queued', NULL, "
        "NULL, NULL), ('newsroom', %s, 'Market opens at 9', 'k2', repeat('b', 64), "
        "'published', '77', 'https://social.example.org/@news/77', herald_now()) RETURNING id",
        account,
        account,
    )
    return account, int(posts[0]["id"]), int(posts[1]["id"])


async def test_social_pages_and_disconnect(console: Console) -> None:
    account, queued, published = await social_scene(console)
    ops = await console.key("ops", ["read", "operate"])
    async with console.browser() as http:
        csrf = await sign_in(http, ops)
        page = _text((await http.get("/ui/social")).text)
        assert "@news" in page and "newsroom" in page and "Road closed" in page
        assert "ciphertext" not in page
        only = _text((await http.get("/ui/social?state=published")).text)
        assert "Market opens" in only and "Road closed" not in only
        post = _text((await http.get(f"/ui/social/posts/{published}")).text)
        assert (
            "Market opens at 9" in post
            and "https://social.example.org/@news/77"
            in (await http.get(f"/ui/social/posts/{published}")).text
        )
        assert (await http.get("/ui/social/posts/999999")).status_code == 404

        review = _text(
            (await http.get(f"/ui/actions/social_account.disconnect?target={account}")).text
        )
        assert f"Disconnect mastodon account {account} (@news, of newsroom)" in review
        assert "every post of it still queued or publishing fails" in review
        done = await http.post(
            "/ui/actions/social_account.disconnect/run",
            data={"csrf": csrf, "target": str(account), "reason": "account compromised"},
        )
        assert done.status_code == 303
        shown = _text((await http.get(f"/ui/social/accounts/{account}")).text)
        assert "1 waiting post failed" in shown and "revoking" in shown
        assert "disconnect account by ops: “account compromised”" in shown
        failed = _text((await http.get(f"/ui/social/posts/{queued}")).text)
        assert "failed" in failed and "account compromised" in failed
    entries = await audit.entries(console.client.pool, target_type="social_account")
    assert [(e.actor, e.action, e.reason) for e in entries] == [
        ("ops", "disconnect_account", "account compromised")
    ]
