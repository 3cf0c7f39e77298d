"""Proofs with real processes and real loopback HTTP: the API and workers are
subprocesses of the social application, the platforms the sandbox server.

Each proof ends by counting what the platform received: a post appears exactly once,
whatever happened on the way.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from herald.client import open_connection
from herald.config import Settings
from herald.social.sandbox import Sandbox, SandboxConfig
from herald.social.sandbox.state import Quota
from tests.procs import wait_for
from tests.social.processes import World, fault_env, world

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@pytest.fixture
async def proof(
    settings: Settings, database: str, tmp_path: Path, sandbox: Sandbox
) -> AsyncIterator[World]:
    async with world(settings.with_(lease=2.0), database, tmp_path, sandbox) as w:
        yield w


async def step_of(settings: Settings, job_id: int) -> str | None:
    async with await open_connection(settings) as conn:
        cur = await conn.execute("SELECT step FROM jobs WHERE id = %s", (job_id,))
        row = await cur.fetchone()
    return None if row is None else row["step"]


async def post_step_of(settings: Settings, job_id: int) -> str | None:
    """The step the post's row shows: 'publish' is stamped just before the publish call
    (a media-less post's job saves no checkpoint on its way there)."""
    async with await open_connection(settings) as conn:
        cur = await conn.execute("SELECT step FROM social_posts WHERE job_id = %s", (job_id,))
        row = await cur.fetchone()
    return None if row is None else row["step"]


async def attempts_and_rescues(settings: Settings, job_id: int) -> tuple[int, int]:
    async with await open_connection(settings) as conn:
        cur = await conn.execute("SELECT attempt, rescues FROM jobs WHERE id = %s", (job_id,))
        row = await cur.fetchone()
    assert row is not None
    return row["attempt"], row["rescues"]


def media_of(sandbox: Sandbox, platform: str) -> list[str]:
    with sandbox.state.lock:
        return [m.media_id for (p, _), m in sandbox.state.media.items() if p == platform]


async def test_a_duplicate_storm_of_50_requests_makes_one_job_and_one_post(
    proof: World, sandbox: Sandbox
) -> None:
    account = await proof.link("mastodon")
    answers = await asyncio.gather(
        *(proof.post(account["id"], "storm", "storm-key", sandbox.media_url()) for _ in range(50))
    )
    assert {a.status_code for a in answers} == {202}
    jobs = {a.json()["job_id"] for a in answers}
    assert len(jobs) == 1
    assert sorted(a.json()["outcome"] for a in answers).count("created") == 1
    proof.workers.start(concurrency=8)
    job = await proof.settled(jobs.pop())
    assert job["state"] == "succeeded"
    assert len(sandbox.posts("mastodon")) == 1


async def test_a_worker_killed_between_media_upload_and_publish_resumes_at_publish(
    settings: Settings, database: str, tmp_path: Path, sandbox: Sandbox
) -> None:
    slow = fault_env(1, mastodon={"latency": {"kind": "fixed", "value": 1.5}})
    async with world(settings.with_(lease=2.0), database, tmp_path, sandbox) as proof:
        account = await proof.link("mastodon")
        job_id = (await proof.post(account["id"], "resume", "k", sandbox.media_url())).json()[
            "job_id"
        ]
        doomed = proof.workers.start(env=slow)

        async def at_publish() -> bool:
            return await step_of(settings, job_id) == "publish"

        await wait_for(at_publish, 60, "the media step's checkpoint", proof.workers)
        doomed.signal(signal.SIGKILL)  # its publish call is still in its 1.5 s delay
        assert media_of(sandbox, "mastodon") and not sandbox.posts("mastodon")
        proof.workers.start()
        job = await proof.settled(job_id)
    assert job["state"] == "succeeded" and job["step"] == "publish"
    # Rescued once; a worker's death is not charged to the job (poison isolation).
    assert await attempts_and_rescues(settings, job_id) == (1, 1)
    uploaded = media_of(sandbox, "mastodon")
    (post,) = sandbox.posts("mastodon")
    assert len(uploaded) == 1 and len(post["media"]) == 1
    assert job["post"]["media"][0]["id"] == uploaded[0]


async def test_a_worker_paused_past_its_lease_mid_publish_cannot_post_twice_or_record(
    settings: Settings, database: str, tmp_path: Path, sandbox: Sandbox
) -> None:
    slow = fault_env(2, mastodon={"latency": {"kind": "fixed", "value": 1.0}})
    async with world(settings.with_(lease=2.0), database, tmp_path, sandbox) as proof:
        account = await proof.link("mastodon")
        job_id = (await proof.post(account["id"], "paused", "k")).json()["job_id"]
        paused = proof.workers.start(env=slow)

        async def at_publish() -> bool:
            return await post_step_of(settings, job_id) == "publish"

        await wait_for(at_publish, 60, "the publish step", proof.workers)
        await asyncio.sleep(0.3)  # inside the publish call's delay
        paused.signal(signal.SIGSTOP)
        proof.workers.start()  # rescues the job once the lease ran out, and publishes
        job = await proof.settled(job_id)
        assert job["state"] == "succeeded"
        # Rescued once, the expiry not charged to the job (poison isolation).
        assert await attempts_and_rescues(settings, job_id) == (1, 1)
        paused.signal(signal.SIGCONT)  # wakes up believing it still holds the job
        owner = await paused.started()

        async def refused() -> bool:
            async with await open_connection(settings) as conn:
                cur = await conn.execute(
                    "SELECT count(*) AS n FROM stale_writes WHERE job_id = %s AND owner = %s",
                    (job_id, owner),
                )
                row = await cur.fetchone()
            # Refused by the fence, or never tried: on waking, the worker's own clock
            # says its lease went unconfirmed and it cancels the handler first.
            output = paused.output()
            fenced = "lost its lease" in output or "cancelling its handler" in output
            return bool(row and row["n"]) or fenced

        await wait_for(refused, 30, "the paused worker's refusal or self-fence", proof.workers)
        await asyncio.sleep(1.5)  # time for a late post to arrive, if one were sent
        after = await proof.job(job_id)
    assert after["post"]["state"] == "published"
    assert await attempts_and_rescues(settings, job_id) == (1, 1)
    assert len(sandbox.posts("mastodon")) == 1


async def test_a_429_storm_with_8_workers_keeps_within_the_quota_and_uses_no_attempt(
    settings: Settings, database: str, tmp_path: Path, sandbox_factory: object
) -> None:
    assert callable(sandbox_factory)
    config = SandboxConfig()
    config.quotas["mastodon"]["requests"] = Quota(20, 4.0)
    sandbox: Sandbox = sandbox_factory(config)
    # Small pools: eight workers must not take the database's every connection.
    storm = {
        **fault_env(3, mastodon={"error_429": 0.25, "retry_after": 1.0}),
        "HERALD_POOL_SIZE": "2",
    }
    async with world(
        settings, database, tmp_path, sandbox, HERALD_SOCIAL_QUOTAS="mastodon=20/4"
    ) as proof:
        account = await proof.link("mastodon")
        jobs = [
            (await proof.post(account["id"], f"storm {n}", f"key-{n}")).json()["job_id"]
            for n in range(30)
        ]
        for n in range(8):  # housekeeping in one of them is enough
            extra = ("--no-maintenance",) if n else ()
            proof.workers.start(*extra, concurrency=4, env=storm)
        settled = [await proof.settled(job_id, limit=240) for job_id in jobs]
    assert {job["state"] for job in settled} == {"succeeded"}
    assert {job["attempt"] for job in settled} == {1}  # every 429 was a snooze
    assert sum(job["snoozes"] for job in settled) > 0
    (counts,) = sandbox.counts()["accounts"]["mastodon"].values()
    assert counts["posts"] == counts["distinct"] == 30
    window = counts["quotas"]["requests"]
    assert window["peak"] <= 20 and window["rejected"] == 0


async def test_a_400_dead_letters_at_attempt_one_and_its_replay_publishes_once(
    proof: World, sandbox: Sandbox
) -> None:
    account = await proof.link("webhook")
    job_id = (await proof.post(account["id"], "bad request", "k")).json()["job_id"]
    broken = proof.workers.start(env=fault_env(4, webhook={"error_400": 1.0}))
    dead = await proof.settled(job_id)
    assert dead["state"] == "dead" and dead["attempt"] == 1
    broken.stop()
    (letter,) = (await proof.api.get("/dlq/social", headers=proof.headers)).json()
    proof.workers.start()  # the fixed deployment
    replay = await proof.api.post(
        f"/dlq/social/{letter['id']}/replay", json={"reason": "fixed"}, headers=proof.headers
    )
    assert replay.status_code == 202
    done = await proof.settled(replay.json()["job_id"])
    assert done["state"] == "succeeded" and done["post"]["state"] == "published"
    assert len(sandbox.posts("webhook")) == 1


async def test_a_revoked_account_fails_its_queued_posts_and_leaves_no_token_behind(
    proof: World, sandbox: Sandbox, settings: Settings
) -> None:
    account = await proof.link("mastodon")
    token = next(iter(sandbox.state.accounts.values())).credentials["access_token"]
    queued = [
        (await proof.post(account["id"], f"queued {n}", f"q{n}")).json()["job_id"] for n in range(3)
    ]
    response = await proof.api.delete(
        f"/accounts/{account['id']}", params={"reason": "user asked"}, headers=proof.headers
    )
    assert response.status_code == 202
    proof.workers.start()
    revoke = await proof.settled(response.json()["job_id"])
    assert revoke["state"] == "succeeded"
    for job_id in queued:
        job = await proof.settled(job_id)
        assert job["post"]["state"] == "failed" and "user asked" in job["post"]["error"]
    assert not sandbox.posts("mastodon")
    async with await open_connection(settings) as conn:
        cur = await conn.execute(
            "SELECT string_agg(t::text, ' ') AS everything FROM ("
            " SELECT to_jsonb(a)::text AS t FROM social_accounts a"
            " UNION ALL SELECT to_jsonb(j)::text FROM jobs j"
            " UNION ALL SELECT to_jsonb(d)::text FROM dead_letters d"
            " UNION ALL SELECT to_jsonb(l)::text FROM audit_log l) x"
        )
        row = await cur.fetchone()
        cur = await conn.execute("SELECT status, credentials FROM social_accounts")
        stored = await cur.fetchone()
    assert row is not None and token not in row["everything"]
    assert stored == {"status": "revoked", "credentials": None}
