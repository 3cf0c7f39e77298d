"""Quarantine: input a retry cannot fix, held bounded, redacted, owned and expiring.

Held items count against the dataset's cap (full: the input is refused, the task says
so); each expires after the dataset's quarantine_ttl. Configured fields of the sample
record are redacted before anything is stored. An operator repairs, replays or discards
an item, each with a reason, written to the audit log in the same transaction.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from herald import tenancy
from herald.db import AsyncConn
from herald.generations import records
from herald.generations.errors import NotFound, Refused
from herald.generations.records import execute, plan_run
from herald.generations.rows import Dataset, Manifest, QuarantineItem
from herald.ops import audit
from herald.rows import all_rows, fetch_all, fetch_one

if TYPE_CHECKING:
    from herald.generations.shared import Generations

REDACTED = "[redacted]"
ACTIONS = {"repair": "repaired", "replay": "replayed", "discard": "discarded"}


def redact(record: dict[str, Any] | None, fields: list[str]) -> dict[str, Any] | None:
    if record is None:
        return None
    return {k: (REDACTED if k in fields else v) for k, v in record.items()}


async def hold(
    conn: AsyncConn,
    ds: Dataset,
    *,
    manifest: Manifest | None,
    run_id: int | None,
    partition: str | None,
    reason_code: str,
    detail: str,
    sample: dict[str, Any] | None,
) -> QuarantineItem | None:
    """Quarantine one input (and settle the run's partition); None when the cap is full."""
    held = await fetch_one(
        conn,
        "generations_quarantine_insert",
        {
            "dataset": ds.name,
            "manifest_id": None if manifest is None else manifest.id,
            "run_id": run_id,
            "partition": partition,
            "owner": manifest.owner if manifest is not None else ds.owner,
            "reason_code": reason_code,
            "detail": detail,
            "sample": None
            if sample is None
            else json.dumps(redact(sample, list(ds.redacted_fields)), default=str),
        },
        QuarantineItem,
    )
    if run_id is not None and partition is not None:
        state = "quarantined" if held is not None else "failed"
        what = (
            f"quarantined as item {held.id} ({reason_code}): {detail}"
            if held is not None
            else f"quarantine of {ds.name} is full (cap {ds.quarantine_cap}): input "
            f"refused ({reason_code}): {detail}"
        )
        await execute(
            conn,
            "generations_run_partition_set",
            {
                "run_id": run_id,
                "partition": partition,
                "state": state,
                "detail": what,
                "candidate_id": None,
            },
        )
        await execute(conn, "generations_run_settle", {"run_id": run_id})
        await execute(
            conn,
            "generations_decision_insert",
            {
                "dataset": ds.name,
                "partition": partition,
                "run_id": run_id,
                "candidate_id": None,
                "job_id": None,
                "fence": None,
                "decision": "quarantine",
                "reason_code": reason_code,
                "reason": what,
                "base_generation": None,
                "current_generation": None,
                "generation": None,
                "actor": "coordinator",
            },
        )
    return held


async def held_items(
    conn: AsyncConn, dataset: str, *, partition: str | None = None, state: str | None = "held"
) -> list[QuarantineItem]:
    return await fetch_all(
        conn,
        "generations_quarantine_list",
        {"dataset": dataset, "partition": partition, "state": state, "limit": 200},
        QuarantineItem,
    )


async def resolve(
    gen: Generations,
    conn: AsyncConn,
    item_id: int,
    action: str,
    *,
    actor: str,
    reason: str,
    replay_definition: str | None = None,
) -> dict[str, Any]:
    """Repair (the source fixed it elsewhere), replay (a new repair run of the partition
    without the bad file... or with its repaired successor) or discard, audited.

    Answers the resolved item's columns (and ``replay_run``, the run a replay declared):
    the API's JSON document."""
    actor, reason = audit.require(actor, reason)
    if action not in ACTIONS:
        raise Refused(f"action must be one of {', '.join(ACTIONS)}")
    async with conn.transaction():
        item = await fetch_one(conn, "generations_quarantine_get", {"id": item_id}, QuarantineItem)
        if item is None:
            raise NotFound(f"no quarantine item {item_id}")
        if item.state != "held":
            raise Refused(f"quarantine item {item_id} is {item.state}, not held")
        resolved = await fetch_one(
            conn,
            "generations_quarantine_resolve",
            {"id": item_id, "state": ACTIONS[action], "actor": actor, "reason": reason},
            QuarantineItem,
        )
        if resolved is None:  # cannot happen: the item is locked and held
            raise Refused(f"quarantine item {item_id} is no longer held")
        after = resolved.to_json()
        if action == "replay" and item.run_id is not None and item.partition:
            run = await records.run(conn, item.run_id)
            if run is None:
                raise NotFound(f"quarantine item {item_id} names no run {item.run_id}")
            # The replay reads every input accepted for the partition now (the held file
            # no longer counts once resolved: the operator vouched for it).
            known = await all_rows(
                conn,
                "generations_manifests_known",
                {"dataset": item.dataset, "partition": item.partition},
            )
            replay = await plan_run(
                gen,
                conn,
                dataset_name=item.dataset,
                purpose="repair",
                definition_version=replay_definition or run.definition_version,
                manifest_ids=[m["id"] for m in known],
                partitions=[item.partition],
                policy="rebase",
                requested_by=actor,
                reason=f"replay of quarantine {item_id}: {reason}",
            )
            after = {**after, "replay_run": replay.id}
        await audit.record(
            conn,
            actor,
            f"generations.quarantine.{action}",
            ("gen_quarantine", item_id),
            reason,
            before=item.to_json(),
            after=after,
        )
    return after


async def expire(gen: Generations) -> int:
    """Move held items past their expiry out of the quarantine (a housekeeping duty)."""
    from herald.db import connect, conninfo, database_url

    conn = await connect(conninfo(database_url(gen.settings), gen.settings.schema))
    async with conn:
        await tenancy.tell(conn)  # the tenant the duty's pass is for (row-level security)
        return await expire_on(conn)


async def expire_on(conn: AsyncConn) -> int:
    return len(await all_rows(conn, "generations_quarantine_expire", {}))
