"""The catalog's versions as generations (:mod:`herald.generations`).

The catalog is one generations dataset, ``catalog``; each catalog dataset is one of its
partitions (the partition is the dataset id). A version is a run of that partition whose
task is the version's ``catalog.publish`` job, reading the dataset's live source; each
attempt exports to a folder of its own (``<id>/v<n>/job-<job>-fence-<fence>/``) and never
touches another's bytes; the attempt holding the job's current fence registers its files
as the run's candidate, and the coordinator publishes it as the partition's next
generation (pointer swap, outbox event and deliveries) in the transaction of the job's
fenced completion. The catalog entry shows the generation the pointer names.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from herald import sql, tenancy
from herald.catalog import datasets as registry
from herald.catalog.export import ExportedFile
from herald.catalog.metadata import Lineage, PublishedVersion
from herald.catalog.store import ExportStore
from herald.config import Settings
from herald.context import JobContext
from herald.db import AsyncConn
from herald.errors import Permanent
from herald.generations import records
from herald.generations.coordinator import decide_and_record
from herald.generations.rows import Candidate
from herald.generations.runtime import publisher
from herald.generations.shared import Generations
from herald.registry import Herald
from herald.rows import fetch_all, from_row, one_row

GEN_DATASET = "catalog"  # the generations dataset the catalog publishes as
DEFINITION = "catalog-export"  # the definition version of every catalog run
_CHUNK = 1 << 20


def gen_dataset(gens: Generations | None = None) -> str:
    """The generations dataset the current tenant's catalog publishes as: ``catalog`` for
    the default tenant, ``catalog.<tenant>`` for another (names are deployment-wide).
    With ``gens``, the tenant's dataset gets the catalog's verifier in this process."""
    tenant = tenancy.current()
    name = (
        GEN_DATASET if tenant in (tenancy.DEFAULT, tenancy.PLATFORM) else f"{GEN_DATASET}.{tenant}"
    )
    if gens is not None and name not in gens.verifiers:
        gens.verifiers[name] = gens.verifiers[GEN_DATASET]
    return name


def attach(app: Herald, settings: Settings, store: ExportStore) -> Generations:
    """The generations publisher on ``app``, checking catalog candidates against ``store``."""
    gens = publisher(app, settings)
    gens.use(settings)
    gens.verifiers[GEN_DATASET] = lambda candidate: verify_candidate(store, candidate)
    return gens


def attempt_folder(job_id: int, fence: int) -> str:
    """The folder (under its version's) one attempt exports to: no other attempt ever
    writes there."""
    return f"job-{job_id}-fence-{fence}"


def files_checksum(files: Iterable[Mapping[str, Any]]) -> str:
    """One checksum for a version's files: SHA-256 over ``format sha256 name`` lines in
    format order (the data migration computes the same in SQL)."""
    lines = sorted(f"{f['format']} {f['sha256']} {f['name']}\n" for f in files)
    return "sha256:" + hashlib.sha256("".join(lines).encode()).hexdigest()


def source_label(source: Mapping[str, Any]) -> str:
    """What a version's records were read from, fit to publish (no query text, no path
    beyond the file name)."""
    kind = source.get("type")
    if kind in ("csv", "jsonl"):
        name = str(source.get("path", "")).rsplit("/", 1)[-1]
        return f"{'CSV' if kind == 'csv' else 'JSON Lines'} file {name}"
    if kind == "postgres_table":
        return f"PostgreSQL table {source.get('table')}"
    if kind == "postgres_query":
        return "a PostgreSQL query"
    if kind == "generated":
        return f"{source.get('count')} generated sample records"
    return str(kind)


async def ensure_run(
    conn: AsyncConn, dataset_id: str, version: int, job_id: int, source: Mapping[str, Any]
) -> int:
    """The run of a version, declared when its publication first starts (once)."""
    cur = await conn.execute(
        sql.query("catalog_version_run"), {"dataset_id": dataset_id, "version": version}
    )
    row = await cur.fetchone()
    if row is not None and row["run_id"] is not None:
        return int(row["run_id"])
    name = gen_dataset()
    if name != GEN_DATASET:  # the default tenant's was made by the migration
        await records.register_dataset(
            conn, records.DatasetSpec(name=name, owner="catalog", fields=("files",))
        )
    run = await records.declare_live_run(
        conn,
        dataset_name=name,
        partition=dataset_id,
        definition_version=DEFINITION,
        live_source={"type": source.get("type"), "label": source_label(source)},
        job_id=job_id,
        requested_by="catalog",
        reason=f"publication of version {version} of {dataset_id}",
    )
    await conn.execute(
        sql.query("catalog_version_set_run"),
        {"dataset_id": dataset_id, "version": version, "run_id": run.id},
    )
    return run.id


async def publish(
    gens: Generations,
    conn: AsyncConn,
    ctx: JobContext,
    *,
    dataset_id: str,
    version: int,
    run_id: int,
    files: Sequence[ExportedFile],
    record_count: int,
    validation: Mapping[str, Any],
    source: Mapping[str, Any],
) -> int:
    """Register this attempt's files as the run's candidate and let the coordinator
    publish it; the generation. Runs in the job's fenced completion: a stale attempt's
    registration is refused by the candidates' fence guard and nothing commits."""
    listed = [
        {
            "format": f.format.name,
            "name": f.name,
            "key": f.key,
            "sha256": f.sha256,
            "byte_size": f.byte_size,
        }
        for f in files
    ]
    location = files[0].key.rsplit("/", 1)[0]
    lineage = {
        "run": run_id,
        "version": version,
        "source": {"type": source.get("type"), "label": source_label(source)},
        "files": listed,
        "job": ctx.job_id,
        "attempt": ctx.attempt,
        "fence": ctx.fence,
    }
    quality = {
        "dcat_ap": {
            "passed": bool(validation.get("conforms", True)),
            "detail": f"SHACL validation at the {validation.get('tier', 'basic')} tier",
        },
        "row_count": {"passed": True, "detail": f"{record_count} records"},
    }
    registered = await one_row(
        conn,
        "generations_candidate_insert",
        {
            "run_id": run_id,
            "dataset": gen_dataset(gens),
            "partition": dataset_id,
            "job_id": ctx.job_id,
            "attempt": ctx.attempt,
            "fence": ctx.fence,
            "worker": ctx.worker_id,
            "location": location,
            "checksum": files_checksum(listed),
            "row_count": record_count,
            "schema_version": 1,
            "quality": json.dumps(quality),
            "lineage": json.dumps(lineage),
        },
    )
    candidate = from_row(Candidate, registered)
    decision = await decide_and_record(gens, conn, candidate, actor=f"worker:{ctx.worker_id}")
    if decision.decision != "publish" or decision.generation is None:
        raise Permanent(f"version {version} of {dataset_id} was not published: {decision.reason}")
    generation = decision.generation
    await conn.execute(
        sql.query("catalog_version_set_generation"),
        {"dataset_id": dataset_id, "version": version, "generation": generation},
    )
    return generation


