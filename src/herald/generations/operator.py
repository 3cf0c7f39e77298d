"""The operator's surface for one partition: what is true, why, and what is safe to do.

:func:`partition_view` gathers the current generation, every candidate with the
coordinator's reason for choosing it or not, unsettled tasks with their lease and fence,
failed and quarantined input, late sources, orphaned attempt output, affected consumers
and the safe actions. Every action needs its scope, an actor and a reason, and writes the
audit log in the same transaction as its change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from herald.db import AsyncConn
from herald.generations import quarantine, records
from herald.generations.coordinator import decide_and_record
from herald.generations.errors import NotFound, Refused
from herald.generations.records import dataset, execute, plan_run
from herald.generations.rows import Candidate, CandidateDecided, Manifest, RunPartition, Task
from herald.ops import audit
from herald.ops import jobs as job_actions
from herald.rows import Job, all_rows, fetch_all, fetch_one

if TYPE_CHECKING:
    from herald.generations.shared import Generations

# action -> the scope it needs (an API key's; "admin" implies every scope)
ACTION_SCOPES = {
    "retry": "operate",
    "skip": "operate",
    "discard": "operate",
    "publish": "operate",
    "override": "admin",
}


def require_scope(action: str, scopes: frozenset[str]) -> None:
    needed = ACTION_SCOPES.get(action)
    if needed is None:
        raise Refused(f"unknown action {action!r}; one of {', '.join(ACTION_SCOPES)}")
    if needed not in scopes and "admin" not in scopes:
        raise Refused(f"{action} needs the {needed} scope")


async def partition_view(
    gen: Generations, conn: AsyncConn, name: str, partition: str
) -> dict[str, Any]:
    """The operator's view of a partition: the API's JSON document (the console shows it)."""
    ds = await dataset(conn, name)
    key = {"dataset": name, "partition": partition}
    current = await records.current(conn, name, partition)
    candidates = await fetch_all(conn, "generations_candidates_of_partition", key, CandidateDecided)
    tasks = await all_rows(conn, "generations_partition_tasks", key)
    manifests = await fetch_all(conn, "generations_manifests_of_partition", key, Manifest)
    in_current = set(current.manifest_ids or []) if current else set()
    published_at = current.published_at if current else None
    late = [
        {
            **m.to_json(),
            "why": "accepted after the current generation was published"
            if published_at is not None and m.received_at > published_at
            else "not among the current generation's inputs",
        }
        for m in manifests
        if m.id not in in_current
    ]
    registered = {c.location for c in candidates}
    orphans = [p for p in gen.store.attempt_outputs(name, partition) if p not in registered]
    held = await quarantine.held_items(conn, name, partition=partition)
    view: dict[str, Any] = {
        "dataset": name,
        "partition": partition,
        "owner": ds.owner,
        "current": None if current is None else current.to_json(),
        "candidates": [c.to_json() for c in candidates],
        "running_tasks": tasks,
        "failures": await all_rows(conn, "generations_partition_failures", key),
        "quarantined": [item.to_json() for item in held],
        "late_sources": late,
        "orphaned_outputs": orphans,
        "affected_consumers": await all_rows(conn, "generations_affected_consumers", key),
        "decisions": await all_rows(conn, "generations_partition_decisions", {**key, "limit": 20}),
    }
    view["safe_actions"] = safe_actions(view)
    return view


def safe_actions(view: dict[str, Any]) -> list[dict[str, Any]]:
    """What an operator may do now, each with its target and the scope it needs."""
    actions: list[dict[str, Any]] = []
    for c in view["candidates"]:
        if c["state"] == "waiting":
            actions.append(
                _action(
                    "publish",
                    {"candidate": c["id"]},
                    "publish the waiting candidate if the rules allow it now",
                )
            )
            actions.append(
                _action(
                    "override",
                    {"candidate": c["id"]},
                    "publish it as the next generation despite the rules "
                    "(pre-publication checks still apply)",
                )
            )
            actions.append(_action("discard", {"candidate": c["id"]}, "discard it"))
    for t in view["running_tasks"]:
        if t["state"] in ("queued", "building"):
            actions.append(
                _action(
                    "skip",
                    {"run": t["run_id"]},
                    "cancel the task and settle the partition of this run",
                )
            )
    for f in view["failures"]:
        actions.append(
            _action(
                "retry",
                {"run": f["run_id"]},
                "declare a repair run with every accepted input, planned "
                "against the current generation",
            )
        )
    return actions


def _action(name: str, target: dict[str, Any], what: str) -> dict[str, Any]:
    return {"action": name, "target": target, "scope": ACTION_SCOPES[name], "effect": what}


async def act(
    gen: Generations,
    conn: AsyncConn,
    *,
    action: str,
    dataset_name: str,
    partition: str,
    scopes: frozenset[str],
    actor: str,
    reason: str,
    candidate_id: int | None = None,
    run_id: int | None = None,
) -> dict[str, Any]:
    """Take one safe action on a partition; returns what it did (the API's JSON document:
    ``action`` and the ``decision`` on a candidate or the task ``after`` it)."""
    require_scope(action, scopes)
    actor, reason = audit.require(actor, reason)
    if action in ("publish", "override", "discard"):
        return await _on_candidate(
            gen, conn, action, dataset_name, partition, candidate_id, actor, reason
        )
    if run_id is None:
        raise Refused(f"{action} needs a run")
    async with conn.transaction():
        task = await fetch_one(
            conn, "generations_run_partition_get", {"run_id": run_id, "partition": partition}, Task
        )
        if task is None or task.dataset != dataset_name:
            raise NotFound(f"run {run_id} has no task for {dataset_name}/{partition}")
        after: dict[str, Any] | None
        if action == "skip":
            if not task.state.unsettled:
                raise Refused(f"run {run_id}'s task is {task.state}: nothing to skip")
            if task.job_id is not None:
                job = await fetch_one(conn, "get_job", {"id": task.job_id}, Job)
                if job is not None and job.active:
                    await job_actions.cancel(conn, task.job_id, actor=actor, reason=reason)
            skipped = await fetch_one(
                conn,
                "generations_partition_skip",
                {
                    "run_id": run_id,
                    "partition": partition,
                    "detail": f"skipped by {actor}: {reason}",
                },
                RunPartition,
            )
            after = None if skipped is None else skipped.to_json()
            await execute(conn, "generations_run_settle", {"run_id": run_id})
        else:  # retry
            if not task.state.failed:
                raise Refused(f"run {run_id}'s task is {task.state}: nothing to retry")
            run = await records.run(conn, run_id)
            if run is None:
                raise NotFound(f"no run {run_id}")
            known = await all_rows(
                conn,
                "generations_manifests_known",
                {"dataset": dataset_name, "partition": partition},
            )
            retried = await plan_run(
                gen,
                conn,
                dataset_name=dataset_name,
                purpose="repair",
                definition_version=run.definition_version,
                manifest_ids=[m["id"] for m in known] or run.manifest_ids,
                partitions=[partition],
                policy="rebase",
                requested_by=actor,
                reason=f"retry of run {run_id}: {reason}",
            )
            after = {"run": retried.id}
        await audit.record(
            conn,
            actor,
            f"generations.{action}",
            ("gen_run_partition", f"{run_id}:{partition}"),
            reason,
            before=task.to_json(),
            after=after,
        )
    return {"action": action, "after": after}


async def _on_candidate(
    gen: Generations,
    conn: AsyncConn,
    action: str,
    dataset_name: str,
    partition: str,
    candidate_id: int | None,
    actor: str,
    reason: str,
) -> dict[str, Any]:
    if candidate_id is None:
        raise Refused(f"{action} needs a candidate")
    async with conn.transaction():
        candidate = await fetch_one(
            conn, "generations_candidate_get", {"id": candidate_id}, Candidate
        )
        if candidate is None or (candidate.dataset, candidate.partition) != (
            dataset_name,
            partition,
        ):
            raise NotFound(f"no candidate {candidate_id} of {dataset_name}/{partition}")
        if candidate.state != "waiting":
            raise Refused(f"candidate {candidate_id} is {candidate.state}, not waiting")
        override = {"publish": None, "override": "publish", "discard": "discard"}[action]
        decision = await decide_and_record(gen, conn, candidate, actor=actor, override=override)
        await audit.record(
            conn,
            actor,
            f"generations.{action}",
            ("gen_candidate", candidate_id),
            reason,
            before=candidate.to_json(),
            after=decision.to_json(),
        )
    return {"action": action, "decision": decision.to_json()}
