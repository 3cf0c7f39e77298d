"""Recurring schedules: an object's job enqueued daily, weekly, monthly or on a cron
expression in a named time zone, catching up once after downtime.

* :mod:`~herald.schedules.recurrence` - when slots fall (pure, DST-safe);
* :mod:`~herald.schedules.store` - schedule records (create, get, list, update, pause,
  resume, delete);
* :mod:`~herald.schedules.scheduler` - the tick that fires due schedules.
"""

from herald.schedules.recurrence import (
    Frequency,
    Misfire,
    Plan,
    Recurrence,
    RecurrenceError,
    latest_at_or_before,
    next_after,
    plan,
)
from herald.schedules.scheduler import Scheduler, TickResult, run_scheduler
from herald.schedules.store import (
    ScheduleError,
    ScheduleSpec,
    create_schedule,
    delete_schedule,
    get_schedule,
    list_fires,
    list_schedules,
    pause_schedule,
    resume_schedule,
    update_schedule,
)

__all__ = [
    "Frequency",
    "Misfire",
    "Plan",
    "Recurrence",
    "RecurrenceError",
    "ScheduleError",
    "ScheduleSpec",
    "Scheduler",
    "TickResult",
    "create_schedule",
    "delete_schedule",
    "get_schedule",
    "latest_at_or_before",
    "list_fires",
    "list_schedules",
    "next_after",
    "pause_schedule",
    "plan",
    "resume_schedule",
    "run_scheduler",
    "update_schedule",
]
