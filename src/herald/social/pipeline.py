"""The social jobs: ``social.post`` (auth -> media -> publish) and ``social.revoke``.

``social.post`` (key ``post:<id>``) is a pipeline of three checkpointed steps, so a
retry resumes at the first unfinished one (:mod:`herald.social.steps` holds the
protocol):

1. ``auth``: the post is taken up (a replayed job takes it over), the account loaded and
   its credentials decrypted; the platform is asked to verify them unless a check
   within ``auth_trust`` seconds succeeded. A 401 marks the account ``needs_reauth``.
2. ``media``: the media URL fetched within limits, uploaded; the checkpoint holds the
   platform's media reference, so a retry never uploads it again.
3. ``publish``: the post created with an idempotency key bound to the post and step
   (stable across attempts, workers and dead-letter replays), or looked up first where
   the platform's deduplication cannot be trusted any more; the post row is marked
   published in the job's own completing transaction, so a worker that lost its lease
   records nothing.

Every platform error becomes the engine's outcome (:func:`outcome`): 429/503 snooze (no
attempt used), transient errors retry with backoff 1 s -> 5 s -> 25 s -> 125 s and go
to the dead letters after the 5th attempt, 4xx are permanent at once; the post row
keeps the redacted error. Limits and breakers: :mod:`herald.social.guards`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from psycopg.rows import dict_row
from psycopg_pool import AsyncConnectionPool

from herald import sql
from herald.config import Settings
from herald.context import JobContext
from herald.db import AsyncConn, Row
from herald.errors import JobOutcome, Permanent, Retry
from herald.ops import limits
from herald.ops.crypto import CipherError
from herald.ops.errors import NotFound
from herald.registry import Herald
from herald.social import accounts, guards, steps
from herald.social.adapters import Adapter, MediaRef, Post, adapter_for
from herald.social.admission import POST, REVOKE
from herald.social.config import SocialSettings
from herald.social.errors import Disposition, SocialError, to_job_outcome
from herald.social.runtime import Attempt, SocialRuntime, attach_runtime, social_runtime
from herald.social.tracing import traced_step

log = logging.getLogger(__name__)
Pool = AsyncConnectionPool[AsyncConn]

STEPS = ["auth", "media", "publish"]
T = TypeVar("T")

__all__ = ["POST", "REVOKE", "STEPS", "register_social", "social_runtime"]


def register_social(
    app: Herald,
    settings: Settings,
    social: SocialSettings | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> SocialRuntime:
    """Register ``social.post`` and ``social.revoke`` on ``app`` (internal kinds: the
    social routes admit them after checking the account)."""
    runtime = SocialRuntime(settings, social or SocialSettings.from_env(environ), environ)
    attach_runtime(app, runtime)
    config = runtime.social
    post = app.pipeline(
        POST,
        steps=STEPS,
        max_attempts=config.max_attempts,
        backoff=config.backoff,
        timeout=900.0,
        api_scope=None,
    )

    @post.step("auth")
    async def auth(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        with traced_step(payload, ctx.job_id, ctx.attempt, "auth"):
            return await _auth(_Job.of(runtime, ctx, payload))

    @post.step("media")
    async def media(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        with traced_step(payload, ctx.job_id, ctx.attempt, "media"):
            return await _media(_Job.of(runtime, ctx, payload))

    @post.step("publish")
    async def publish(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        with traced_step(payload, ctx.job_id, ctx.attempt, "publish"):
            return await _publish(_Job.of(runtime, ctx, payload))

    async def begin(pool: Pool, ctx: JobContext, payload: dict[str, Any]) -> None:
        job = _Job.of(runtime, ctx, payload)
        try:
            await _begin(job)
        except guards.Held as held:
            runtime.meters.snoozed(job.platform, held.reason)
            raise

    # Before each attempt (a Snooze here uses no attempt): see _begin.
    app.gate(POST, "social", begin)

    @app.task(REVOKE, max_attempts=config.max_attempts, backoff=config.backoff, api_scope=None)
    async def revoke(ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
        return await _revoke(runtime, ctx, int(payload["account_id"]))

    return runtime


@dataclass
class _Job:
    """One attempt of one ``social.post`` job, and what its steps share."""

    runtime: SocialRuntime
    ctx: JobContext
    post_id: int
    account_id: int
    platform: str

    @classmethod
    def of(cls, runtime: SocialRuntime, ctx: JobContext, payload: dict[str, Any]) -> _Job:
        try:
            return cls(
                runtime,
                ctx,
                int(payload["post_id"]),
                int(payload["account_id"]),
                str(payload["provider"]),
            )
        except (KeyError, TypeError, ValueError):
            raise Permanent("a social.post job needs post_id, account_id and provider") from None

    @property
    def pool(self) -> AsyncConnectionPool[AsyncConn]:
        return worker_pool(self.ctx)

    @property
    def state(self) -> Attempt:
        """What this attempt's start read (the gate runs before every attempt)."""
        state = self.runtime.attempts.get(self.ctx)
        if state is None:
            raise RuntimeError(f"job {self.ctx.job_id}: its attempt did not pass the gate")
        return state

    @property
    def keys(self) -> steps.StepKeys:
        # Bound to the post: the same on every attempt, worker and replay of its job.
        return steps.StepKeys.for_job(f"{self.runtime.job_namespace}:post:{self.post_id}")

    async def adapter(self) -> tuple[Row, Adapter]:
        """The account (still usable) and an adapter holding its credentials, as the
        attempt's start read it."""
        row = self.state.row
        if row is None:
            raise RuntimeError(f"post {self.post_id} is published: no platform call is due")
        if row["status"] != "active":
            reason = f"account {self.account_id} is {row['status']}"
            if row["status_reason"]:
                reason += f": {row['status_reason']}"
            raise await self.fail(reason)
        try:
            account = self.runtime.account(row)
        except CipherError as exc:
            raise await self.fail(str(exc)) from None
        return row, adapter_for(account, self.runtime.http(self.post_id))

    async def call(self, adapter: Adapter, action: Callable[[], Awaitable[T]]) -> T:
        """Run platform calls behind the gate, with the account's bucket, and report.

        The attempt's first call uses the verdict (and the token) of its start; later
        ones ask the gate again."""
        pool, state = self.pool, self.state
        gate, prepaid = state.gate, state.prepaid
        state.gate, state.prepaid = None, 0
        caller = guards.Caller(pool, self.platform, self.account_id, self.runtime.social, prepaid)
        token = guards.CURRENT.set(caller)
        try:
            try:
                if gate is None:
                    gate = await guards.pass_gate(
                        pool, self.platform, self.account_id, self.runtime.social
                    )
                result = await action()
            finally:
                guards.CURRENT.reset(token)
        except SocialError as exc:
            await guards.report(pool, caller, gate, exc, adapter.pacing)
            raise await self.outcome(exc) from None
        except guards.Held as held:  # the gate, or the account's bucket between requests
            self.runtime.meters.snoozed(self.platform, held.reason)
            raise
        await guards.report(pool, caller, gate, None, adapter.pacing)
        return result

    async def outcome(self, error: SocialError) -> JobOutcome:
        """The engine's outcome of ``error``, after recording what it means for the post."""
        text = error_text(error)
        if error.disposition is Disposition.REAUTH:
            await self.ctx.heartbeat()  # only while this attempt still holds the job
            async with self.pool.connection() as conn:
                await accounts.mark_needs_reauth(conn, self.account_id, text)
            self.runtime.meters.credential(self.platform, "reauth", "marked")
            return await self.fail(f"the account needs re-authorisation: {text}")
        if error.disposition is Disposition.SNOOZE:
            self.runtime.meters.snoozed(self.platform, "rate_limited")
        if error.disposition is Disposition.PERMANENT:
            return await self.fail(text)
        if error.disposition is Disposition.RETRY and self.ctx.attempt >= self.ctx.max_attempts:
            await self.record_failure(f"gave up after {self.ctx.attempt} attempts: {text}")
            return Retry(text)
        return to_job_outcome(error)

    async def fail(self, reason: str) -> Permanent:
        await self.record_failure(reason)
        return Permanent(reason)

    async def record_failure(self, reason: str) -> None:
        await self.ctx.heartbeat()  # LeaseLost: a later attempt owns the post now
        async with self.pool.connection() as conn:
            await conn.execute(
                sql.query("social_post_failed"), {"id": self.post_id, "error": reason[:8000]}
            )
        self.runtime.meters.post(self.platform, "failed")

    async def keep_renewed(self, row: Row, adapter: Adapter) -> None:
        renewed = adapter.updated_secrets()
        if renewed:
            async with self.pool.connection() as conn:
                await accounts.store_renewed(
                    conn, self.runtime.cipher, row, adapter.account, renewed
                )
            self.runtime.meters.credential(self.platform, "refresh", "stored")


