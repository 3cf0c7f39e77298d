"""The ``herald social`` commands, the demo, and slowing down on a low remaining quota."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from herald.cli import main
from herald.client import open_connection
from herald.config import Settings
from herald.ops.crypto import TokenCipher
from herald.social.sandbox import Sandbox, SandboxConfig
from herald.social.sandbox.state import Quota
from tests.procs import herald_command
from tests.social.service import social_service


def environment(settings: Settings, keys: str) -> dict[str, str]:
    assert settings.database_url is not None
    return {
        "HERALD_DATABASE_URL": settings.database_url,
        "HERALD_SCHEMA": settings.schema,
        "HERALD_TOKEN_KEYS": keys,
    }


def test_the_social_commands_link_post_list_and_rotate(
    settings: Settings,
    sandbox: Sandbox,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["social", "keygen"]) == 0
    key = capsys.readouterr().out.strip()
    assert TokenCipher([key]).key_count == 1
    for name, value in environment(settings, key).items():
        monkeypatch.setenv(name, value)
    made = sandbox.add_account("webhook")
    account = made.account(sandbox.url)
    monkeypatch.setenv("HOOK_SECRET", made.credentials["signing_secret"])
    linked = main(
        ["social", "link", "--provider", "webhook", "--name", "hook", "--page-id", "hook",
         "--base-url", account.base_url, "--token-env", "HOOK_SECRET"]
    )  # fmt: skip
    assert linked == 0
    shown = capsys.readouterr().out
    assert made.credentials["signing_secret"] not in shown
    assert main(["social", "post", "1", "hello", "--idempotency-key", "cli-1"]) == 0
    assert main(["social", "post", "1", "hello", "--idempotency-key", "cli-1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith("(created)") and out[1].endswith("(replay)")
    assert out[0].split(":")[0] == out[1].split(":")[0]
    assert main(["social", "accounts"]) == 0
    assert "webhook" in capsys.readouterr().out
    monkeypatch.setenv("HERALD_TOKEN_KEYS", f"{TokenCipher.generate_key()},{key}")
    assert main(["social", "rotate-keys"]) == 0
    assert capsys.readouterr().out.startswith("1 account(s) re-encrypted")
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(["social", "link", "--provider", "mastodon", "--name", "m", "--page-id", "1"]) == 2


@pytest.mark.slow
async def test_a_low_remaining_quota_pauses_the_account_for_every_worker(
    settings: Settings, sandbox_factory: object
) -> None:
    assert callable(sandbox_factory)
    config = SandboxConfig()
    config.quotas["mastodon"]["requests"] = Quota(10, 120.0)
    sandbox: Sandbox = sandbox_factory(config)
    async with social_service(settings, sandbox) as svc:
        account = await svc.link("mastodon")
        jobs = [
            (await svc.post(account["id"], f"paced {n}", f"p{n}")).json()["job_id"]
            for n in range(8)
        ]
        async with svc.worker(concurrency=1):  # one call at a time: 1 verify + 8 posts
            for job_id in jobs:
                assert (await svc.settled(job_id))["state"] == "succeeded"
        async with await open_connection(settings) as conn:
            cur = await conn.execute(
                "SELECT reason, paused_until > herald_now() AS pausing FROM social_throttles"
            )
            pause = await cur.fetchone()
    assert pause is not None and pause["pausing"]
    assert pause["reason"] == "1 of 10 calls left in this window"
    (counts,) = sandbox.counts()["accounts"]["mastodon"].values()
    assert counts["quotas"]["requests"]["rejected"] == 0


@pytest.mark.slow
def test_the_demo_posts_once_to_each_of_three_platforms_under_faults(
    settings: Settings, tmp_path: Path
) -> None:
    env = {**os.environ, **environment(settings, TokenCipher.generate_key())}
    env["HERALD_DATA_DIR"] = str(tmp_path)
    done = herald_command(env, "social", "demo", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    for platform in ("mastodon", "bluesky", "facebook"):
        assert f"{platform:9} 1 post(s), 0 duplicate(s)" in done.stdout
    assert done.stdout.count(" succeeded after ") == 3