async def abandon(conn: AsyncConn, dataset_id: str, version: int, why: str) -> None:
    """Settle the run of a version that failed or was cancelled (nothing registered)."""
    cur = await conn.execute(
        sql.query("catalog_version_run"), {"dataset_id": dataset_id, "version": version}
    )
    row = await cur.fetchone()
    if row is not None and row["run_id"] is not None:
        await records.settle_failed(conn, int(row["run_id"]), dataset_id, why[:1000])


def verify_candidate(store: ExportStore, candidate: Candidate) -> list[str]:
    """Pre-publication check of a catalog candidate: every file it lists is re-read from
    the export store and hashed, and the listing matches the registered checksum."""
    files = candidate.lineage.get("files") or []
    if not files:
        return ["the candidate lists no files"]
    failures = []
    if files_checksum(files) != candidate.checksum:
        failures.append("the files listed do not match the registered checksum")
    for f in files:
        digest = hashlib.sha256()
        try:
            with store.open(str(f["key"])) as handle:
                while chunk := handle.read(_CHUNK):
                    digest.update(chunk)
        except OSError as exc:
            failures.append(f"{f['name']} is unreadable: {exc}")
            continue
        if digest.hexdigest() != f["sha256"]:
            failures.append(f"{f['name']}: the stored bytes differ from the registered SHA-256")
    return failures


async def first_issued(conn: AsyncConn, dataset_id: str) -> dt.datetime | None:
    """When the dataset was first published (its entry's dct:issued), if ever."""
    found = await registry.list_versions(conn, dataset_id)
    published = [v.published_at for v in found if v.published_at is not None]
    return min(published) if published else None


async def history(conn: AsyncConn, dataset_id: str, limit: int) -> list[PublishedVersion]:
    """The dataset's newest ``limit`` published versions, oldest first, each with its
    files, notes and lineage: what the entry links as versions of the dataset."""
    params = {"dataset_id": dataset_id, "limit": limit}
    found = await fetch_all(conn, "catalog_published_history", params, PublishedRow)
    return [published_version(row) for row in found]


@dataclass(frozen=True)
class PublishedRow:
    """A published version with its files and its run's source
    (``catalog_published_history``)."""

    version: int
    generation: int
    run_id: int
    record_count: int | None
    created_at: dt.datetime
    published_at: dt.datetime
    live_source: dict[str, Any] | None
    files: list[dict[str, Any]]


def published_version(
    row: PublishedRow, files: Sequence[ExportedFile] | None = None
) -> PublishedVersion:
    """A published version as the entry describes it, from a history row."""
    listed = files if files is not None else [ExportedFile.from_dict(f) for f in row.files]
    return PublishedVersion(
        version=row.version,
        generation=row.generation,
        files=tuple(listed),
        published=row.published_at,
        record_count=row.record_count or 0,
        lineage=Lineage(
            run=row.run_id,
            source=str((row.live_source or {}).get("label") or "its source"),
            started=row.created_at,
            ended=row.published_at,
        ),
    )


def pending_version(
    version: int,
    generation: int,
    files: Sequence[ExportedFile],
    record_count: int,
    run_id: int,
    source: Mapping[str, Any],
    started: dt.datetime,
    now: dt.datetime,
) -> PublishedVersion:
    """The version being published, as its entry will describe it."""
    return PublishedVersion(
        version=version,
        generation=generation,
        files=tuple(files),
        published=now,
        record_count=record_count,
        lineage=Lineage(run=run_id, source=source_label(source), started=started, ended=now),
    )
