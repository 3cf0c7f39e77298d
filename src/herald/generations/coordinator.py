"""The publication coordinator: one decision at a time per (dataset, partition).

``settle`` runs in the transaction that registers a candidate (and, for a worker, that
records its fenced completion). It locks the partition's pointer, re-verifies the
candidate's bytes, applies :mod:`herald.generations.rules`, and records the decision with
its reason. Publishing writes the immutable publication, swaps the pointer
(compare-and-set on the generation it decided against) and writes the outbox event and
the deliveries in that same transaction: readers and consumers see all of it or none.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from herald.db import AsyncConn
from herald.generations import rules
from herald.generations.records import execute, plan_run
from herald.generations.rows import Candidate, Dataset, Decision, Publication, Run
from herald.ops.conn import to_json
from herald.rows import MissingRow, all_rows, fetch_all, fetch_one, from_row, maybe_row, one_row

if TYPE_CHECKING:
    from herald.generations.shared import Generations

COORDINATOR = "coordinator"


async def decide_and_record(
    gen: Generations,
    conn: AsyncConn,
    candidate: Candidate,
    *,
    actor: str = COORDINATOR,
    override: str | None = None,
) -> Decision:
    """Settle ``candidate`` against its partition's current state; the decision row.

    ``override`` is an operator's forced decision (``publish`` skips the base/input rules
    but never the pre-publication checks; ``discard`` discards).
    """
    dataset_name, partition = candidate.dataset, candidate.partition
    pointer = await one_row(
        conn, "generations_current_lock", {"dataset": dataset_name, "partition": partition}
    )
    current = int(pointer["generation"])
    current_inputs: frozenset[int] = frozenset()
    current_publication = None
    if pointer["publication_id"] is not None:
        pub = await one_row(
            conn, "generations_publication_manifests", {"id": pointer["publication_id"]}
        )
        current_inputs = frozenset(pub["manifest_ids"])
        current_publication = pub["publication_id"]
    run = await fetch_one(conn, "generations_run_get", {"id": candidate.run_id}, Run)
    if run is None:
        raise MissingRow(f"candidate {candidate.id} names no run {candidate.run_id}")
    base = run.base_of(partition)
    known = frozenset(
        r["id"]
        for r in await all_rows(
            conn, "generations_manifests_known", {"dataset": dataset_name, "partition": partition}
        )
    )
    inputs = frozenset(run.manifest_ids)
    context = {"base": base, "current": current}

    failures = await _prepublication_failures(gen, conn, candidate, run)
    if failures:
        return await _settle(
            conn,
            candidate,
            run,
            "reject",
            "checks_failed",
            "pre-publication checks failed: " + "; ".join(failures),
            context,
            actor,
            candidate_state="rejected",
            partition_state="rejected",
        )
    if override == "discard":
        return await _settle(
            conn,
            candidate,
            run,
            "discard",
            "operator",
            "discarded by an operator",
            context,
            actor,
            candidate_state="discarded",
            partition_state="discarded",
        )
    if override == "publish":
        verdict = rules.Verdict("publish", "operator", "published by an operator override")
    else:
        verdict = rules.decide(
            base=base,
            current=current,
            inputs=inputs,
            current_inputs=current_inputs,
            known=known,
            policy=run.policy,
        )
    if run.intent == "dry_run":
        return await _settle(
            conn,
            candidate,
            run,
            "dry_run",
            verdict.reason_code,
            f"dry run: would {verdict.decision}: {verdict.reason}",
            context,
            actor,
            candidate_state="dry_run",
            partition_state="dry_run",
        )
    if verdict.decision == "wait":
        return await _settle(
            conn,
            candidate,
            run,
            "wait",
            verdict.reason_code,
            verdict.reason,
            context,
            actor,
            candidate_state="waiting",
            partition_state="waiting",
        )
    if verdict.decision == "discard":
        return await _settle(
            conn,
            candidate,
            run,
            "discard",
            verdict.reason_code,
            verdict.reason,
            context,
            actor,
            candidate_state="discarded",
            partition_state="discarded",
        )
    if verdict.decision == "rebase":
        inputs_now = sorted(inputs | current_inputs | known)
        rebased = await plan_run(
            gen,
            conn,
            dataset_name=dataset_name,
            purpose=run.purpose,
            definition_version=run.definition_version,
            manifest_ids=inputs_now,
            partitions=[partition],
            policy=run.policy,
            intent=run.intent,
            requested_by=actor,
            reason=f"rebase of run {run.id}: {verdict.reason_code}",
            base_generations={partition: current},
            rebased_from=run.id,
            backfill_id=run.backfill_id,
        )
        return await _settle(
            conn,
            candidate,
            run,
            "rebase",
            verdict.reason_code,
            f"{verdict.reason}: rebased as run {rebased.id} on generation {current} with "
            f"inputs {inputs_now}",
            context,
            actor,
            candidate_state="discarded",
            partition_state="discarded",
        )
    generation = current + 1
    published = await one_row(
        conn,
        "generations_publication_insert",
        {
            "dataset": dataset_name,
            "partition": partition,
            "generation": generation,
            "candidate_id": candidate.id,
            "run_id": run.id,
            "manifest_ids": sorted(inputs),
            "definition_version": run.definition_version,
            "quality": json.dumps(candidate.quality),
            "change": "new" if generation == 1 else "correction",
            "supersedes": current_publication,
            "published_by": actor,
        },
    )
    publication = from_row(Publication, published)
    swapped = await maybe_row(
        conn,
        "generations_current_swap",
        {
            "dataset": dataset_name,
            "partition": partition,
            "generation": generation,
            "publication_id": publication.id,
            "expected": current,
        },
    )
    if swapped is None:  # cannot happen while the pointer row is locked; fail closed
        raise RuntimeError(f"pointer of {dataset_name}/{partition} moved under its lock")
    event = await one_row(
        conn,
        "generations_outbox_insert",
        {
            "publication_id": publication.publication_id,
            "dataset": dataset_name,
            "event_type": "generation.published" if generation == 1 else "generation.corrected",
            "payload": to_json(event_payload(publication, candidate)),
        },
    )
    for delivery in await all_rows(
        conn, "generations_deliveries_create", {"outbox_id": event["id"], "dataset": dataset_name}
    ):
        await gen.admitter.enqueue(
            gen.deliver_kind,
            {"delivery_id": delivery["id"]},
            key=f"delivery:{delivery['id']}",
            conn=conn,
        )
    decision = await _settle(
        conn,
        candidate,
        run,
        "publish",
        verdict.reason_code,
        verdict.reason,
        context,
        actor,
        candidate_state="published",
        partition_state="published",
        generation=generation,
    )
    # Candidates parked on this partition meet the new generation now.
    key = {"dataset": dataset_name, "partition": partition}
    for waiting in await fetch_all(conn, "generations_candidates_waiting", key, Candidate):
        await decide_and_record(gen, conn, waiting)
    return decision


def event_payload(publication: Publication, candidate: Candidate) -> dict[str, Any]:
    """What a consumer receives: enough to find the authoritative bytes and their inputs."""
    return {
        "publication_id": str(publication.publication_id),
        "dataset": publication.dataset,
        "partition": publication.partition,
        "generation": publication.generation,
        "change": publication.change,
        "supersedes": None if publication.supersedes is None else str(publication.supersedes),
        "inputs": publication.manifest_ids,
        "definition_version": publication.definition_version,
        "run_id": publication.run_id,
        "location": candidate.location,
        "checksum": candidate.checksum,
        "row_count": candidate.row_count,
        "published_at": publication.published_at,
    }


async def _prepublication_failures(
    gen: Generations, conn: AsyncConn, candidate: Candidate, run: Run
) -> list[str]:
    """Checksum re-verified from the bytes, expected partition, schema, rows, quality."""
    from herald.generations.records import dataset as load_dataset

    failures = []
    if candidate.partition not in run.partitions:
        failures.append(f"partition {candidate.partition} is not a target of run {run.id}")
    ds = await load_dataset(conn, candidate.dataset)
    if candidate.schema_version != ds.schema_version:
        failures.append(
            f"schema version {candidate.schema_version} is not the dataset's {ds.schema_version}"
        )
    # The bytes are read and checked off the event loop (they may be large).
    loop = asyncio.get_running_loop()
    verifier = gen.verifiers.get(candidate.dataset)
    if verifier is not None:
        failures += await loop.run_in_executor(None, verifier, candidate)
    else:
        failures += await loop.run_in_executor(
            None, _verify_bytes, gen, candidate, expectations(ds)
        )
    return failures


def _verify_bytes(gen: Generations, candidate: Candidate, expect: rules.Expectations) -> list[str]:
    from herald.generations.store import checksum

    try:
        data = gen.store.read(candidate.location)
    except OSError as exc:
        return [f"output unreadable at {candidate.location}: {exc}"]
    failures = []
    if checksum(data) != candidate.checksum:
        failures.append("checksum of the stored bytes differs from the registered one")
    try:
        parsed = [json.loads(line) for line in data.decode().splitlines() if line]
    except ValueError:
        return [*failures, "output is not JSON lines"]
    if len(parsed) != candidate.row_count:
        failures.append(f"{len(parsed)} rows stored, {candidate.row_count} registered")
    quality = rules.check_rows(expect, parsed)
    for name in rules.failed_checks(quality):
        result = quality[name]
        failures.append(f"{name}: {result['detail'] if isinstance(result, dict) else result}")
    return failures


def expectations(ds: Dataset) -> rules.Expectations:
    q = ds.quality_rules or {}
    return rules.Expectations(
        schema_version=ds.schema_version,
        fields=tuple(ds.fields),
        min_rows=ds.min_rows,
        max_rows=ds.max_rows,
        not_null=tuple(q.get("not_null", ())),
        unique=tuple(q.get("unique", ())),
    )


async def _settle(
    conn: AsyncConn,
    candidate: Candidate,
    run: Run,
    decision: str,
    code: str,
    reason: str,
    context: dict[str, int],
    actor: str,
    *,
    candidate_state: str,
    partition_state: str,
    generation: int | None = None,
) -> Decision:
    if candidate.state != candidate_state:
        await execute(
            conn,
            "generations_candidate_set_state",
            {"id": candidate.id, "state": candidate_state},
        )
    await execute(
        conn,
        "generations_run_partition_set",
        {
            "run_id": run.id,
            "partition": candidate.partition,
            "state": partition_state,
            "detail": f"{decision}: {reason}",
            "candidate_id": candidate.id,
        },
    )
    await execute(conn, "generations_run_settle", {"run_id": run.id})
    row = await one_row(
        conn,
        "generations_decision_insert",
        {
            "dataset": candidate.dataset,
            "partition": candidate.partition,
            "run_id": run.id,
            "candidate_id": candidate.id,
            "job_id": candidate.job_id,
            "fence": candidate.fence,
            "decision": decision,
            "reason_code": code,
            "reason": reason,
            "base_generation": context["base"],
            "current_generation": context["current"],
            "generation": generation,
            "actor": actor,
        },
    )
    return from_row(Decision, row)