def worker_pool(ctx: JobContext) -> AsyncConnectionPool[AsyncConn]:
    """The running worker's pool (as :mod:`herald.ops.limits` uses it): no connection
    is opened per job."""
    return ctx.pool


def error_text(error: SocialError) -> str:
    """The error's message and the platform's (redacted) body, for the operator."""
    text = str(error)
    if error.body:
        text += f" | platform said: {error.body}"
    return text[:4000]


async def _begin(job: _Job) -> None:
    """The start of an attempt, as one transaction (one commit): a slot of the account's
    concurrency, the post taken up with its account, the account's pause and the
    platform's breaker judged, and the first request's token of the account's bucket.
    Any Snooze rolls all of it back (the first publish try's stamp included); the
    attempt's steps reuse what it read."""
    ctx, social = job.ctx, job.runtime.social
    async with job.pool.connection() as conn, conn.pipeline(), conn.transaction():
        # Pipelined: the statements go out together and their answers come back at the
        # slot's, one round trip instead of five (none depends on another's answer).
        start = conn.cursor(row_factory=dict_row)
        await start.execute(
            sql.query("social_post_start"),
            {
                "id": job.post_id,
                "job_id": ctx.job_id,
                "step": ctx.step or STEPS[0],
                "verified_within": social.auth_trust,
            },
        )
        gate_row = conn.cursor(row_factory=dict_row)
        await gate_row.execute(
            sql.query("social_gate"), {"platform": job.platform, "account_id": job.account_id}
        )
        await limits.acquire_slot(
            conn,
            f"social:concurrency:account:{job.account_id}",
            social.account_concurrency,
            job_id=ctx.job_id,
            fence=ctx.fence,
        )
        row = await start.fetchone()
        if row is None:  # published by an earlier job: nothing left to do
            job.runtime.attempts[ctx] = Attempt(None)
            return
        seen = await gate_row.fetchone()
        assert seen is not None
        gate = await guards.judge(conn, seen, job.platform, job.account_id)
        # Not slept here (the slot's lock lasts to the commit): a short wait is the
        # transport's to sleep, before the first request.
        taken = await guards.try_token(conn, job.platform, job.account_id, social, sleep=False)
    job.runtime.attempts[ctx] = Attempt(row, gate, prepaid=1 if taken else 0)


