"""How an attempt's outcome is written down: the record, and its error entries.

Results are encoded by :mod:`herald.encoding` (the one encoder every path shares).
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass
from typing import Any

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


def finish_params(batch: list[Outcome], owner: str) -> dict[str, Any]:
    """The parameters of finish.sql for ``batch``.

    Each column goes as one array literal built here: adapting a list element by
    element cost more than the statement itself for batches of hundreds.
    """
    return {
        "ids": _integers([o.job_id for o in batch]),
        "fences": _integers([o.fence for o in batch]),
        "outcomes": _words([o.outcome for o in batch]),
        "delays": _numbers([o.delay for o in batch]),
        "errors": _texts([o.error for o in batch]),
        "results": _texts([o.result for o in batch]),
        "owner": owner,
    }


def _integers(values: list[int]) -> str:
    return "{" + ",".join(map(str, values)) + "}"


def _numbers(values: list[float | None]) -> str:
    if all(v is None for v in values):  # the usual batch: successes, no delays
        return "{" + ",".join(["NULL"] * len(values)) + "}"
    return "{" + ",".join("NULL" if v is None else repr(v) for v in values) + "}"


# What an outcome can be: plain words, which an array literal holds without quotes.
_OUTCOMES = frozenset({"succeeded", "retry", "snooze", "dead", "cancelled"})


def _words(values: list[str]) -> str:
    """Outcome names as an array literal: known words need no quoting (quoting each
    cost more than the rest of its outcome's parameters)."""
    if not _OUTCOMES.issuperset(values):
        return _texts(list(values))
    return "{" + ",".join(values) + "}"


def _texts(values: list[str | None]) -> str:
    if all(v is None for v in values):
        return "{" + ",".join(["NULL"] * len(values)) + "}"
    return "{" + ",".join("NULL" if v is None else _quoted(v) for v in values) + "}"


def _quoted(text: str) -> str:
    """An array element in double quotes: backslashes and quotes escaped."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
