"""Recurring schedules: recurrence math, catch-up once, misfire policies, concurrency.

Time is injected: pure functions take ``now``; database tests move ``herald_now()`` with
``herald.clock_offset`` on the connection that creates or ticks.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest

from herald import cli
from herald.client import Client
from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo
from herald.errors import UnknownKind
from herald.ops import audit
from herald.ops.errors import AuditInfoMissing
from herald.schedules import (
    Misfire,
    Recurrence,
    RecurrenceError,
    ScheduleError,
    Scheduler,
    ScheduleSpec,
    create_schedule,
    delete_schedule,
    get_schedule,
    latest_at_or_before,
    list_fires,
    list_schedules,
    next_after,
    pause_schedule,
    plan,
    recurrence,
    resume_schedule,
    update_schedule,
)
from tests.conftest import ROOT
from tests.eventually import eventually
from tests.support import APP

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
ACTOR, REASON = "ops@example.org", "test"


def berlin(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, sec: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, sec, tzinfo=BERLIN)


def slots(rule: Recurrence, after: datetime, n: int) -> list[datetime]:
    found = []
    for _ in range(n):
        after = next_after(rule, after)
        found.append(after)
    return found


def daily(at: time, **extra: Any) -> ScheduleSpec:
    return ScheduleSpec(
        "noop", extra.pop("key", "report"), "daily", "Europe/Berlin", at=at, **extra
    )


# --- recurrence math (pure) ---------------------------------------------------------------


def test_monthly_on_the_31st_uses_the_last_day_of_short_months_without_drifting() -> None:
    rule = Recurrence("monthly", "Europe/Berlin", at=time(9), day=31)
    leap = [s.astimezone(BERLIN) for s in slots(rule, berlin(2028, 1, 1), 5)]
    assert [s.date() for s in leap] == [
        date(2028, 1, 31),
        date(2028, 2, 29),
        date(2028, 3, 31),
        date(2028, 4, 30),
        date(2028, 5, 31),
    ]
    assert {s.time() for s in leap} == {time(9)}
    plain = [s.astimezone(BERLIN).date() for s in slots(rule, berlin(2027, 1, 31, 10), 2)]
    assert plain == [date(2027, 2, 28), date(2027, 3, 31)]


def test_daily_keeps_its_local_time_across_both_berlin_clock_changes() -> None:
    rule = Recurrence("daily", "Europe/Berlin", at=time(9, 15))
    spring = slots(rule, berlin(2026, 3, 27, 12), 4)  # clocks go forward on 29 March
    autumn = slots(rule, berlin(2026, 10, 23, 12), 4)  # and back on 25 October
    for found in (spring, autumn):
        assert {s.astimezone(BERLIN).time() for s in found} == {time(9, 15)}
    assert [s.hour for s in spring] == [8, 7, 7, 7]  # UTC hour shifts with the offset
    assert [s.hour for s in autumn] == [7, 8, 8, 8]
    # A day across a change is 23 or 25 hours long: slots are not 24 hours apart.
    assert spring[1] - spring[0] == timedelta(hours=23)
    assert autumn[1] - autumn[0] == timedelta(hours=25)


def test_nonexistent_local_time_moves_forward_and_ambiguous_takes_the_first() -> None:
    rule = Recurrence("daily", "Europe/Berlin", at=time(2, 30))
    spring = slots(rule, berlin(2026, 3, 28, 12), 2)
    # 02:30 does not exist on 29 March: it fires when the gap ends, 03:00 CEST.
    assert spring[0] == datetime(2026, 3, 29, 1, 0, tzinfo=UTC)
    assert spring[1].astimezone(BERLIN).time() == time(2, 30)
    autumn = slots(rule, berlin(2026, 10, 24, 12), 2)
    # 02:30 happens twice on 25 October: only the first (CEST) one is a slot.
    assert autumn[0] == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert autumn[1] == datetime(2026, 10, 26, 1, 30, tzinfo=UTC)
    # During the repeated hour the slot already passed counts as the latest one.
    assert latest_at_or_before(rule, datetime(2026, 10, 25, 1, 10, tzinfo=UTC)) == autumn[0]


def test_weekly_fires_on_its_iso_weekday() -> None:
    rule = Recurrence("weekly", "Europe/Berlin", at=time(7), weekday=1)  # Mondays
    found = [s.astimezone(BERLIN) for s in slots(rule, berlin(2026, 6, 3), 3)]
    assert [s.date() for s in found] == [date(2026, 6, 8), date(2026, 6, 15), date(2026, 6, 22)]
    assert next_after(rule, berlin(2026, 6, 8, 6, 59)) == berlin(2026, 6, 8, 7)


def test_cron_expression_in_a_zone_including_a_dst_gap() -> None:
    rule = Recurrence("cron", "America/New_York", cron="*/15 9-10 * * 1-5")
    start = datetime(2026, 6, 5, 10, 40, tzinfo=NEW_YORK)  # a Friday
    found = [s.astimezone(NEW_YORK) for s in slots(rule, start, 3)]
    assert found == [
        datetime(2026, 6, 5, 10, 45, tzinfo=NEW_YORK),
        datetime(2026, 6, 8, 9, 0, tzinfo=NEW_YORK),
        datetime(2026, 6, 8, 9, 15, tzinfo=NEW_YORK),
    ]
    every_half_hour = Recurrence("cron", "Europe/Berlin", cron="*/30 * * * *")
    gap = [s.astimezone(BERLIN) for s in slots(every_half_hour, berlin(2026, 3, 29, 1, 15), 3)]
    # 02:00 and 02:30 do not exist; both land on 03:00, which fires once.
    assert [s.time() for s in gap] == [time(1, 30), time(3, 0), time(3, 30)]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"frequency": "hourly", "timezone": "UTC", "at": time(1)}, "frequency must be"),
        ({"frequency": "daily", "timezone": "Mars/Olympus", "at": time(1)}, "unknown time zone"),
        ({"frequency": "daily", "timezone": "UTC"}, "local time of day"),
        ({"frequency": "weekly", "timezone": "UTC", "at": time(1), "weekday": 0}, "weekday"),
        ({"frequency": "monthly", "timezone": "UTC", "at": time(1), "day": 32}, "day must"),
        ({"frequency": "daily", "timezone": "UTC", "at": time(1), "day": 3}, "does not apply"),
        ({"frequency": "cron", "timezone": "UTC", "cron": "* * * * * *"}, "five fields"),
        ({"frequency": "cron", "timezone": "UTC", "cron": "61 * * * *"}, "invalid cron"),
        ({"frequency": "cron", "timezone": "UTC", "cron": "0 0 * * *", "at": time(1)}, "cron"),
    ],
)
def test_bad_rules_are_refused_with_a_clear_error(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(RecurrenceError, match=message):
        Recurrence(**fields)


def test_plan_catches_up_once_and_advances_from_the_scheduled_slot() -> None:
    rule = Recurrence("daily", "Europe/Berlin", at=time(9))
    due, now = berlin(2026, 6, 8, 9), berlin(2026, 6, 10, 12, 34, 56)
    once = plan(rule, due, now)
    assert once.fire == [berlin(2026, 6, 10, 9)]
    assert once.coalesced == 2
    assert once.next_due == berlin(2026, 6, 11, 9)  # not now + 1 day: no drift
    every = plan(rule, due, now, misfire=Misfire.ALL, max_fires=2)
    assert every.fire == [berlin(2026, 6, 8, 9), berlin(2026, 6, 9, 9)]
    assert every.next_due == berlin(2026, 6, 10, 9)  # still due: the next tick goes on
    late = plan(rule, due, now, misfire=Misfire.SKIP, grace=60)
    assert (late.fire, late.skipped) == ([], 3)
    timely = plan(rule, due, berlin(2026, 6, 10, 9, 0, 30), misfire=Misfire.SKIP, grace=60)
    assert (timely.fire, timely.skipped) == ([berlin(2026, 6, 10, 9)], 2)
    assert plan(rule, due, berlin(2026, 6, 8, 8)).fire == []  # not due yet


def test_coalesced_count_is_exact_then_saturates(monkeypatch: pytest.MonkeyPatch) -> None:
    minutely = Recurrence("cron", "UTC", cron="* * * * *")
    due = datetime(2026, 6, 10, 10, tzinfo=UTC)
    now = due + timedelta(minutes=30, seconds=5)
    assert plan(minutely, due, now).coalesced == 30  # 31 slots, one fire
    monkeypatch.setattr(recurrence, "COUNT_LIMIT", 20)
    caught_up = plan(minutely, due, now)
    assert caught_up.coalesced == 19
    assert caught_up.fire == [due + timedelta(minutes=30)]
    assert caught_up.next_due == due + timedelta(minutes=31)


# --- database -----------------------------------------------------------------------------


async def set_clock(conn: AsyncConn, instant: datetime) -> None:
    """Make herald_now() on ``conn`` read ``instant`` (then run on in real time)."""
    await conn.execute(
        "SELECT set_config('herald.clock_offset', (%s::timestamptz - now())::text, false)",
        (instant,),
    )


@pytest.fixture
async def conn(settings: Settings) -> AsyncIterator[AsyncConn]:
    assert settings.database_url is not None
    c = await connect(conninfo(settings.database_url, settings.schema))
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture
def scheduler(client: Client) -> Scheduler:
    return Scheduler(client, batch=100)


async def scalar(conn: AsyncConn, query: str, *params: object) -> Any:
    cur = await conn.execute(query, params)
    row = await cur.fetchone()
    assert row is not None
    return next(iter(row.values()))


# Copies of the latest schedule under keys prefix-1 .. prefix-n (faster than n creates).
_CLONE = """
INSERT INTO schedules (kind, key, payload, frequency, timezone, at_time, misfire,
                       max_catchup, next_due_at)
