"""The build task: one partition of one run, as a Herald job (attempt, lease, fence).

Read the run's declared inputs (checksums verified), transform with exactly the run's
definition version, write the output to this attempt's own location, then register the
candidate and let the coordinator decide - in one transaction with the job's fenced
completion, so an attempt that lost its lease registers nothing and its bytes stay an
orphan. Deterministic input failures (bad checksum, schema mismatch, malformed record) are
quarantined; transient ones (the store unreadable) are retried by the engine.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import psycopg

from herald.context import JobContext
from herald.db import AsyncConn
from herald.errors import LeaseLost, Permanent, Retry
from herald.generations import quarantine, records, rules
from herald.generations.coordinator import decide_and_record, expectations
from herald.generations.definitions import Attempt, Record
from herald.generations.records import dataset, execute
from herald.generations.rows import Candidate, Dataset, Manifest, Run
from herald.generations.store import attempt_location, checksum
from herald.rows import from_row, one_row

if TYPE_CHECKING:
    from herald.generations.shared import Generations


class _Deterministic(Exception):
    def __init__(self, manifest: Manifest, code: str, detail: str, sample: Record | None) -> None:
        super().__init__(detail)
        self.manifest, self.code, self.detail, self.sample = manifest, code, detail, sample


async def build(gen: Generations, ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    run_id, partition = int(payload["run_id"]), str(payload["partition"])
    async with gen.pool(ctx).connection() as conn:
        run = await records.run(conn, run_id)
        if run is None:
            raise Permanent(f"run {run_id} does not exist")
        ds = await dataset(conn, run.dataset)
        manifests = [
            m for m in await records.manifests(conn, run.manifest_ids) if partition in m.partitions
        ]
        await execute(
            conn,
            "generations_run_partition_set",
            {
                "run_id": run_id,
                "partition": partition,
                "state": "building",
                "detail": None,
                "candidate_id": None,
            },
        )
    definition = gen.definitions.get(run.dataset, run.definition_version)
    if definition is None:
        raise Permanent(f"this worker has no definition {run.definition_version!r}")
    try:
        # Reading and parsing run off the event loop: heartbeats and other handlers of
        # this worker (live work beside a backfill) keep their pace.
        read = await ctx.loop.run_in_executor(
            ctx.executor, _read_inputs, gen, ds, manifests, definition.required
        )
    except _Deterministic as bad:
        async with ctx.transaction() as conn:
            held = await quarantine.hold(
                conn,
                ds,
                manifest=bad.manifest,
                run_id=run_id,
                partition=partition,
                reason_code=bad.code,
                detail=bad.detail,
                sample=bad.sample,
            )
        return {"quarantined": None if held is None else held.id, "reason": bad.code}
    out = await ctx.loop.run_in_executor(ctx.executor, definition.transform, partition, read)
    location = attempt_location(run.dataset, partition, run_id, ctx.job_id, ctx.fence)
    digest, quality = await ctx.loop.run_in_executor(
        ctx.executor, _write, gen, location, out, expectations(ds)
    )
    if definition.after_write is not None:
        attempt = Attempt(run_id, partition, ctx.job_id, ctx.attempt, ctx.fence, location)
        await ctx.loop.run_in_executor(ctx.executor, definition.after_write, attempt)
    lineage = {
        "run": run_id,
        "purpose": run.purpose,
        "definition_version": run.definition_version,
        "inputs": [{"manifest": m.id, "checksum": m.checksum} for m in manifests],
        "job": ctx.job_id,
        "attempt": ctx.attempt,
        "fence": ctx.fence,
    }
    try:
        async with ctx.transaction() as conn:
            registered = await one_row(
                conn,
                "generations_candidate_insert",
                {
                    "run_id": run_id,
                    "dataset": run.dataset,
                    "partition": partition,
                    "job_id": ctx.job_id,
                    "attempt": ctx.attempt,
                    "fence": ctx.fence,
                    "worker": ctx.worker_id,
                    "location": location,
                    "checksum": digest,
                    "row_count": len(out),
                    "schema_version": ds.schema_version,
                    "quality": json.dumps(quality),
                    "lineage": json.dumps(lineage),
                },
            )
            candidate = from_row(Candidate, registered)
            decision = await decide_and_record(gen, conn, candidate)
    except psycopg.errors.LockNotAvailable as refused:
        async with gen.pool(ctx).connection() as conn:
            await refuse(conn, run, partition, ctx, location, str(refused))
        raise LeaseLost(f"job {ctx.job_id} fence {ctx.fence}: registration refused") from None
    return {
        "candidate": candidate.id,
        "decision": decision.decision,
        "reason_code": decision.reason_code,
        "generation": decision.generation,
    }


async def refuse(
    conn: AsyncConn, run: Run, partition: str, ctx: JobContext, location: str, why: str
) -> None:
    """Record that a stale attempt's report was refused (its output stays an orphan)."""
    await execute(
        conn,
        "generations_decision_insert",
        {
            "dataset": run.dataset,
            "partition": partition,
            "run_id": run.id,
            "candidate_id": None,
            "job_id": ctx.job_id,
            "fence": ctx.fence,
            "decision": "refuse",
            "reason_code": "stale_fence",
            "reason": f"attempt {ctx.attempt} (fence {ctx.fence}) lost its lease; its output "
            f"at {location} was not registered: {why.splitlines()[0]}",
            "base_generation": None,
            "current_generation": None,
            "generation": None,
            "actor": f"worker:{ctx.worker_id}",
        },
    )


def _write(
    gen: Generations, location: str, out: list[Record], expect: rules.Expectations
) -> tuple[str, dict[str, object]]:
    data = "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in out).encode()
    return gen.store.write_once(location, data), rules.check_rows(expect, out)


def _read_inputs(
    gen: Generations, ds: Dataset, manifests: list[Manifest], required: tuple[str, ...]
) -> list[Record]:
    records: list[Record] = []
    for manifest in manifests:
        try:
            data = gen.store.read(manifest.location)
        except FileNotFoundError:
            raise _Deterministic(manifest, "unreadable", "raw input is gone", None) from None
        except OSError as exc:  # the store may come back: retry with backoff
            raise Retry(f"reading {manifest.location}: {exc}") from None
        if checksum(data) != manifest.checksum:
            raise _Deterministic(
                manifest,
                "checksum_mismatch",
                f"raw input {manifest.location} does not match its manifest's checksum",
                None,
            )
        if manifest.schema_version != ds.schema_version:
            raise _Deterministic(
                manifest,
                "schema_mismatch",
                f"manifest schema version {manifest.schema_version}, dataset expects "
                f"{ds.schema_version}",
                None,
            )
        for number, line in enumerate(data.decode(errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise _Deterministic(
                    manifest, "bad_record", f"line {number} is not JSON", None
                ) from None
            if not isinstance(record, dict) or any(f not in record for f in required):
                sample = record if isinstance(record, dict) else None
                raise _Deterministic(
                    manifest,
                    "bad_record",
                    f"line {number} lacks a required field ({', '.join(required)})",
                    sample,
                )
            records.append(record)
    return records
