"""``herald social demo``: three platforms, posts with media, 20 % faults, once each.

Starts the sandbox platform server on loopback, links a Mastodon, a Bluesky and a
Facebook Pages account through the HTTP API (in process), submits one post with media
to each - every request twice, as a client retrying after a lost answer would - and
runs a worker whose platform calls meet a seeded FailureSimulator (20 % transient
faults: 5xx, 429, timeouts, dropped connections). Prints each post's outcome and the
sandbox's count of posts per platform: one each, no duplicate.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Mapping
from typing import Any

import httpx

from herald.api import ApiSettings, create_app, create_key
from herald.backoff import Backoff
from herald.client import open_connection
from herald.config import Settings
from herald.migrate import migrate
from herald.ops.crypto import KEYS_VARIABLE, TokenCipher
from herald.registry import Herald
from herald.social.accounts import PRIMARY_SECRET
from herald.social.config import SocialSettings
from herald.social.pipeline import register_social
from herald.social.sandbox import Sandbox
from herald.social.simulator import FAULTS_VARIABLE
from herald.states import TERMINAL_JOB_STATES, JobState
from herald.worker import Worker

PLATFORMS = ("mastodon", "bluesky", "facebook")
_TIMEOUT = 300.0


def fault_plan(rate: float, seed: int) -> str:
    """Transient faults at ``rate`` on every platform, split over 5xx, 429, timeouts, drops.

    Facebook's throttling answer says when access comes back in whole minutes, so a
    simulated one parks the post for a minute: the demo gives Facebook its share of
    faults as 5xx, timeouts and drops only, to finish in seconds.
    """
    share = rate / 4
    profile = {"error_5xx": share, "error_429": share, "timeout": share, "drop": share}
    third = rate / 3
    facebook = {"error_5xx": third, "timeout": third, "drop": third}
    return json.dumps({"seed": seed, "platforms": {"*": profile, "facebook": facebook}})


def demo_environ(rate: float, seed: int) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault(KEYS_VARIABLE, TokenCipher.generate_key())
    if rate > 0:
        env[FAULTS_VARIABLE] = fault_plan(rate, seed)
    return env


async def run_demo(settings: Settings, *, faults: float = 0.2, seed: int = 7) -> int:
    env = demo_environ(faults, seed)
    async with await open_connection(settings) as conn:
        await migrate(conn, settings.schema)
    # A demo should not wait out the production backoff (1 s -> 5 s -> 25 s) and breaker
    # (30 s), nor run out of attempts to a fault rate far above any real platform's.
    social = SocialSettings(
        max_attempts=10,
        backoff=Backoff(base=0.2, factor=5.0, jitter=0.2),
        breaker_open=1.0,
        breaker_failures=8,
    )
    app = Herald()
    register_social(app, settings, social, environ=env)
    with Sandbox() as sandbox:
        print(f"sandbox platforms on {sandbox.url}; faults: {faults:.0%} (seed {seed})")
        api = create_app(app, settings, ApiSettings())
        async with (
            api.router.lifespan_context(api),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=api), base_url="http://herald.local"
            ) as http,
        ):
            async with await open_connection(settings) as conn:
                key = await create_key(conn, f"social-demo-{int(time.time())}", ["admin"])
            headers = {"Authorization": f"Bearer {key.token}"}
            jobs = await _submit(http, headers, sandbox)
            worker = Worker(app, settings=settings, concurrency=20)
            running = asyncio.create_task(worker.run())
            try:
                outcomes = await _settle(http, headers, jobs)
            finally:
                worker.stop()
                await running
    return _report(outcomes, sandbox_counts=_counts(sandbox))


async def _submit(
    http: httpx.AsyncClient, headers: Mapping[str, str], sandbox: Sandbox
) -> dict[str, int]:
    jobs: dict[str, int] = {}
    for platform in PLATFORMS:
        made = sandbox.add_account(platform, f"herald-demo-{platform}")
        account = made.account(sandbox.url)
        primary = PRIMARY_SECRET[platform]
        linked = await http.post(
            "/accounts",
            headers=headers,
            json={
                "provider": platform,
                "name": made.name,
                "page_id": account.ref,
                "base_url": account.base_url,
                "access_token": made.credentials[primary],
                "credentials": {k: v for k, v in made.credentials.items() if k != primary},
                "options": dict(account.options),
                "reason": "social demo",
            },
        )
        linked.raise_for_status()
        body = {
            "account_id": linked.json()["id"],
            "message": f"Hello from Herald to {platform}",
            "media_url": sandbox.media_url("demo.png", size=4096),
        }
        ikey = {**headers, "Idempotency-Key": f"demo-{platform}-{time.time_ns()}"}
        first = await http.post("/social/posts", json=body, headers=ikey)
        again = await http.post("/social/posts", json=body, headers=ikey)  # a client retry
        first.raise_for_status()
        assert again.json()["job_id"] == first.json()["job_id"]
        jobs[platform] = int(first.json()["job_id"])
        print(f"  {platform:9} account {linked.json()['id']} linked; post job {jobs[platform]}")
    return jobs


async def _settle(
    http: httpx.AsyncClient, headers: Mapping[str, str], jobs: Mapping[str, int]
) -> dict[str, dict[str, Any]]:
    deadline = time.monotonic() + _TIMEOUT
    outcomes: dict[str, dict[str, Any]] = {}
    while len(outcomes) < len(jobs) and time.monotonic() < deadline:
        for platform, job_id in jobs.items():
            if platform in outcomes:
                continue
            job = (await http.get(f"/jobs/{job_id}", headers=headers)).json()
            if job["state"] in TERMINAL_JOB_STATES:
                outcomes[platform] = job
        await asyncio.sleep(0.2)
    return outcomes


def _counts(sandbox: Sandbox) -> dict[str, tuple[int, int]]:
    found: dict[str, tuple[int, int]] = {}
    for platform, accounts in sandbox.counts()["accounts"].items():
        posts = sum(a["posts"] for a in accounts.values())
        duplicates = sum(a["duplicates"] for a in accounts.values())
        found[platform] = (posts, duplicates)
    return found


def _report(
    outcomes: Mapping[str, Mapping[str, Any]], sandbox_counts: Mapping[str, tuple[int, int]]
) -> int:
    print("\noutcomes:")
    ok = True
    for platform in PLATFORMS:
        job = outcomes.get(platform)
        if job is None:
            print(f"  {platform:9} did not finish in {_TIMEOUT:.0f} s")
            ok = False
            continue
        post = job.get("post") or {}
        print(
            f"  {platform:9} job {job['id']} {job['state']} after {job['attempt']} attempt(s), "
            f"{job['snoozes']} snooze(s): {post.get('state')} "
            f"{post.get('platform_url') or post.get('error') or ''}"
        )
        ok = ok and job["state"] == JobState.SUCCEEDED
    print("\nposts the sandbox received, per platform:")
    for platform in PLATFORMS:
        posts, duplicates = sandbox_counts.get(platform, (0, 0))
        print(f"  {platform:9} {posts} post(s), {duplicates} duplicate(s)")
        ok = ok and posts == 1 and duplicates == 0
    return 0 if ok else 1