async def _auth(job: _Job) -> dict[str, Any]:
    # Running this step again is a read, at most a verify call: no checkpoint needed.
    job.ctx.skip_checkpoint()
    taken = job.state.row
    if taken is None:
        return {"already_published": True}
    row, adapter = await job.adapter()
    if not row["recently_verified"]:
        info = await job.call(adapter, lambda: steps.check_auth(adapter))
        async with job.pool.connection() as conn:
            await accounts.mark_verified(conn, job.account_id)
        await job.keep_renewed(row, adapter)
        log.debug("account %s verified as %s", job.account_id, info.name)
    return {"media_url": taken["media_url"], "created_at": taken["post_created_at"].isoformat()}


async def _media(job: _Job) -> dict[str, Any]:
    checkpoint = job.ctx.checkpoint
    url = checkpoint.get("media_url")
    if checkpoint.get("already_published") or not url:
        job.ctx.skip_checkpoint()  # nothing uploaded: nothing to keep
        return {"media": []}
    row, adapter = await job.adapter()
    fetcher = job.runtime.media()
    ref = await job.call(
        adapter, lambda: steps.prepare_media(adapter, fetcher, str(url), key=job.keys.media)
    )
    await job.keep_renewed(row, adapter)
    media = [ref.to_json()]
    async with job.pool.connection() as conn:
        await conn.execute(
            sql.query("social_post_step"),
            {
                "id": job.post_id,
                "job_id": job.ctx.job_id,
                "step": "media",
                "media": json.dumps(media),
            },
        )
    return {"media": media}


