"""The account's token bucket as the platform calls meet it, on the real database."""

from __future__ import annotations

import asyncio

from herald import sql
from herald.client import Client
from herald.config import Settings
from herald.social import guards
from herald.social.config import Quota, SocialSettings
from tests.support import APP


async def test_waiting_callers_queue_for_their_account_instead_of_asking_in_a_herd(
    settings: Settings,
) -> None:
    takers = 30
    quota = Quota(41, 1.0)  # a bucket of 40 tokens a second, one at a time
    social = SocialSettings(quotas={"mastodon": quota}, short_wait=5.0)
    async with await Client.open(APP, settings) as client:
        callers = [guards.Caller(client.pool, "mastodon", 7, social) for _ in range(takers)]
        started = asyncio.get_running_loop().time()
        await asyncio.gather(*(guards.take_token(c) for c in callers))
        took = asyncio.get_running_loop().time() - started
        async with client.pool.connection() as conn:
            cur = await conn.execute(sql.query("ops_rate_stats"))
            (bucket,) = [r for r in await cur.fetchall() if r["key"] == "social:mastodon:account:7"]
    assert bucket["granted"] == takers
    # The bucket's pace held: the tokens after the first came at its rate.
    assert took >= (takers - 1) / 40 * 0.9
    # Queued, each waiter was refused about twice (on arrival, then once while its
    # token was not due yet); asking in a herd at every refill cost 3.5 a waiter here.
    assert bucket["denied"] <= 2.5 * takers, bucket["denied"]
