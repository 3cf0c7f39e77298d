"""The signed webhook adapter against the sandbox receiver over real loopback HTTP."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Callable
from dataclasses import replace

import httpx
import pytest

from herald.ops.secrets import Secret
from herald.social.adapters import adapter_for
from herald.social.adapters.webhook import sign, signature_valid
from herald.social.errors import PermanentError, RateLimited, ReauthRequired
from herald.social.media import FetchedMedia
from herald.social.sandbox import Quota, Sandbox, SandboxConfig
from herald.social.sandbox.mediahost import sample_png
from tests.social.support import leaks, post

SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()


def test_signature_is_hmac_sha256_of_id_timestamp_body() -> None:
    body = b'{"a":1}'
    expected = base64.b64encode(
        hmac.new(b"k" * 32, b"msg_1.1700000000." + body, hashlib.sha256).digest()
    ).decode()
    assert sign(b"k" * 32, "msg_1", 1700000000, body) == f"v1,{expected}"
    header = f"v1,bm90IGl0 {sign(b'k' * 32, 'msg_1', 1700000000, body)}"
    assert signature_valid(b"k" * 32, "msg_1", 1700000000, body, header)
    assert not signature_valid(b"k" * 32, "msg_1", 1700000000, b'{"a":2}', header)


async def test_happy_path_and_dedupe_by_webhook_id(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    account = sandbox.account("webhook", "partner")
    adapter = adapter_for(account, http)
    info = await adapter.verify()
    assert info.account_id.endswith(f"/webhooks/{sandbox.state.by_name('webhook', 'partner').id}")  # type: ignore[union-attr]
    with FetchedMedia.from_bytes(
        sample_png(2000), "image/png", source_url="https://cdn.example/p.png"
    ) as media:
        ref = await adapter.upload_media(media, key="m", description="alt")
    item = post("to the partner")
    first = await adapter.publish(item, [ref], key="p")
    again = await adapter.publish(item, [ref], key="p")
    assert first.post_id == again.post_id and first.url
    [stored] = sandbox.posts("webhook")
    assert stored["key"] == "msg_p" and stored["media"] == [ref.sha256]
    await adapter.publish(item, [ref], key="q")
    assert len(sandbox.posts("webhook")) == 2


async def test_a_wrong_secret_is_refused_and_never_shown(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    account = sandbox.account("webhook")
    wrong = replace(account, secrets={"signing_secret": Secret(SECRET)})
    with pytest.raises(ReauthRequired) as info:
        await adapter_for(wrong, http).publish(post(), [], key="p")
    assert info.value.status == 401 and leaks(info.value, wrong) == []
    malformed = replace(account, secrets={"signing_secret": Secret("not-a-whsec-secret")})
    with pytest.raises(PermanentError, match="whsec_"):
        await adapter_for(malformed, http).verify()
    assert sandbox.posts() == []


async def test_gone_and_rate_limited_endpoints(
    sandbox_factory: Callable[..., Sandbox], http: httpx.AsyncClient
) -> None:
    config = SandboxConfig()
    config.quotas["webhook"]["requests"] = Quota(1, 30.0)
    sandbox = sandbox_factory(config)
    account = sandbox.account("webhook")
    adapter = adapter_for(account, http)
    await adapter.publish(post(), [], key="a")
    with pytest.raises(RateLimited) as info:
        await adapter.publish(post(), [], key="b")
    assert info.value.delay is not None and 1 <= info.value.delay <= 30
    gone = sandbox.account("webhook")
    sandbox.gone.add(gone.base_url.rsplit("/", 1)[1])
    with pytest.raises(PermanentError, match="410 Gone"):
        await adapter_for(gone, http).publish(post(), [], key="c")
