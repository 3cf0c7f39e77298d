"""The social application end to end: HTTP API, real database, worker, sandbox platforms."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from herald.client import open_connection
from herald.config import Settings
from herald.ops.crypto import TokenCipher
from herald.social.accounts import rotate_credentials
from herald.social.sandbox import Sandbox
from tests.social.service import Service, link_body, social_service


@pytest.fixture
async def service(settings: Settings, sandbox: Sandbox) -> AsyncIterator[Service]:
    async with social_service(settings, sandbox) as svc:
        yield svc


async def stored_row(svc: Service, table: str, row_id: int) -> dict[str, object]:
    """A row as the database holds it (read directly, as an attacker with a dump would)."""
    async with await open_connection(svc.settings) as conn:
        cur = await conn.execute(
            f"SELECT to_jsonb(t) AS row FROM {table} t WHERE id = %s",  # test-only SQL
            (row_id,),
        )
        found = await cur.fetchone()
    assert found is not None
    row: dict[str, object] = found["row"]
    return row


async def test_a_post_with_media_is_published_once_and_its_job_shows_the_platform_post(
    service: Service, sandbox: Sandbox
) -> None:
    account = await service.link("mastodon")
    response = await service.post(account["id"], "Hello from Herald", "k-1", sandbox.media_url())
    assert response.status_code == 202, response.text
    accepted = response.json()
    assert accepted["outcome"] == "created"
    assert response.headers["location"] == accepted["status_url"] == f"/jobs/{accepted['job_id']}"
    async with service.worker(concurrency=4):
        job = await service.settled(accepted["job_id"])
    assert job["state"] == "succeeded", job
    assert job["attempt"] == 1
    post = job["post"]
    assert post["state"] == "published" and post["step"] == "publish"
    assert post["platform_post_id"] and post["platform_url"].startswith(sandbox.url)
    assert post["media"] and post["media"][0]["platform"] == "mastodon"
    published = sandbox.posts("mastodon")
    assert len(published) == 1 and published[0]["id"] == post["platform_post_id"]
    assert len(published[0]["media"]) == 1


async def test_posts_need_an_idempotency_key_and_a_key_stands_for_one_body(
    service: Service,
) -> None:
    account = await service.link("webhook")
    body = {"account_id": account["id"], "message": "once"}
    missing = await service.http.post("/social/posts", json=body, headers=service.auth())
    assert missing.status_code == 400
    assert missing.json()["type"].endswith("idempotency-key-required")
    first = await service.post(account["id"], "once", "same-key")
    again = await service.post(account["id"], "once", "same-key")
    assert first.status_code == again.status_code == 202
    assert again.json()["job_id"] == first.json()["job_id"]
    assert again.json()["outcome"] == "replay"
    other = await service.post(account["id"], "another body", "same-key")
    assert other.status_code == 409
    # Keys belong to their owner: another caller's same key is another request.
    token = await service.key("second", ["submit", "read"])
    theirs = await service.http.post(
        "/social/posts",
        json=body,
        headers={**service.auth(token), "Idempotency-Key": "same-key"},
    )
    assert theirs.status_code == 202 and theirs.json()["job_id"] != first.json()["job_id"]


async def test_credentials_are_encrypted_at_rest_and_never_shown(
    service: Service, sandbox: Sandbox
) -> None:
    made = sandbox.add_account("facebook")
    body = {
        "provider": "facebook",
        "name": made.name,
        "page_id": made.id,
        "base_url": sandbox.url,
        "access_token": made.credentials["page_access_token"],
        "credentials": {"user_access_token": made.credentials["user_access_token"]},
        "options": {"user_id": made.info["user_id"]},
    }
    created = await service.http.post("/accounts", json=body, headers=service.auth())
    assert created.status_code == 201, created.text
    listed = await service.http.get("/accounts", headers=service.auth())
    stored = await stored_row(service, "social_accounts", created.json()["id"])
    for secret in made.credentials.values():
        assert secret not in created.text and secret not in listed.text
        assert secret not in json.dumps(stored)
    assert isinstance(stored["credentials"], str) and stored["credentials"].startswith("gAAAAA")
    # Linking the same page twice is a conflict; a bad provider never reaches the database.
    twice = await service.http.post("/accounts", json=body, headers=service.auth())
    assert twice.status_code == 409
    wrong = await service.http.post(
        "/accounts", json={**body, "provider": "myspace"}, headers=service.auth()
    )
    assert wrong.status_code == 422


async def test_a_401_marks_the_account_for_reauthorisation_and_dead_letters_at_once(
    service: Service, sandbox: Sandbox
) -> None:
    account = await service.link("mastodon")
    token = next(iter(sandbox.state.accounts.values())).credentials["access_token"]
    sandbox.state.revoke("mastodon", token)  # the user revoked the app at the instance
    accepted = (await service.post(account["id"], "will fail", "k-401")).json()
    async with service.worker():
        job = await service.settled(accepted["job_id"])
    assert job["state"] == "dead" and job["attempt"] == 1
    assert job["post"]["state"] == "failed"
    assert "re-authorisation" in job["post"]["error"]
    accounts = (await service.http.get("/accounts", headers=service.auth())).json()
    assert accounts[0]["status"] == "needs_reauth"
    dead = await service.http.get("/dlq/social", headers=service.auth())
    assert dead.status_code == 200
    letters = dead.json()
    assert [d["job_id"] for d in letters] == [accepted["job_id"]]
    assert token not in dead.text and token not in json.dumps(job)
    # Later posts to it are refused until it is authorised again.
    refused = await service.post(account["id"], "next", "k-401-2")
    assert refused.status_code == 409


async def test_disconnecting_revokes_at_the_platform_fails_queued_posts_and_wipes_the_token(
    service: Service, sandbox: Sandbox
) -> None:
    account = await service.link("mastodon")
    queued = (await service.post(account["id"], "never sent", "k-q")).json()
    no_reason = await service.http.delete(f"/accounts/{account['id']}", headers=service.auth())
    assert no_reason.status_code == 422
    response = await service.http.delete(
        f"/accounts/{account['id']}", params={"reason": "user left"}, headers=service.auth()
    )
    assert response.status_code == 202, response.text
    revoke = response.json()
    assert revoke["failed_posts"] == [queued["post_id"]]
    async with service.worker():
        revoked = await service.settled(revoke["job_id"])
        post_job = await service.settled(queued["job_id"])
    assert revoked["state"] == "succeeded" and revoked["result"]["remote"] is True
    assert post_job["state"] == "cancelled"
    assert post_job["post"]["state"] == "failed" and "user left" in post_job["post"]["error"]
    stored = await stored_row(service, "social_accounts", account["id"])
    assert stored["status"] == "revoked" and stored["credentials"] is None
    made = next(iter(sandbox.state.accounts.values()))
    assert sandbox.state.owner("mastodon", made.credentials["access_token"])[0] is None
    audit = await service.http.get(
        "/v1/audit", params={"target_type": "social_account"}, headers=service.auth()
    )
    actions = [entry["action"] for entry in audit.json()]
    assert actions == ["disconnect_account", "link_account"]


async def test_users_and_scopes_follow_the_rest_of_the_api(service: Service) -> None:
    created = await service.http.post(
        "/users", json={"username": "ada", "email": "ada@example.org"}, headers=service.auth()
    )
    assert created.status_code == 201, created.text
    again = await service.http.post(
        "/users", json={"username": "ada", "email": "ada@example.org"}, headers=service.auth()
    )
    assert again.status_code == 409
    assert (await service.http.get("/accounts")).status_code == 401
    submitter = await service.key("poster", ["submit"])
    body = link_body(service.sandbox, "webhook")
    refused = await service.http.post("/accounts", json=body, headers=service.auth(submitter))
    assert refused.status_code == 403
    linked = await service.link("webhook", user_id=created.json()["id"])
    assert linked["user_id"] == created.json()["id"] and linked["owner"] == "admin"
    health = await service.http.get("/health")
    assert health.status_code == 200 and health.json()["status"] == "ready"


async def test_rotated_keys_still_decrypt_and_re_encrypting_moves_every_token_to_the_newest(
    service: Service, sandbox: Sandbox
) -> None:
    account = await service.link("webhook")
    old = service.environ["HERALD_TOKEN_KEYS"]
    newest = TokenCipher.generate_key()
    service.runtime.environ = {**service.environ, "HERALD_TOKEN_KEYS": f"{newest},{old}"}
    service.runtime.reload_keys()
    accepted = (await service.post(account["id"], "after rotation", "k-rot")).json()
    async with service.worker():
        assert (await service.settled(accepted["job_id"]))["state"] == "succeeded"
    async with await open_connection(service.settings) as conn:
        assert await rotate_credentials(conn, service.runtime.cipher) == 1
        assert await rotate_credentials(conn, service.runtime.cipher) == 0
    stored = await stored_row(service, "social_accounts", account["id"])
    assert TokenCipher([newest]).key_index(str(stored["credentials"])) == 0
