"""The states a job can be in, as the database's ``job_state`` type names them.

A StrEnum: a member equals its text, so rows read from the database (plain strings)
compare with it directly, and it is written back as the text it is.
"""

from __future__ import annotations

from enum import StrEnum


class JobState(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    DEAD = "dead"
    CANCELLED = "cancelled"

    @property
    def active(self) -> bool:
        """Not finished: the job will still run (waiting) or is running."""
        return self in ACTIVE_JOB_STATES


ACTIVE_JOB_STATES = frozenset({JobState.WAITING, JobState.RUNNING})
TERMINAL_JOB_STATES = frozenset(JobState) - ACTIVE_JOB_STATES
