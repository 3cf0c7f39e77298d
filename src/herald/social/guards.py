"""Guards shared by every worker: per-account token buckets, pauses, circuit breakers.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): before
a step calls its platform, :func:`pass_gate` snoozes the job (no attempt used) while
the account is paused or the platform's breaker is open; every single platform call
then takes a token from the account's bucket in :class:`QuotaTransport`. After the
step, :func:`report` feeds the breaker and the account's pause. All of it lives in
PostgreSQL, so 1 or 8 worker processes see the same limits.

* **Token bucket** per (platform, account): the engine's buckets
  (:func:`herald.ops.limits.acquire`) sized from the platform's documented quota so no
  window of its length can see more calls than the quota allows. A wait shorter than
  ``short_wait`` is slept in place; a longer one snoozes the job.
* **Pause** per account: a 429's reset time, or - when the remaining-quota header runs
  low - the pace the adapter's :class:`~herald.social.ratelimit.SlowDown` advises.
* **Circuit breaker** per platform: ``breaker_failures`` consecutive transient failures
  open it for ``breaker_open`` seconds; then one job probes (half open), and its
  success closes it, its failure opens it again.
"""

from __future__ import annotations

import asyncio
import contextvars
import random
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx
from psycopg_pool import AsyncConnectionPool

from herald import sql
from herald.db import AsyncConn
from herald.errors import Snooze
from herald.ops import limits
from herald.rows import one_row
from herald.social.config import SocialSettings
from herald.social.errors import Disposition, RateLimited, SocialError
from herald.social.ratelimit import SlowDown

Pool = AsyncConnectionPool[AsyncConn]
PROBE_SECONDS = 60.0  # a probe that never reports back frees the breaker after this


@dataclass
class Caller:
    """Who the platform calls of the running step are made for."""

    pool: Pool
    platform: str
    account_id: int
    settings: SocialSettings
    # Tokens of the account's bucket taken already (with the attempt's start, in the
    # same transaction): the next requests spend these before asking the database.
    prepaid: int = 0


# Set by the step around its platform calls; read by QuotaTransport on every request.
CURRENT: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "herald_social_caller", default=None
)


@dataclass(frozen=True)
class Gate:
    """What the gate saw: whether this job is the breaker's probe and if it was closed."""

    probe: bool
    clean: bool  # breaker closed with no failures counted: a success writes nothing


class Held(Snooze):
    """A snooze a guard decided; ``reason`` names which (see herald.social.meters)."""

    def __init__(self, seconds: float, message: str, reason: str) -> None:
        super().__init__(seconds, message)
        self.reason = reason


def bucket_key(platform: str, account_id: int) -> str:
    return f"social:{platform}:account:{account_id}"


# Per (event loop, bucket): the callers of this process waiting for a token of one
# account, queued so that one at a time asks the database and sleeps until its token
# is due, instead of all of them asking again at every refill (a herd of refusals).
_QUEUES: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = weakref.WeakValueDictionary()


async def take_token(caller: Caller) -> None:
    """One call's token from the account's bucket; short waits are slept in place."""
    if caller.prepaid > 0:
        caller.prepaid -= 1
        return
    args = (caller.pool, caller.platform, caller.account_id, caller.settings)
    place = (id(asyncio.get_running_loop()), bucket_key(caller.platform, caller.account_id))
    queue = _QUEUES.get(place)
    # Nobody of ours is waiting: ask straight away (the usual case).
    if (queue is None or not queue.locked()) and await try_token(*args, sleep=False):
        return
    queue = _QUEUES.get(place)
    if queue is None:
        queue = _QUEUES[place] = asyncio.Lock()
    async with queue:
        while not await try_token(*args):
            pass


