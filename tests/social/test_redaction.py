"""No credential ever shows: not in errors, reprs, reports, dead-letter records or logs."""

from __future__ import annotations

import logging
from dataclasses import replace

import httpx
import pytest

from herald.ops.secrets import Secret
from herald.social.adapters import adapter_for
from herald.social.errors import SocialError
from herald.social.sandbox import Sandbox
from tests.social.support import leaks, post

WRONG = {
    "mastodon": {"access_token": "wrong-mastodon-token-000111"},
    "bluesky": {"app_password": "wrng-pass-word-0001"},
    "facebook": {"page_access_token": "EAAWRONG" + "9" * 40},
    "webhook": {"signing_secret": "whsec_d3JvbmctYnV0LXdlbGwtZm9ybWVkLXNlY3JldC0wMQ=="},
}


@pytest.mark.parametrize("platform", sorted(WRONG))
async def test_credentials_never_leak(
    sandbox: Sandbox, http: httpx.AsyncClient, platform: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    account = sandbox.account(platform)
    real = [s.reveal() for s in account.secrets.values()]
    assert all(value not in repr(account) for value in real)
    adapter = adapter_for(account, http)
    assert all(value not in repr(adapter) for value in real)
    bad = replace(account, secrets={k: Secret(v) for k, v in WRONG[platform].items()})
    unreachable = replace(account, base_url="http://127.0.0.1:9")
    raised: list[SocialError] = []
    for target in (bad, unreachable):
        try:
            await adapter_for(target, http).publish(post(), [], key="k")
        except SocialError as error:
            raised.append(error)
    assert len(raised) == 2
    for found in raised:
        assert leaks(found, bad, *real) == [], found.report()
    assert not any(value in caplog.text for value in [*real, *WRONG[platform].values()])
