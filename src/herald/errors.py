"""Errors callers see, and the outcomes a handler can signal by raising."""

from __future__ import annotations

# The longest delay a retry or snooze may ask for. Beyond it the database clock cannot
# represent the next run, and the outcome could not be recorded at all.
MAX_DELAY = 10 * 366 * 24 * 3600.0


def _check_delay(what: str, seconds: float) -> float:
    if not isinstance(seconds, int | float) or not 0 <= seconds <= MAX_DELAY:
        raise ValueError(f"{what} must be between 0 and {MAX_DELAY:.0f} seconds, got {seconds!r}")
    return float(seconds)


class HeraldError(Exception):
    """Base of every error Herald raises on purpose."""


class AdmissionError(HeraldError, ValueError):
    """The job was refused before anything was written."""


class UnknownKind(AdmissionError):
    def __init__(self, kind: str, known: list[str]) -> None:
        listing = ", ".join(sorted(known)) or "none registered"
        super().__init__(f"unknown job kind {kind!r} (known kinds: {listing})")
        self.kind = kind


class InvalidPayload(AdmissionError):
    """The payload is not a JSON object (or not serialisable as one)."""


class PayloadTooLarge(AdmissionError):
    def __init__(self, size: int, limit: int) -> None:
        super().__init__(f"payload is {size} bytes, over the limit of {limit} bytes")
        self.size = size
        self.limit = limit


class QuotaExceeded(AdmissionError):
    """The tenant is at one of its admission quotas: try again after ``retry_after`` s."""

    def __init__(self, tenant: str, quota: str, message: str, retry_after: float) -> None:
        super().__init__(f"tenant {tenant!r} is at its quota of {message}")
        self.tenant = tenant
        self.quota = quota
        self.retry_after = max(1.0, retry_after)


class IdempotencyConflict(HeraldError):
    """The idempotency key was used before with a different request."""

    def __init__(self, key: str, job_id: int) -> None:
        super().__init__(
            f"idempotency key {key!r} was already used for job {job_id} with a different "
            "kind, key or payload"
        )
        self.key = key
        self.job_id = job_id


class LeaseLost(HeraldError):
    """This worker no longer holds the job's lease: whatever it writes is discarded."""


# --- outcomes a handler raises -------------------------------------------------------


class JobOutcome(Exception):
    """Base of the signals a handler raises to choose what happens to its job."""


class Retry(JobOutcome):
    """Retryable failure (also the default for any unexpected exception).

    ``delay`` overrides the kind's backoff for this one retry.
    """

    def __init__(self, message: str = "retry requested", delay: float | None = None) -> None:
        super().__init__(message)
        self.delay = None if delay is None else _check_delay("retry delay", delay)


class Permanent(JobOutcome):
    """Permanent failure: the job is dead-lettered at once, whatever attempts remain."""


class Snooze(JobOutcome):
    """Run again after ``seconds``; not counted as an attempt (rate limits, Retry-After)."""

    def __init__(self, seconds: float, reason: str = "snoozed") -> None:
        super().__init__(reason)
        self.seconds = _check_delay("snooze", seconds)


class Cancel(JobOutcome):
    """Stop this job for good without counting it as a failure."""
