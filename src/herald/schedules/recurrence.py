"""Recurrence math: when a schedule's slots fall, in wall-clock time of a named zone.

Pure functions; the current time is always passed in (``now``), never read here.

Slots are generated as naive local times (what a person would write on a calendar) and
then placed on the time line of the zone:

* an ambiguous local time (the repeated hour when clocks go back) takes its first
  occurrence;
* a nonexistent local time (the skipped hour when clocks go forward) moves forward to
  the first local time that exists, the end of the gap.

With these two rules placing is monotonic, so walking candidates forward yields slots in
order, and several candidates landing on the same instant collapse into one slot.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from herald.errors import HeraldError

_MAX_STEPS = 200_000  # candidates examined by one call before giving up (a broken rule)
_MAX_FOLD = timedelta(hours=3)  # longer than any clock change in the tz database


class RecurrenceError(HeraldError, ValueError):
    """A recurrence rule that cannot be used (bad field, unknown zone, never fires)."""


class Frequency(StrEnum):
    DAILY = "daily"
    WEEKLY = "weekly"
    MONTHLY = "monthly"
    CRON = "cron"


class Misfire(StrEnum):
    ONCE = "once"  # catch up with one fire for all missed slots
    SKIP = "skip"  # fire only a slot still within the grace; pass over older ones
    ALL = "all"  # fire every missed slot, a bounded number per tick


@dataclass(frozen=True)
class Recurrence:
    """When a schedule repeats.

    ``at`` is the local time of day (daily, weekly, monthly); ``weekday`` is ISO
    (1 = Monday ... 7 = Sunday); ``day`` is the day of the month, where a month shorter
    than ``day`` uses its last day; ``cron`` is a five-field expression read in the zone.
    """

    frequency: Frequency | str  # a Frequency after construction
    timezone: str
    at: time | None = None
    weekday: int | None = None
    day: int | None = None
    cron: str | None = None
    zone: ZoneInfo = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        try:
            frequency = Frequency(self.frequency)
        except ValueError:
            allowed = ", ".join(f.value for f in Frequency)
            raise RecurrenceError(
                f"frequency must be one of {allowed}, got {self.frequency!r}"
            ) from None
        object.__setattr__(self, "frequency", frequency)
        object.__setattr__(self, "zone", _zone(self.timezone))
        uses_at = frequency is not Frequency.CRON
        if uses_at:
            if not isinstance(self.at, time):
                raise RecurrenceError(f"a {frequency} schedule needs a local time of day (at)")
            if self.at.tzinfo is not None:
                raise RecurrenceError("the time of day must be naive: the zone is given apart")
        elif self.at is not None:
            raise RecurrenceError("a cron schedule takes its times from the expression, not at")
        _expect(frequency is Frequency.WEEKLY, "weekday", self.weekday, 1, 7)
        _expect(frequency is Frequency.MONTHLY, "day", self.day, 1, 31)
        if frequency is Frequency.CRON:
            _check_cron(self.cron)
        elif self.cron is not None:
            raise RecurrenceError(f"a {frequency} schedule takes no cron expression")


def _zone(name: str) -> ZoneInfo:
    if not isinstance(name, str) or not name or len(name) > 100:
        raise RecurrenceError("timezone must be an IANA zone name such as 'Europe/Berlin'")
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise RecurrenceError(f"unknown time zone {name!r}") from None


def _expect(used: bool, name: str, value: int | None, low: int, high: int) -> None:
    if not used:
        if value is not None:
            raise RecurrenceError(f"{name} does not apply to this frequency")
        return
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise RecurrenceError(f"{name} must be an integer from {low} to {high}, got {value!r}")


def _check_cron(expr: str | None) -> None:
    if not isinstance(expr, str) or not expr.strip() or len(expr) > 200:
        raise RecurrenceError("a cron schedule needs a cron expression")
    # Five fields only: a sixth (seconds) field would fire far more often than a
    # scheduler tick can follow.
    if not expr.strip().startswith("@") and len(expr.split()) != 5:
        raise RecurrenceError(f"cron expression must have five fields, got {expr!r}")
    if not croniter.is_valid(expr):
        raise RecurrenceError(f"invalid cron expression {expr!r}")


# --- placing local times on the time line ----------------------------------------------


def _wall(instant: datetime, zone: ZoneInfo) -> datetime:
    """The naive local time shown in ``zone`` at ``instant``."""
    return instant.astimezone(zone).replace(tzinfo=None)


def place(local: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant of naive ``local`` in ``zone`` (first occurrence; gaps move forward)."""
    first = local.replace(tzinfo=zone, fold=0).astimezone(UTC)
    if _wall(first, zone) == local:
        return first
    # In a gap: fold=0 reads it with the offset before the change (an instant after the
    # gap), fold=1 with the offset after it (an instant before). The change lies between;
    # find it to the second (transitions fall on whole seconds).
    other = local.replace(tzinfo=zone, fold=1).astimezone(UTC)
    low, high = min(first, other), max(first, other)
    while high - low > timedelta(seconds=1):
        mid = low + timedelta(seconds=(high - low).total_seconds() // 2)
        if _wall(mid, zone) >= local:
            high = mid
        else:
            low = mid
    return high


# --- naive candidates, one rule at a time ------------------------------------------------


def _month_day(year: int, month: int, day: int) -> int:
    return min(day, calendar.monthrange(year, month)[1])


def _monthly(year: int, month: int, rule: Recurrence) -> datetime:
    assert rule.day is not None and rule.at is not None
    return datetime.combine(
        datetime(year, month, _month_day(year, month, rule.day)).date(), rule.at
    )


def _next_local(rule: Recurrence, local: datetime) -> datetime:
    """The first candidate strictly after naive ``local`` (daily, weekly, monthly)."""
    assert rule.at is not None
    if rule.frequency is Frequency.MONTHLY:
        year, month = local.year, local.month
        while True:
            candidate = _monthly(year, month, rule)
            if candidate > local:
                return candidate
            year, month = (year + 1, 1) if month == 12 else (year, month + 1)
    candidate = datetime.combine(local.date(), rule.at)
    if rule.frequency is Frequency.WEEKLY:
        assert rule.weekday is not None
        candidate += timedelta(days=(rule.weekday - candidate.isoweekday()) % 7)
        step = timedelta(days=7)
    else:
        step = timedelta(days=1)
    return candidate if candidate > local else candidate + step


def _previous_local(rule: Recurrence, local: datetime) -> datetime:
    """The last candidate strictly before naive ``local``."""
    if rule.frequency is Frequency.CRON:
        result: datetime = croniter(rule.cron, local).get_prev(datetime)
        return result
    assert rule.at is not None
    if rule.frequency is Frequency.MONTHLY:
        year, month = local.year, local.month
        while True:
            candidate = _monthly(year, month, rule)
            if candidate < local:
                return candidate
            year, month = (year - 1, 12) if month == 1 else (year, month - 1)
    candidate = datetime.combine(local.date(), rule.at)
    if rule.frequency is Frequency.WEEKLY:
        assert rule.weekday is not None
        candidate -= timedelta(days=(candidate.isoweekday() - rule.weekday) % 7)
        step = timedelta(days=7)
    else:
        step = timedelta(days=1)
    return candidate if candidate < local else candidate - step


# --- slots -----------------------------------------------------------------------------


def _aware(value: datetime, what: str) -> datetime:
    if not isinstance(value, datetime) or value.tzinfo is None:
        raise RecurrenceError(f"{what} must be a timezone-aware datetime")
    return value.astimezone(UTC)


def _locals_after(rule: Recurrence, local: datetime) -> Iterator[datetime]:
    """Naive candidates strictly after ``local``, ascending (one cron parse for all)."""
    if rule.frequency is Frequency.CRON:
        walker = croniter(rule.cron, local)
        while True:
            yield walker.get_next(datetime)
    while True:
        local = _next_local(rule, local)
        yield local


def slots_after(rule: Recurrence, after: datetime) -> Iterator[datetime]:
    """The slots strictly after ``after`` (UTC), ascending, without end."""
    after = _aware(after, "after")
    last, idle = after, 0
    try:
        for local in _locals_after(rule, _wall(after, rule.zone)):
            slot = place(local, rule.zone)
            if slot > last:
                yield slot
                last, idle = slot, 0
                continue
            idle += 1  # a wall time already passed (repeated hour) or collapsed (gap)
            if idle > _MAX_STEPS:
                break
    except (ValueError, OverflowError, KeyError) as exc:  # croniter's "no such date"
        raise RecurrenceError(f"the rule has no slot after {last.isoformat()}: {exc}") from None
    raise RecurrenceError(f"the rule has no slot after {last.isoformat()}")


def next_after(rule: Recurrence, after: datetime) -> datetime:
    """The first slot strictly after ``after`` (UTC)."""
    return next(slots_after(rule, after))


def latest_at_or_before(rule: Recurrence, at: datetime) -> datetime:
    """The last slot at or before ``at`` (UTC)."""
    at = _aware(at, "at")
    # In the repeated hour a later wall time may still be placed (first occurrence)
    # before ``at``: start from the latest wall time that can be.
    wall = _wall(at, rule.zone)
    offset = wall.replace(tzinfo=rule.zone, fold=0).utcoffset()
    assert offset is not None
    local = at.replace(tzinfo=None) + offset + timedelta(microseconds=1)
    try:
        for _ in range(_MAX_STEPS):
            local = _previous_local(rule, local)
            slot = place(local, rule.zone)
            if slot <= at:
                return slot
    except (ValueError, OverflowError, KeyError) as exc:
        raise RecurrenceError(f"the rule has no slot before {at.isoformat()}: {exc}") from None
    raise RecurrenceError(f"the rule has no slot before {at.isoformat()}")


def first_due(rule: Recurrence, now: datetime) -> datetime:
    """Where a new (or re-timed) schedule starts: its first slot after ``now``."""
    return next_after(rule, now)


# --- catching up ------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What one scheduler pass does with a due schedule.

    ``fire`` lists the slots to enqueue (oldest first); ``coalesced`` counts missed slots
    folded into a single fire; ``skipped`` counts slots passed over without firing.
    """

    fire: list[datetime]
    next_due: datetime
    coalesced: int = 0
    skipped: int = 0


# Missed slots are counted one by one (a minutely cron is the costly case); beyond this
# many the recorded count saturates, which keeps a tick after a long outage short.
COUNT_LIMIT = 10_000


def count_slots(rule: Recurrence, first: datetime, last: datetime) -> int:
    """Slots in [first, last], given ``first`` is a slot (saturates at COUNT_LIMIT)."""
    if last < first:
        return 0
    count = 1
    for slot in slots_after(rule, first):
        if slot > last or count >= COUNT_LIMIT:
            break
        count += 1
    return count


def plan(
    rule: Recurrence,
    due: datetime,
    now: datetime,
    *,
    misfire: Misfire = Misfire.ONCE,
    grace: float = 60.0,
    max_fires: int = 10,
) -> Plan:
    """Decide which of the slots from ``due`` up to ``now`` fire, and the next due time.

    The next due time is reached from the scheduled slots themselves (never from ``now``),
    so a late tick neither drifts the schedule nor shifts its time of day.
    """
    due, now = _aware(due, "due"), _aware(now, "now")
    misfire = Misfire(misfire)
    if due > now:
        return Plan([], due)
    if misfire is Misfire.ALL:
        if max_fires < 1:
            raise RecurrenceError("max_fires must be at least 1")
        fire = [due]
        following = slots_after(rule, due)
        slot = next(following)
        while slot <= now and len(fire) < max_fires:
            fire.append(slot)
            slot = next(following)
        return Plan(fire, slot)  # slot may still be due: the next tick goes on from it
    # ``due`` may predate a rule change; the latest slot is never earlier than it.
    latest = max(due, latest_at_or_before(rule, now))
    missed = count_slots(rule, due, latest) if latest > due else 1
    next_due = next_after(rule, now)
    if misfire is Misfire.SKIP and (now - latest).total_seconds() > grace:
        return Plan([], next_due, skipped=missed)
    if misfire is Misfire.SKIP:
        return Plan([latest], next_due, skipped=missed - 1)
    return Plan([latest], next_due, coalesced=missed - 1)
