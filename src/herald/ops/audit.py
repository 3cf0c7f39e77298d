"""The audit trail: every manual action records who, what, why, when, before and after.

An action writes its audit record with the same connection, inside the same transaction
as its change, so the log never claims a change that was rolled back (nor misses one).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from herald import tenancy
from herald.ops.conn import Source, connection, to_json
from herald.ops.errors import AuditInfoMissing
from herald.rows import fetch_all, from_row, one_row

# (target type, target id), e.g. ("job", 42) or ("schedule", "nightly-report").
Target = tuple[str, int | str]

MAX_ACTOR = 200
MAX_REASON = 2000
NO_REASON = "(no reason given)"  # recorded for actions whose reason is optional


@dataclass(frozen=True)
class Note:
    """Who takes an action and why: what the audit record of the action says."""

    actor: str
    reason: str

    def __post_init__(self) -> None:
        require(self.actor, self.reason)


@dataclass(frozen=True)
class AuditEntry:
    """One audit record (``ops_audit_list``): who did what to which target, why, when,
    and the target before and after (JSON snapshots; None: it did not exist)."""

    id: int
    at: datetime
    actor: str
    action: str
    target_type: str
    target_id: str
    reason: str
    before: Any
    after: Any


@dataclass(frozen=True)
class RecordedEntry(AuditEntry):
    """An audit record as written (``ops_audit_insert``): with the tenant whose log holds it."""

    tenant_id: str


def require(actor: object, reason: object) -> tuple[str, str]:
    """Validate a manual action's actor and reason before anything is written.

    Returns both stripped; raises :class:`AuditInfoMissing` naming what is missing.
    """
    problems = []
    if not isinstance(actor, str) or not actor.strip():
        problems.append("an actor (who is doing this)")
    elif len(actor.strip()) > MAX_ACTOR:
        problems.append(f"an actor of at most {MAX_ACTOR} characters")
    if not isinstance(reason, str) or not reason.strip():
        problems.append("a reason (why it is done)")
    elif len(reason.strip()) > MAX_REASON:
        problems.append(f"a reason of at most {MAX_REASON} characters")
    if problems:
        raise AuditInfoMissing("a manual action needs " + " and ".join(problems))
    assert isinstance(actor, str) and isinstance(reason, str)
    return actor.strip(), reason.strip()


async def record(
    conn: Source,
    actor: str,
    action: str,
    target: Target,
    reason: str,
    before: Any = None,
    after: Any = None,
    *,
    tenant: str | None = None,
) -> RecordedEntry:
    """Write one audit record and return it.

    The record belongs to the tenant the code acts for. Acting for the platform (every
    tenant), it goes to the tenant acted on: ``tenant`` when given, else the one the
    target is or owns (a tenant, a job, a dead letter), with a twin in the default
    tenant's log, the platform's own (see ``ops_audit_insert.sql``).

    Pass the connection of the action's transaction so both commit together. ``before``
    and ``after`` are JSON-serialisable snapshots of the target (datetimes allowed);
    ``None`` means "did not exist" (e.g. ``after`` of a discard).
    """
    actor, reason = require(actor, reason)
    target_type, target_id = target
    if not isinstance(action, str) or not action.strip():
        raise ValueError("audit action must be a non-empty string")
    if not isinstance(target_type, str) or not target_type.strip():
        raise ValueError("audit target type must be a non-empty string")
    if target_id is None or str(target_id) == "":
        raise ValueError("audit target id must not be empty")
    async with connection(conn) as c:
        row = await one_row(
            c,
            "ops_audit_insert",
            {
                "actor": actor,
                "action": action.strip(),
                "target_type": target_type.strip(),
                "target_id": str(target_id),
                "target_number": _number(target_id),
                "tenant": None if tenant is None else tenancy.checked(tenant),
                "reason": reason,
                "before": to_json(before),
                "after": to_json(after),
            },
        )
    return from_row(RecordedEntry, row)


def _number(target_id: Any) -> int | None:
    """The target's id as a row id, when it is one (the statement looks its owner up)."""
    text = str(target_id)
    return int(text) if text.isdigit() and len(text) <= 18 else None


async def entries(
    conn: Source,
    *,
    target_type: str | None = None,
    target_id: int | str | None = None,
    actor: str | None = None,
    action: str | None = None,
    before_id: int | None = None,
    limit: int = 50,
) -> list[AuditEntry]:
    """Audit records, newest first; pass the last id seen as ``before_id`` for the next page."""
    if not 1 <= limit <= 1000:
        raise ValueError("limit must be between 1 and 1000")
    async with connection(conn) as c:
        return await fetch_all(
            c,
            "ops_audit_list",
            {
                "target_type": target_type,
                "target_id": None if target_id is None else str(target_id),
                "actor": actor,
                "action": action,
                "before_id": before_id,
                "limit": limit,
            },
            AuditEntry,
        )
