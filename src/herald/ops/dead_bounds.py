"""Dead letters held within bounds, like quarantined input: retention, a cap, redaction.

A dead letter is the record of a job that failed for good: its payload and checkpoint
(what it produced, kept for compensation) may carry personal or secret data, and a
failing source can write thousands of them. The ``dead-letter-bounds`` housekeeping duty
(one process of the deployment at a time) enforces, every :data:`EVERY` seconds:

* **redaction**: the configured top-level fields of each dead letter's payload and
  checkpoint are replaced with ``[redacted]`` (``HERALD_DEAD_LETTER_REDACT``, names
  separated by commas). A dead letter with redacted fields is no longer replayed as it
  was: replay refuses it (re-submit the job with its real values instead);
* **retention**: dead letters older than ``HERALD_DEAD_LETTER_RETENTION`` seconds are
  dropped (default 30 days);
* **cap**: at most ``HERALD_DEAD_LETTER_CAP`` are kept (default 10,000), the newest.

A dead letter whose compensation is still owed (cleanup ``pending``) is never dropped
nor counted: it goes once the cleanup runner has done its work.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from herald import sql
from herald.ops.conn import Source, connection
from herald.ops.secrets import REDACTED

log = logging.getLogger(__name__)

DUTY = "dead-letter-bounds"
EVERY = 60.0
BATCH = 1000  # rows deleted per statement: a pass never holds a long lock
_FIELD = re.compile(r"^[A-Za-z0-9_.:-]{1,200}$")


@dataclass(frozen=True)
class DeadLetterBounds:
    retention_s: float = 30 * 86400.0
    cap: int = 10_000
    redacted_fields: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.retention_s > 0:
            raise ValueError("HERALD_DEAD_LETTER_RETENTION must be a positive number of seconds")
        if self.cap < 1:
            raise ValueError("HERALD_DEAD_LETTER_CAP must be at least 1")
        for name in self.redacted_fields:
            if not _FIELD.match(name):
                raise ValueError(f"HERALD_DEAD_LETTER_REDACT: {name!r} is not a field name")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> DeadLetterBounds:
        env = os.environ if environ is None else environ
        defaults = cls()
        try:
            retention = float(env.get("HERALD_DEAD_LETTER_RETENTION") or defaults.retention_s)
            cap = int(env.get("HERALD_DEAD_LETTER_CAP") or defaults.cap)
        except ValueError:
            raise ValueError(
                "HERALD_DEAD_LETTER_RETENTION (seconds) and HERALD_DEAD_LETTER_CAP (a count) "
                "must be numbers"
            ) from None
        raw = env.get("HERALD_DEAD_LETTER_REDACT", "")
        fields = tuple(dict.fromkeys(f for f in re.split(r"[\s,]+", raw) if f))
        return cls(retention, cap, fields)


@dataclass
class Enforced:
    redacted: int = 0
    expired: int = 0
    capped: int = 0


async def enforce(source: Source, bounds: DeadLetterBounds) -> Enforced:
    """One pass: redact, then drop what is past retention, then what is over the cap."""
    done = Enforced()
    async with connection(source) as conn:
        if bounds.redacted_fields:
            cur = await conn.execute(
                sql.query("ops_dead_redact"),
                {"fields": list(bounds.redacted_fields), "mark": REDACTED},
            )
            done.redacted = len(await cur.fetchall())
        while True:
            cur = await conn.execute(
                sql.query("ops_dead_expire"),
                {"retention_s": bounds.retention_s, "batch": BATCH},
            )
            dropped = len(await cur.fetchall())
            done.expired += dropped
            if dropped < BATCH:
                break
        while True:
            cur = await conn.execute(sql.query("ops_dead_cap"), {"cap": bounds.cap, "batch": BATCH})
            dropped = len(await cur.fetchall())
            done.capped += dropped
            if dropped < BATCH:
                break
    if done.redacted or done.expired or done.capped:
        log.info(
            "dead letters: %d redacted, %d past retention and %d over the cap dropped",
            done.redacted,
            done.expired,
            done.capped,
        )
    return done


def redacted_fields(payload: Any) -> list[str]:
    """The top-level fields of a payload that were redacted."""
    if not isinstance(payload, dict):
        return []
    return sorted(k for k, v in payload.items() if v == REDACTED)
