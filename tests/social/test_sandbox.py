"""The sandbox server itself: admin endpoints, quotas, platform details, command line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys

import httpx
import pytest

from herald.social.adapters import adapter_for
from herald.social.adapters.bluesky import BlueskyAdapter
from herald.social.sandbox import Sandbox
from tests.social.support import post


def test_listens_on_loopback_only_with_a_tcp_socket(sandbox: Sandbox) -> None:
    with pytest.raises(ValueError, match="loopback only"):
        Sandbox(host="0.0.0.0")
    # Named TCP so asyncio sets TCP_NODELAY on each connection (else ~40 ms per answer).
    listening = sandbox._socket
    assert listening is not None and listening.proto == socket.IPPROTO_TCP


async def test_admin_endpoints(sandbox: Sandbox, http: httpx.AsyncClient) -> None:
    made = await http.post(
        f"{sandbox.url}/_sandbox/accounts", json={"platform": "mastodon", "name": "ops"}
    )
    assert made.status_code == 201
    body = made.json()
    assert body["name"] == "ops" and "access_token" in body["credentials"]
    clash = await http.post(
        f"{sandbox.url}/_sandbox/accounts", json={"platform": "mastodon", "name": "ops"}
    )
    assert clash.status_code == 400
    token = body["credentials"]["access_token"]
    for _ in range(2):
        await http.post(
            f"{sandbox.url}/api/v1/statuses",
            data={"status": "hi"},
            headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "k"},
        )
    counts = (await http.get(f"{sandbox.url}/_sandbox/counts")).json()
    ops = counts["accounts"]["mastodon"]["ops"]
    assert ops["posts"] == 1 and ops["quotas"]["requests"]["peak"] == 2
    posts = (
        await http.get(f"{sandbox.url}/_sandbox/posts", params={"platform": "mastodon"})
    ).json()
    assert [p["text"] for p in posts] == ["hi"] and posts[0]["key"] == "k"
    assert (await http.post(f"{sandbox.url}/_sandbox/reset")).json() == {"ok": True}
    assert (await http.get(f"{sandbox.url}/_sandbox/posts")).json() == []
    assert (await http.get(f"{sandbox.url}/_sandbox/health")).json() == {"ok": True}


async def test_platform_error_shapes(sandbox: Sandbox, http: httpx.AsyncClient) -> None:
    xrpc = await http.post(f"{sandbox.url}/xrpc/app.bsky.feed.getTimeline")
    assert xrpc.status_code == 501 and xrpc.json()["error"] == "MethodNotImplemented"
    graph = await http.get(
        f"{sandbox.url}/v21.0/123", headers={"Authorization": "Bearer EAA" + "0" * 30}
    )
    error = graph.json()["error"]
    assert graph.status_code == 400 and error["code"] == 190 and error["type"] == "OAuthException"
    assert "fbtrace_id" in error
    mastodon = await http.get(f"{sandbox.url}/api/v1/accounts/verify_credentials")
    assert mastodon.status_code == 401 and mastodon.json() == {
        "error": "The access token is invalid"
    }


async def test_bluesky_swap_commit_and_unvalidated_writes(
    sandbox: Sandbox, http: httpx.AsyncClient
) -> None:
    adapter = adapter_for(sandbox.account("bluesky"), http)
    assert isinstance(adapter, BlueskyAdapter)
    info = await adapter.verify()
    record = adapter.record(post("raw"), [])
    stale = await adapter._call(
        "POST",
        "com.atproto.repo.createRecord",
        operation="t",
        ok=(400,),
        json={
            "repo": info.account_id,
            "collection": "app.bsky.feed.post",
            "record": record,
            "swapCommit": "bafyreiold",
        },
    )
    assert stale.status_code == 400 and stale.json()["error"] == "InvalidSwap"
    loose = await adapter._call(
        "POST",
        "com.atproto.repo.createRecord",
        operation="t",
        json={
            "repo": info.account_id,
            "collection": "app.bsky.feed.post",
            "validate": False,
            "record": {"text": 5},
        },
    )
    assert loose.json()["uri"].startswith(f"at://{info.account_id}/")


@pytest.mark.slow
def test_command_line_prints_accounts_and_serves() -> None:
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, "-m", "herald.social.sandbox", "--port", "0", "--accounts", "2"]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as process:
        try:
            assert process.stdout is not None and process.stderr is not None
            lines: list[str] = []
            while not lines or not lines[-1].startswith("}"):
                line = process.stdout.readline()
                assert line, process.stderr.read()
                lines.append(line)
            listing = json.loads("".join(lines))
            assert len(listing["accounts"]) == 8
            mastodon = next(a for a in listing["accounts"] if a["platform"] == "mastodon")
            answer = httpx.get(
                f"{listing['url']}/api/v1/accounts/verify_credentials",
                headers={"Authorization": f"Bearer {mastodon['credentials']['access_token']}"},
            )
            assert answer.status_code == 200 and answer.json()["id"] == mastodon["id"]
        finally:
            process.send_signal(signal.SIGINT)
            assert process.wait(10) == 0


def test_command_line_refuses_bad_arguments() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "herald.social.sandbox", "--quota", "myspace=1/2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "unknown platform 'myspace'" in result.stderr
