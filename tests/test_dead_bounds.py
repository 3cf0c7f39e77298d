"""Dead letters get quarantine's bounds: redaction of configured fields, a retention and
a cap, enforced by a housekeeping duty; a dead letter still owed its compensation stays."""

from __future__ import annotations

import json
from typing import Any

import pytest

from herald import Client, Settings
from herald.db import AsyncConn, connect, conninfo
from herald.ops import deadletters
from herald.ops.dead_bounds import DUTY, DeadLetterBounds, enforce
from herald.ops.errors import Conflict
from herald.ops.housekeeping import Housekeeper
from tests.support import APP


async def _db(settings: Settings) -> AsyncConn:
    assert settings.database_url is not None
    return await connect(conninfo(settings.database_url, settings.schema))


async def _dead(
    conn: AsyncConn,
    job_id: int,
    *,
    payload: Any,
    cleanup: Any = None,
    days_ago: float = 0.0,
    settled: bool = True,
) -> int:
    cur = await conn.execute(
        "INSERT INTO dead_letters (job_id, kind, queue, version, payload, attempt, cleanup, "
        "errors, reason, created_at, cleanup_state, cleanup_done_at) "
        "VALUES (%s, 'fail', 'default', 1, %s, 3, %s, '[]', 'exhausted', "
        "herald_now() - make_interval(secs => %s), %s, "
        "CASE WHEN %s THEN herald_now() END) RETURNING id",
        (
            job_id,
            json.dumps(payload),
            None if cleanup is None else json.dumps(cleanup),
            days_ago * 86400,
            "done" if settled else "pending",
            settled,
        ),
    )
    row = await cur.fetchone()
    assert row is not None
    return int(row["id"])


async def _letters(conn: AsyncConn) -> dict[int, Any]:
    cur = await conn.execute("SELECT job_id, payload, cleanup FROM dead_letters ORDER BY job_id")
    return {r["job_id"]: (r["payload"], r["cleanup"]) for r in await cur.fetchall()}


def test_the_bounds_come_from_the_environment_and_bad_ones_are_refused() -> None:
    assert DeadLetterBounds.from_env({}) == DeadLetterBounds(30 * 86400.0, 10_000, ())
    read = DeadLetterBounds.from_env(
        {
            "HERALD_DEAD_LETTER_RETENTION": "3600",
            "HERALD_DEAD_LETTER_CAP": "50",
            "HERALD_DEAD_LETTER_REDACT": "email, token,email",
        }
    )
    assert read == DeadLetterBounds(3600.0, 50, ("email", "token"))
    for env, error in (
        ({"HERALD_DEAD_LETTER_RETENTION": "-1"}, "positive"),
        ({"HERALD_DEAD_LETTER_CAP": "0"}, "at least 1"),
        ({"HERALD_DEAD_LETTER_CAP": "many"}, "must be numbers"),
        ({"HERALD_DEAD_LETTER_REDACT": "ok,bad field;"}, "not a field name"),
    ):
        with pytest.raises(ValueError, match=error):
            DeadLetterBounds.from_env(env)


async def test_redaction_retention_and_cap_spare_owed_compensations(settings: Settings) -> None:
    async with await _db(settings) as conn:
        await _dead(conn, 1, payload={"email": "a@example.org", "id": 1}, cleanup={"token": "t"})
        await _dead(conn, 2, payload=["email"], days_ago=0.1)  # not an object: untouched
        await _dead(conn, 3, payload={"id": 3}, days_ago=40)  # past retention
        await _dead(conn, 4, payload={"id": 4}, days_ago=40, settled=False)  # owed: kept
        for job in range(5, 10):
            await _dead(conn, job, payload={"id": job, "email": f"{job}@example.org"})
        bounds = DeadLetterBounds(30 * 86400.0, 5, ("email", "token"))
        done = await enforce(conn, bounds)
        assert (done.redacted, done.expired, done.capped) == (6, 1, 2)
        kept = await _letters(conn)
        # The cap keeps the 5 newest settled ones; the owed one is neither counted nor dropped.
        assert sorted(kept) == [4, 5, 6, 7, 8, 9]
        assert kept[9] == ({"id": 9, "email": "[redacted]"}, None)
        assert "@example.org" not in json.dumps(kept)
        again = await enforce(conn, bounds)  # nothing left to do
        assert (again.redacted, again.expired, again.capped) == (0, 0, 0)
        await _dead(conn, 10, payload={"id": 10}, cleanup={"token": "secret", "files": []})
        await enforce(conn, bounds)
        assert (await _letters(conn))[10] == ({"id": 10}, {"token": "[redacted]", "files": []})


async def test_a_redacted_dead_letter_is_not_replayed_as_it_was(
    settings: Settings, client: Client
) -> None:
    async with await _db(settings) as conn:
        dead_id = await _dead(conn, 77, payload={"email": "a@example.org"})
        await enforce(conn, DeadLetterBounds(redacted_fields=("email",)))
        with pytest.raises(Conflict, match=r"redacted \(email\)"):
            await deadletters.replay(client, dead_id, actor="ops", reason="try again")


async def test_the_housekeeper_holds_the_duty_and_refuses_malformed_bounds(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    keeper = await Housekeeper.open(APP, settings)
    try:
        assert DUTY in {d.name for d in keeper.duties}
    finally:
        await keeper.close()
    monkeypatch.setenv("HERALD_DEAD_LETTER_CAP", "0")
    with pytest.raises(ValueError, match="HERALD_DEAD_LETTER_CAP"):
        await Housekeeper.open(APP, settings)
