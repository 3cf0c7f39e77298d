"""The console's own pages: the engine's queues, jobs, dead letters, schedules, audit log.

They are registered like any application's (:func:`core`), under the name ``engine``.
"""

from __future__ import annotations

from fastapi import APIRouter

from herald.console import job_actions, schedule_actions
from herald.console.pages import actions, dead_letters, jobs, overview, schedules, signin
from herald.console.registry import ConsoleExtension, NavEntry


def core() -> ConsoleExtension:
    router = APIRouter()
    for module in (signin, overview, jobs, dead_letters, schedules, actions):
        router.include_router(module.router)
    return ConsoleExtension(
        name="engine",
        router=router,
        nav=(
            NavEntry("Overview", "/", order=10),
            NavEntry("Jobs", "/jobs", order=20),
            NavEntry("Dead letters", "/dead-letters", order=30),
            NavEntry("Schedules", "/schedules", order=40),
            NavEntry("Audit log", "/audit", order=90),
        ),
        actions=(*job_actions.ACTIONS, *schedule_actions.ACTIONS),
    )
