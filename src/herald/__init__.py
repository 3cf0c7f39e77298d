"""Herald: reliable asynchronous publishing on PostgreSQL.

Public surface::

    from herald import Herald, Client, Worker, Settings
    from herald import Retry, Permanent, Snooze, Cancel
"""

from herald.backoff import Backoff
from herald.client import Client, Enqueued, JobSpec, Outcome
from herald.config import Settings
from herald.context import JobContext
from herald.errors import (
    AdmissionError,
    Cancel,
    HeraldError,
    IdempotencyConflict,
    InvalidPayload,
    LeaseLost,
    PayloadTooLarge,
    Permanent,
    Retry,
    Snooze,
    UnknownKind,
)
from herald.registry import Herald
from herald.worker import Worker

__all__ = [
    "AdmissionError",
    "Backoff",
    "Cancel",
    "Client",
    "Enqueued",
    "Herald",
    "HeraldError",
    "IdempotencyConflict",
    "InvalidPayload",
    "JobContext",
    "JobSpec",
    "LeaseLost",
    "Outcome",
    "PayloadTooLarge",
    "Permanent",
    "Retry",
    "Settings",
    "Snooze",
    "UnknownKind",
    "Worker",
]
