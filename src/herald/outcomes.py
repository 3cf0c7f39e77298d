"""How an attempt's outcome is written down: the record, and the one JSON encoder.

Results and errors go into jsonb columns. Every path that records a result (a plain
return, ``ctx.transaction(result)``) encodes it here, so they store the same thing.
"""

from __future__ import annotations

import json
import re
import traceback
from dataclasses import dataclass
from typing import Any

SHUTDOWN_ERROR = json.dumps(
    {"kind": "shutdown", "message": "worker shut down before the job finished"}
)
# A NUL character as json.dumps escapes it (its backslash not itself escaped). PostgreSQL's
# jsonb refuses it, and one refused outcome would fail its whole batch again and again.
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


@dataclass
class Outcome:
    """One finished attempt, waiting in the outbox to be recorded by a fenced statement."""

    job_id: int
    fence: int
    outcome: str  # succeeded | retry | snooze | dead | cancelled
    delay: float | None = None
    error: str | None = None
    result: str | None = None


def encode_result(result: Any) -> str | None:
    """A handler's result as jsonb text; what JSON cannot hold is stored as its repr."""
    if result is None:
        return None
    try:
        return storable(json.dumps(result, allow_nan=False, default=str))
    except (TypeError, ValueError):
        return storable(json.dumps(repr(result)))


def storable(text: str) -> str:
    """JSON text jsonb accepts: NUL characters become U+FFFD."""
    if "\\u0000" not in text:
        return text
    return _ESCAPED_NUL.sub(r"\1\\ufffd", text)


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