async def try_token(
    source: Pool | AsyncConn,
    platform: str,
    account_id: int,
    settings: SocialSettings,
    *,
    sleep: bool = True,
) -> bool:
    """Take a token of the account's bucket: True when taken (or no quota applies);
    after a short wait, False (ask again; slept here unless ``sleep`` is False, as inside
    a transaction that holds locks); a longer wait snoozes the job."""
    quota = settings.quota(platform)
    if quota is None:
        return True
    rate, burst = quota.bucket()
    try:
        await limits.acquire(source, bucket_key(platform, account_id), rate, burst)
        return True
    except Snooze as wait:
        if wait.seconds > settings.short_wait:
            raise Held(wait.seconds, str(wait), "quota") from None
        if sleep:
            await asyncio.sleep(wait.seconds)
        return False


class QuotaTransport(httpx.AsyncBaseTransport):
    """Takes a token of the calling account's bucket before each platform request."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        caller = CURRENT.get()
        if caller is not None and request.extensions.get("herald.platform"):
            await take_token(caller)
        return await self._inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self._inner.aclose()


async def pass_gate(pool: Pool, platform: str, account_id: int, settings: SocialSettings) -> Gate:
    """Snooze (no attempt used) while the account is paused or the breaker is open."""
    async with pool.connection() as conn:
        row = await one_row(conn, "social_gate", {"platform": platform, "account_id": account_id})
        return await judge(conn, row, platform, account_id)


async def judge(conn: AsyncConn, row: Mapping[str, Any], platform: str, account_id: int) -> Gate:
    """The gate's verdict on what ``social_gate`` (or ``social_post_start``) read: a
    :class:`Gate`, or Snooze while the account is paused or the breaker is open; of an
    open breaker whose time is up this caller becomes the one probe, if nobody else is."""
    if row["paused_for"] > 0:
        raise Held(
            row["paused_for"],
            f"account {account_id} paused: {row['paused_because'] or 'rate limit'}",
            "paused",
        )
    state = row["breaker"]
    if state == "closed":
        return Gate(probe=False, clean=row["failures"] == 0)
    if state == "open" and row["open_for"] > 0:
        raise Held(
            row["open_for"] + random.uniform(0, 1),
            f"{platform} circuit breaker open ({row['failures']} failures in a row)",
            "breaker",
        )
    cur = await conn.execute(
        sql.query("social_breaker_probe"), {"platform": platform, "probe_s": PROBE_SECONDS}
    )
    if await cur.fetchone() is not None:
        return Gate(probe=True, clean=False)
    wait = max(1.0, row["probe_for"] or 1.0)
    raise Held(wait * random.uniform(0.5, 1.0), f"{platform} circuit breaker half open", "breaker")


async def report(
    pool: Pool,
    caller: Caller,
    gate: Gate | None,
    error: SocialError | None,
    pacing: SlowDown | None,
) -> None:
    """Feed the breaker and the account's pause with how the step's calls went."""
    if error is None and (gate is None or gate.clean) and (pacing is None or pacing.seconds <= 0):
        return  # the usual case: nothing to write, no connection taken
    async with pool.connection() as conn:
        if error is None:
            if gate is not None and not gate.clean:
                await conn.execute(
                    sql.query("social_breaker_success"), {"platform": caller.platform}
                )
        elif error.disposition is Disposition.RETRY:
            await conn.execute(
                sql.query("social_breaker_failure"),
                {
                    "platform": caller.platform,
                    "threshold": caller.settings.breaker_failures,
                    "open_s": caller.settings.breaker_open,
                },
            )
        elif gate is not None and not gate.clean:
            # The platform answered (a 4xx or a 429): it is up, whatever it said.
            await conn.execute(sql.query("social_breaker_success"), {"platform": caller.platform})
        if isinstance(error, RateLimited) and error.delay:
            await pause(conn, caller.account_id, error.delay, f"{caller.platform} said 429")
        elif pacing is not None and pacing.seconds > 0:
            await pause(conn, caller.account_id, pacing.seconds, pacing.reason)


async def pause(conn: AsyncConn, account_id: int, seconds: float, reason: str) -> None:
    await conn.execute(
        sql.query("social_throttle_set"),
        {"account_id": account_id, "seconds": float(seconds), "reason": reason[:1000]},
    )


def breaker_states(rows: list[Mapping[str, object]]) -> dict[str, str]:
    return {str(r["platform"]): str(r["state"]) for r in rows}