SELECT kind, %s || i, payload, frequency, timezone, at_time, misfire, max_catchup, next_due_at
FROM (SELECT * FROM schedules ORDER BY id DESC LIMIT 1) s, generate_series(1, %s) i
"""


async def test_daily_overdue_three_days_fires_once_and_is_next_due_tomorrow(
    conn: AsyncConn, scheduler: Scheduler
) -> None:
    await set_clock(conn, berlin(2026, 6, 7, 10))
    created = await create_schedule(conn, daily(time(9), payload={"report": "daily"}), app=APP)
    assert created.next_due_at == berlin(2026, 6, 8, 9)

    await set_clock(conn, berlin(2026, 6, 11, 9, 30))  # 8, 9, 10 and 11 June all missed
    result = await scheduler.tick(conn)
    assert (result.taken, result.fired, result.coalesced) == (1, 1, 3)
    row = await get_schedule(conn, created.id)
    assert row is not None
    assert row.next_due_at.astimezone(BERLIN) == berlin(2026, 6, 12, 9)
    assert row.last_slot == berlin(2026, 6, 11, 9)
    assert (row.fired_count, row.last_coalesced, row.coalesced_count) == (1, 3, 3)
    assert row.last_fired_at is not None and row.last_fired_at >= berlin(2026, 6, 11, 9, 30)
    jobs = await (await conn.execute("SELECT kind, key, payload FROM jobs")).fetchall()
    assert jobs == [{"kind": "noop", "key": "report", "payload": {"report": "daily"}}]
    assert (await scheduler.tick(conn)).taken == 0  # nothing more until tomorrow


async def test_a_tick_across_the_spring_change_keeps_the_local_time(
    conn: AsyncConn, scheduler: Scheduler
) -> None:
    await set_clock(conn, berlin(2026, 3, 28, 10))
    created = await create_schedule(conn, daily(time(9)), app=APP)
    await set_clock(conn, berlin(2026, 3, 29, 10))
    assert (await scheduler.tick(conn)).fired == 1
    row = await get_schedule(conn, created.id)
    assert row is not None
    assert row.last_slot == datetime(2026, 3, 29, 7, tzinfo=UTC)  # 09:00 CEST
    assert row.next_due_at == datetime(2026, 3, 30, 7, tzinfo=UTC)


async def test_a_thousand_overdue_schedules_are_taken_in_bounded_batches(
    conn: AsyncConn, scheduler: Scheduler
) -> None:
    await set_clock(conn, berlin(2026, 6, 7, 10))
    await create_schedule(conn, daily(time(9), key="object-0"))
    await conn.execute(_CLONE, ("object-", 999))
    await set_clock(conn, berlin(2026, 6, 10, 12))
    per_tick = []
    while True:
        before = await scalar(conn, "SELECT count(*) FROM jobs")
        result = await scheduler.tick(conn)
        created = await scalar(conn, "SELECT count(*) FROM jobs") - before
        assert result.taken <= 100 and created == result.fired
        if result.taken == 0:
            break
        per_tick.append(result.fired)
    assert per_tick == [100] * 10
    assert await scalar(conn, "SELECT count(DISTINCT key) FROM jobs") == 1000
    assert (
        await scalar(
            conn, "SELECT count(*) FROM schedules WHERE next_due_at <= %s", berlin(2026, 6, 10, 12)
        )
        == 0
    )


async def test_three_concurrent_schedulers_fire_every_due_slot_exactly_once(
    settings: Settings, conn: AsyncConn, client: Client
) -> None:
    assert settings.database_url is not None
    await set_clock(conn, berlin(2026, 6, 7, 10))
    await create_schedule(conn, daily(time(9), key="once-0"))
    await conn.execute(_CLONE, ("once-", 149))
    await create_schedule(conn, daily(time(9), key="all-0", misfire="all", max_catchup=5))
    await conn.execute(_CLONE, ("all-", 149))
    now = berlin(2026, 6, 10, 12)  # three slots due for each schedule

    # Each scheduler has its own connection, opened before any starts ticking.
    conns = [await connect(conninfo(settings.database_url, settings.schema)) for _ in range(3)]
    for own in conns:
        await set_clock(own, now)

    async def run_one(own: AsyncConn) -> list[int]:
        scheduler = Scheduler(client, batch=20)
        fired = []
        while (result := await scheduler.tick(own)).taken:
            assert result.already_fired == 0
            fired.append(result.fired)
        return fired

    try:
        results = await asyncio.gather(*(run_one(own) for own in conns))
    finally:
        for own in conns:
            await own.close()
    assert all(results), "each scheduler took part"
    assert sum(sum(r) for r in results) == 150 * 1 + 150 * 3
    assert await scalar(conn, "SELECT count(*) FROM schedule_fires") == 600
    duplicates = await scalar(
        conn,
        "SELECT count(*) FROM (SELECT schedule_id, slot FROM schedule_fires "
        "GROUP BY 1, 2 HAVING count(*) > 1) d",
    )
    assert duplicates == 0
    per_object = await (
        await conn.execute("SELECT key, count(*) AS n, max(version) AS v FROM jobs GROUP BY key")
    ).fetchall()
    assert len(per_object) == 300 and {(r["n"], r["v"]) for r in per_object} == {(1, 1)}
    outcomes = await (
        await conn.execute("SELECT outcome, count(*) AS n FROM schedule_fires GROUP BY 1")
    ).fetchall()
    # 'all' fires three slots; the two later ones meet the first's job still waiting.
    assert {r["outcome"]: r["n"] for r in outcomes} == {"created": 300, "in_progress": 300}
    assert await scalar(conn, "SELECT sum(fired_count) FROM schedules") == 600


async def test_the_fire_ledger_refuses_a_slot_fired_before(
    conn: AsyncConn, scheduler: Scheduler
) -> None:
    await set_clock(conn, berlin(2026, 6, 7, 10))
    created = await create_schedule(conn, daily(time(9)))
    await set_clock(conn, berlin(2026, 6, 8, 12))
    assert (await scheduler.tick(conn)).fired == 1
    # Put the schedule back on the slot it fired (as a stale copy of the row would).
    await conn.execute(
        "UPDATE schedules SET next_due_at = %s WHERE id = %s",
        (berlin(2026, 6, 8, 9), created.id),
    )
    await conn.execute("UPDATE jobs SET state = 'succeeded', finished_at = now()")
    result = await scheduler.tick(conn)
    assert (result.taken, result.fired, result.already_fired) == (1, 0, 1)
    assert await scalar(conn, "SELECT count(*) FROM jobs") == 1
    with pytest.raises(psycopg.errors.UniqueViolation):
        await conn.execute(
            "INSERT INTO schedule_fires (schedule_id, slot) VALUES (%s, %s)",
            (created.id, berlin(2026, 6, 8, 9)),
        )


async def test_misfire_skip_passes_over_late_slots_and_fires_within_grace(
    conn: AsyncConn, scheduler: Scheduler
) -> None:
    await set_clock(conn, berlin(2026, 6, 7, 10))
    created = await create_schedule(conn, daily(time(9), misfire="skip", misfire_grace=600))
    await set_clock(conn, berlin(2026, 6, 10, 12))
    result = await scheduler.tick(conn)
    assert (result.taken, result.fired, result.skipped) == (1, 0, 3)
    row = await get_schedule(conn, created.id)
    assert row is not None
    assert (row.skipped_count, row.fired_count) == (3, 0)
    assert row.next_due_at == berlin(2026, 6, 11, 9)
    assert await scalar(conn, "SELECT count(*) FROM jobs") == 0

    await set_clock(conn, berlin(2026, 6, 11, 9, 1))  # one minute late, within the grace
    assert (await scheduler.tick(conn)).fired == 1
    fires = await list_fires(conn, created.id)
    assert [f.slot for f in fires] == [berlin(2026, 6, 11, 9)]


async def test_misfire_all_fires_each_missed_slot_bounded_per_tick(
    conn: AsyncConn, scheduler: Scheduler
) -> None:
    await set_clock(conn, berlin(2026, 6, 7, 10))
    created = await create_schedule(conn, daily(time(9), misfire="all", max_catchup=2))
    await set_clock(conn, berlin(2026, 6, 10, 12))
    assert (await scheduler.tick(conn)).fired == 2
    assert (await scheduler.tick(conn)).fired == 1
    assert (await scheduler.tick(conn)).taken == 0
    fires = await list_fires(conn, created.id)
    assert [f.slot.astimezone(BERLIN).day for f in fires] == [10, 9, 8]
    assert [f.outcome for f in fires] == ["in_progress", "in_progress", "created"]
    row = await get_schedule(conn, created.id)
    assert row is not None and row.next_due_at == berlin(2026, 6, 11, 9)


async def test_pause_stops_firing_and_resume_continues_from_the_next_slot(
    conn: AsyncConn, scheduler: Scheduler
) -> None:
    await set_clock(conn, berlin(2026, 6, 7, 10))
    created = await create_schedule(conn, daily(time(9)))
    paused = await pause_schedule(conn, created.id, actor=ACTOR, reason=REASON)
    assert paused is not None and paused.paused
    await set_clock(conn, berlin(2026, 6, 10, 12))
    assert (await scheduler.tick(conn)).taken == 0
    assert [s.id for s in await list_schedules(conn, paused=True)] == [created.id]
    assert await list_schedules(conn, paused=False) == []

    resumed = await resume_schedule(conn, created.id, actor=ACTOR, reason=REASON)
    assert resumed is not None and not resumed.paused
    # Slots that fell due while paused are not caught up.
    assert resumed.next_due_at == berlin(2026, 6, 11, 9)
    assert (await scheduler.tick(conn)).taken == 0
    await set_clock(conn, berlin(2026, 6, 11, 9, 5))
    assert (await scheduler.tick(conn)).fired == 1
    trail = await audit.entries(conn, target_type="schedule", target_id=created.id)
    assert [(e.action, e.before["paused"], e.after["paused"]) for e in trail] == [
        ("resume", True, False),
        ("pause", False, True),
    ]


async def test_a_cron_schedule_fires_on_its_expression(
    conn: AsyncConn, scheduler: Scheduler
) -> None:
    spec = ScheduleSpec("noop", "weekday-report", "cron", "Europe/Berlin", cron="0 9 * * 1-5")
    await set_clock(conn, berlin(2026, 6, 5, 10))  # a Friday
    created = await create_schedule(conn, spec)
    assert created.next_due_at == berlin(2026, 6, 8, 9)  # Monday, past the weekend
    await set_clock(conn, berlin(2026, 6, 9, 9, 30))
    result = await scheduler.tick(conn)
    assert (result.fired, result.coalesced) == (1, 1)
    row = await get_schedule(conn, created.id)
    assert row is not None and row.next_due_at == berlin(2026, 6, 10, 9)


async def test_update_retimes_and_delete_removes_with_actor_and_reason(
    conn: AsyncConn,
) -> None:
    await set_clock(conn, berlin(2026, 6, 7, 10))
    created = await create_schedule(conn, daily(time(9)), actor=ACTOR, reason=REASON)
    same_rule = await update_schedule(
        conn, created.id, payload={"v": 2}, actor=ACTOR, reason=REASON
    )
    assert same_rule is not None
    assert same_rule.payload == {"v": 2}
    assert same_rule.next_due_at == created.next_due_at
    monthly = await update_schedule(
        conn, created.id, frequency="monthly", day=31, actor=ACTOR, reason=REASON
    )
    assert monthly is not None
    assert monthly.next_due_at == berlin(2026, 6, 30, 9)  # June has 30 days
    with pytest.raises(AuditInfoMissing, match="reason"):
        await pause_schedule(conn, created.id, actor="ops", reason=" ")
    with pytest.raises(ScheduleError, match="cannot update kind"):
        await update_schedule(conn, created.id, kind="other", actor=ACTOR, reason=REASON)
    with pytest.raises(ScheduleError, match="weekday"):
        await update_schedule(
            conn, created.id, frequency="weekly", day=None, actor=ACTOR, reason=REASON
        )
    unchanged = await get_schedule(conn, created.id)
    assert unchanged is not None and unchanged.frequency == "monthly"
    assert await update_schedule(conn, 999_999, payload={}, actor=ACTOR, reason=REASON) is None
    deleted = await delete_schedule(conn, created.id, actor=ACTOR, reason=REASON)
    assert deleted is not None and deleted.id == created.id
    assert await get_schedule(conn, created.id) is None
    assert await delete_schedule(conn, created.id, actor=ACTOR, reason=REASON) is None
    trail = await audit.entries(conn, target_type="schedule", target_id=created.id)
    assert [e.action for e in reversed(trail)] == ["create", "update", "update", "delete"]
    assert {(e.actor, e.reason) for e in trail} == {(ACTOR, REASON)}
    assert trail[1].before["frequency"] == "daily"
    assert trail[1].after["day_of_month"] == 31
    assert trail[0].after is None and trail[0].before["at_time"] == "09:00:00"


async def test_bad_definitions_write_nothing(conn: AsyncConn) -> None:
    bad: list[ScheduleSpec] = [
        daily(time(9), payload=[1, 2]),
        daily(time(9), payload={"x": float("nan")}),
        daily(time(9), key=""),
        daily(time(9), misfire="sometimes"),
        daily(time(9), max_catchup=0),
        daily(time(9), priority=40_000),
        ScheduleSpec("noop", "k", "daily", "Nowhere/City", at=time(9)),
    ]
    for spec in bad:
        with pytest.raises(ScheduleError):
            await create_schedule(conn, spec)
    with pytest.raises(UnknownKind):
        await create_schedule(conn, ScheduleSpec("nope", "k", "daily", "UTC", at=time(9)), app=APP)
    assert await scalar(conn, "SELECT count(*) FROM schedules") == 0


async def test_a_schedule_that_cannot_fire_records_why_and_does_not_block_others(
    conn: AsyncConn, scheduler: Scheduler
) -> None:
    await set_clock(conn, berlin(2026, 6, 7, 10))
    broken = await create_schedule(
        conn, ScheduleSpec("unregistered", "k", "daily", "UTC", at=time(8))
    )
    fine = await create_schedule(conn, daily(time(9)))
    await set_clock(conn, berlin(2026, 6, 8, 12))
    result = await scheduler.tick(conn)
    assert (result.taken, result.fired, result.failed) == (2, 1, 1)
    row = await get_schedule(conn, broken.id)
    assert row is not None
    assert row.last_error is not None and "unknown job kind 'unregistered'" in row.last_error
    assert row.failed_count == 1 and row.next_due_at > berlin(2026, 6, 8, 12)
    assert await list_fires(conn, broken.id) == []
    assert len(await list_fires(conn, fine.id)) == 1


async def test_run_fires_due_schedules_until_stopped(conn: AsyncConn, client: Client) -> None:
    # Due in real time: created with the clock two days back.
    await set_clock(conn, datetime.now(UTC) - timedelta(days=2))
    created = await create_schedule(
        conn, ScheduleSpec("noop", "k", "cron", "UTC", cron="0 * * * *")
    )
    stop = asyncio.Event()
    scheduler = Scheduler(client, interval=0.05)
    task = asyncio.create_task(scheduler.run(stop))
    try:
        await eventually(lambda: list_fires(conn, created.id), what="the schedule to fire")
    finally:
        stop.set()
        await task
    row = await get_schedule(conn, created.id)
    assert row is not None and row.fired_count == 1 and row.coalesced_count >= 47


def test_scheduler_options_are_checked(client: Client) -> None:
    with pytest.raises(ScheduleError, match="interval"):
        Scheduler(client, interval=0)
    with pytest.raises(ScheduleError, match="batch"):
        Scheduler(client, batch=0)


async def test_prune_forgets_old_fires_and_keeps_recent_ones(
    conn: AsyncConn, scheduler: Scheduler
) -> None:
    real = datetime.now(UTC)
    await set_clock(conn, real - timedelta(days=42))
    old = await create_schedule(conn, ScheduleSpec("noop", "old", "daily", "UTC", at=time(9)))
    await set_clock(conn, real - timedelta(days=40))
    assert (await scheduler.tick(conn)).fired == 1
    await set_clock(conn, real - timedelta(days=2))
    recent = await create_schedule(conn, ScheduleSpec("noop", "new", "daily", "UTC", at=time(9)))
    await conn.execute("RESET herald.clock_offset")
    result = await scheduler.tick(conn)
    assert result.fired == 2  # old catches up once more, recent fires for the first time
    assert await scheduler.prune() == 1  # the fire of 40 days ago (retention 30 days)
    assert len(await list_fires(conn, old.id)) == 1
    assert len(await list_fires(conn, recent.id)) == 1


def test_cli_scheduler_refuses_a_bad_interval(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--app", "tests.support:APP", "scheduler", "--interval", "0"]) == 1
    assert "interval must be a positive number" in capsys.readouterr().err


async def test_cli_scheduler_fires_and_stops_cleanly_on_sigterm(
    settings: Settings, conn: AsyncConn
) -> None:
    await set_clock(conn, datetime.now(UTC) - timedelta(days=1, hours=1))
    created = await create_schedule(conn, ScheduleSpec("noop", "cli", "daily", "UTC", at=time(0)))
    env = {
        **os.environ,
        "HERALD_DATABASE_URL": settings.database_url or "",
        "HERALD_SCHEMA": settings.schema,
    }
    command = [sys.executable, "-m", "herald", "--app", "tests.support:APP", "scheduler"]
    proc = await asyncio.create_subprocess_exec(
        *command, "--interval", "0.1", cwd=ROOT, env=env, stderr=asyncio.subprocess.PIPE
    )
    try:
        await eventually(lambda: list_fires(conn, created.id), what="the schedule to fire")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert "scheduler stopped" in err.decode()
    row = await get_schedule(conn, created.id)
    assert row is not None and row.fired_count == 1


async def test_a_rule_that_never_fires_is_refused_as_bad_input(settings: Settings) -> None:
    async with await Client.open(APP, settings) as client:
        with pytest.raises(ScheduleError):
            await create_schedule(
                client.pool,
                ScheduleSpec(
                    kind="noop", key="never", frequency="cron", timezone="UTC", cron="0 0 31 2 *"
                ),
            )
