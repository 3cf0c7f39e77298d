"""How an attempt's outcome is written down: the record, and its error entries.

Results are encoded by :mod:`herald.encoding` (the one encoder every path shares).
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass

from herald.encoding import storable

SHUTDOWN_ERROR = json.dumps(
    {"kind": "shutdown", "message": "worker shut down before the job finished"}
)


@dataclass
class Outcome:
    """One finished attempt, waiting in the outbox to be recorded by a fenced statement."""

    job_id: int
    fence: int
    outcome: str  # succeeded | retry | snooze | dead | cancelled
    delay: float | None = None
    error: str | None = None
    result: str | None = None


def encode_error(kind: str, exc: BaseException, message: str | None = None) -> str:
    """An error entry: kind, type, message, and a traceback tail (for the log, not the API)."""
    text = message or str(exc) or type(exc).__name__
    trace = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=8))
    return storable(
        json.dumps(
            {
                "kind": kind,
                "type": type(exc).__name__,
                "message": text[:2000],
                "traceback": trace[-4000:],
            }
        )
    )