async def _publish(job: _Job) -> dict[str, Any]:
    checkpoint = job.ctx.checkpoint
    post = job.state.row
    if checkpoint.get("already_published") or post is None:
        return {"post_id": job.post_id, "already_published": True}
    row, adapter = await job.adapter()
    media = [MediaRef.from_json(m) for m in checkpoint.get("media") or []]
    content = Post(text=post["message"], created_at=_created_at(checkpoint, post))
    try:
        adapter.check_post(content, media)  # refused before any call: permanent at once
    except SocialError as exc:
        raise await job.outcome(exc) from None

    async def create() -> Any:
        since = post["since_first_try"]
        if since is None:  # the start did not stamp the first try: stamp it now
            async with job.pool.connection() as conn:
                cur = conn.cursor(row_factory=dict_row)
                await cur.execute(sql.query("social_post_publish_started"), {"id": job.post_id})
                mark = await cur.fetchone()
            since = float(mark["since_first_try"]) if mark is not None else 0.0
        return await steps.publish(
            adapter,
            content,
            media,
            key=job.keys.publish,
            since_first_try=since if since > 0 else None,
        )

    published = await job.call(adapter, create)
    await job.keep_renewed(row, adapter)
    result = {
        "post_id": job.post_id,
        "platform": published.platform,
        "platform_post_id": published.post_id,
        "url": published.url,
        "recovered": published.recovered,
    }
    async with job.ctx.transaction(result) as conn:
        job.runtime.attempts.pop(job.ctx, None)
        await conn.execute(
            sql.query("social_post_published"),
            {
                "id": job.post_id,
                "job_id": job.ctx.job_id,
                "post_id": published.post_id,
                "url": published.url,
            },
        )
    job.runtime.meters.post(job.platform, "published")
    return result


def _created_at(checkpoint: Mapping[str, Any], post: Row) -> datetime:
    raw = checkpoint.get("created_at")
    if isinstance(raw, str):
        return datetime.fromisoformat(raw)
    created: datetime = post.get("post_created_at") or post["created_at"]
    return created


async def _revoke(runtime: SocialRuntime, ctx: JobContext, account_id: int) -> dict[str, Any]:
    """Revoke the credentials at the platform, then wipe them here (whatever it said)."""
    pool = worker_pool(ctx)
    async with pool.connection() as conn:
        try:
            row = await accounts.get_account(conn, account_id)
        except NotFound:
            raise Permanent(f"account {account_id} does not exist") from None
    if row.status == "revoked":
        return {"account_id": account_id, "remote": False, "detail": "revoked already"}
    remote, detail = False, "no credentials to revoke"
    try:
        adapter = adapter_for(accounts.decrypt_account(runtime.cipher, row), runtime.http())
        caller = guards.Caller(pool, row.provider, account_id, runtime.social)
        token = guards.CURRENT.set(caller)
        try:
            revoked = await adapter.revoke()
        finally:
            guards.CURRENT.reset(token)
        remote, detail = revoked.remote, revoked.detail
    except SocialError as exc:
        last = ctx.attempt >= ctx.max_attempts
        if exc.disposition is Disposition.SNOOZE or (
            exc.disposition is Disposition.RETRY and not last
        ):
            raise to_job_outcome(exc) from None
        detail = f"the platform's revoke call failed ({error_text(exc)}); credentials wiped here"
    except CipherError as exc:
        detail = f"the stored credentials could not be read ({exc}); wiped"
    result = {"account_id": account_id, "remote": remote, "detail": detail}
    reason = f"{row.status_reason or 'disconnected'} | {detail}"[:4000]
    async with ctx.transaction(result) as conn:
        await accounts.mark_revoked(conn, account_id, reason)
    outcome = "ok" if remote else ("failed" if "failed" in detail else "local")
    runtime.meters.credential(row.provider, "revoke", outcome)
    return result
