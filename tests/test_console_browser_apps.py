"""The applications' pages in a real headless Chromium against ``herald up`` running the
built-in application (catalog, ingestion, social): an operator reads a run's failed and
quarantined records, asks a provider to fetch now with a reason, disconnects a social
account with a reason (its queued post fails at once), and finds both in the audit log;
a reader sees neither action.

With ``HERALD_CONSOLE_SCREENSHOTS=<folder>`` the ingestion, run and social pages are
saved there too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from herald.api import create_key
from herald.client import open_connection
from herald.config import Settings
from herald.ingest.providers import ProviderSpec, save_provider
from herald.ops.audit import Note
from tests.browser import chromium, click, page_text, screenshot, serve_up, sign_in, wait

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
def demo_up(settings: Settings, tmp_path: Path) -> Iterator[str]:
    with serve_up(settings, tmp_path, app="herald.demo:app") as url:
        yield url


def _confirm(driver: Any, reason: str) -> None:
    assert "What will happen" in page_text(driver)
    driver.find_element("id", "reason").send_keys(reason)
    driver.find_element("xpath", "//button[starts-with(normalize-space(), 'Confirm')]").click()


async def test_operator_fetches_a_provider_and_disconnects_an_account(
    settings: Settings, demo_up: str
) -> None:
    url = demo_up
    async with await open_connection(settings) as conn:
        ops = (await create_key(conn, "ops", ["read", "operate"])).token
        viewer = (await create_key(conn, "viewer", ["read"])).token
        # A provider nobody answers for (the fetch may fail; the request is what counts).
        await save_provider(
            conn,
            ProviderSpec("city-events", "http://127.0.0.1:9/feed.xml"),
            note=Note("setup", "a provider to look at"),
        )
        cur = await conn.execute(
            "INSERT INTO ingest_runs (provider, state, job_id, job_fence, snapshot_at, "
            "staged_at, finished_at, rows_staged, rejected, rows_done, bytes, http_attempts) "
            "VALUES ('city-events', 'processed', 7, 1, herald_now(), herald_now(), "
            "herald_now(), 120, 1, 120, 48000, 1) RETURNING id"
        )
        run = await cur.fetchone()
        assert run is not None
        await conn.execute(
            "INSERT INTO ingest_quarantine (run_id, provider, reason, raw, truncated, "
            "byte_offset, line, expires_at) VALUES (%s, 'city-events', "
            "'unclosed element <zone>', '<plan id=\"9\"><zone>', false, 4096, 17, "
            "herald_now() + interval '7 days')",
            (run["id"],),
        )
        cur = await conn.execute(
            "INSERT INTO social_accounts (owner, provider, name, external_id, base_url, "
            "credentials) VALUES ('newsroom', 'mastodon', '@news', '1001', "
            "'https://social.example.org', 'not-a-real-ciphertext') RETURNING id"
        )
        account = await cur.fetchone()
        assert account is not None
        await conn.execute(
            "INSERT INTO social_posts (owner, account_id, message, idempotency_key, body_hash) "
            "VALUES ('newsroom', %s, 'Road closed on Main Street', 'k1', repeat('a', 64))",
            (account["id"],),
        )
    shots = os.environ.get("HERALD_CONSOLE_SCREENSHOTS")

    with chromium() as driver:
        d: Any = driver
        d.get(f"{url}/ui/ingestion")
        sign_in(d, ops)
        wait("the ingestion page", lambda: d.title.startswith("Ingestion"))
        if shots:
            screenshot(d, Path(shots) / "ingestion-desktop.png", 1280, 900)
        click(d, f"a[href$='/ingestion/runs/{run['id']}']")
        wait("the run", lambda: d.title.startswith(f"Ingestion run {run['id']}"))
        text = page_text(d)
        assert "unclosed element <zone>" in text and "line 17, byte 4096" in text
        if shots:
            screenshot(d, Path(shots) / "ingestion-run-desktop.png", 1280, 900)
        click(d, "a[href$='/ingestion/providers/city-events']")
        wait("the provider", lambda: d.title.startswith("Provider city-events"))
        d.find_element("link text", "Fetch now…").click()
        wait("the review", lambda: "What will happen" in page_text(d))
        assert "Fetch the snapshot of provider city-events now" in page_text(d)
        _confirm(d, "the feed was fixed upstream")
        wait("the outcome", lambda: "fetch requested (job" in page_text(d))
        assert "fetch by ops: “the feed was fixed upstream”" in page_text(d)

        d.find_element("link text", "Social").click()
        wait("the social page", lambda: d.title.startswith("Social"))
        assert "Road closed on Main Street" in page_text(d)
        if shots:
            screenshot(d, Path(shots) / "social-desktop.png", 1280, 900)
        click(d, "a[href*='social_account.disconnect']")
        wait("the review", lambda: "What will happen" in page_text(d))
        assert f"Disconnect mastodon account {account['id']} (@news, of newsroom)" in page_text(d)
        _confirm(d, "account compromised")
        wait("the outcome", lambda: "1 waiting post failed" in page_text(d))
        assert "account compromised" in page_text(d)

        d.find_element("link text", "Audit log").click()
        wait("the audit log", lambda: d.title.startswith("Audit log"))
        fetched = ["ops", "fetch", "ingest provider city-events", "the feed was fixed upstream"]
        disconnected = [
            "ops", "disconnect account", f"social account {account['id']}", "account compromised"
        ]  # fmt: skip

        def entries() -> list[list[str]]:  # read again if a live update replaced the rows
            return [
                [c.text for c in row.find_elements("css selector", "td")][1:5]
                for row in d.find_elements("css selector", "tbody tr")
            ]

        wait("both audit entries", lambda: fetched in entries() and disconnected in entries())

        d.find_element("xpath", "//button[normalize-space()='Sign out']").click()
        wait("the sign-in page", lambda: d.title.startswith("Sign in"))
        sign_in(d, viewer)
        for path in ("/ui/ingestion", "/ui/ingestion/providers/city-events", "/ui/social"):
            d.get(url + path)
            assert "Fetch now" not in page_text(d) and "Disconnect" not in page_text(d)
        d.get(f"{url}/ui/ingestion/runs/{run['id']}")
        assert "unclosed element <zone>" in page_text(d)
        assert '<plan id="9">' not in page_text(d)  # the raw record is for operate keys
