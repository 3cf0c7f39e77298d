"""``herald demo``: publish a sample dataset to the open-data catalog, end to end.

On the embedded database and the embedded Oxigraph store under the data dir it
registers a dataset of generated records, requests its publication, runs a worker and
the cleanup runner in this process with a progress bar per step, then shows the
version, its files, the validation result and where the DCAT-AP can be read.

``herald.demo:app`` is also the CLI's default application (``herald worker``, ``up``,
``serve``): the catalog kinds, bound to the settings of the environment when first used.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import sys
import time
from typing import Any, TextIO

from herald.catalog import datasets as registry
from herald.catalog.datasets import Dataset, VersionRecord, VersionState
from herald.catalog.errors import TripleStoreError
from herald.catalog.metadata import (
    Agent,
    Concept,
    ContactPoint,
    DatasetInfo,
    License,
    Location,
    Period,
    language,
)
from herald.catalog.pipeline import (
    ProgressEvent,
    catalog_graphs,
    catalog_runtime,
    close_embedded_store,
    register_catalog,
    request_publication,
    save_dataset,
)
from herald.catalog.publishing import CatalogSettings
from herald.catalog.triplestore import TripleStore, export_catalog
from herald.client import Client, open_connection
from herald.config import Settings
from herald.ingest.jobs import register_ingest
from herald.migrate import migrate
from herald.ops.housekeeping import Housekeeper
from herald.registry import Herald
from herald.rows import Job
from herald.social.pipeline import register_social
from herald.states import JobState
from herald.worker import Worker

DEFAULT_RECORDS = 300_000
DATASET_ID = "city-measurements"
_TIMEOUT = 1800.0  # seconds: the demo gives up rather than wait forever


def create_app(settings: Settings | None = None) -> Herald:
    """The built-in application: the catalog's kinds (``catalog.publish``, ...), the
    ingestion's and the social ones."""
    app = Herald()
    register_catalog(app, settings or Settings.from_env())
    register_ingest(app, settings or Settings.from_env())  # ingest.fetch, ingest.process
    register_social(app, settings or Settings.from_env())  # social.post, social.revoke
    return app


_default_app: Herald | None = None


def __getattr__(name: str) -> Any:
    # ``app`` is built on first use, so importing this module reads no settings.
    global _default_app
    if name == "app":
        if _default_app is None:
            _default_app = create_app()
        return _default_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def sample_dataset(records: int) -> Dataset:
    """The demo's dataset: full DCAT-AP metadata, so it is published at the high tier."""
    info = DatasetInfo(
        id=DATASET_ID,
        title="City measurements",
        description=f"{records:,} generated measurements from the cities of the network.",
        publisher=Agent(
            "Herald demo office",
            "https://example.org/herald-demo",
            Concept("http://purl.org/adms/publishertype/NationalAuthority", "National authority"),
        ),
        license=License(
            "https://creativecommons.org/licenses/by/4.0/",
            Concept("http://purl.org/adms/licencetype/Attribution", "Attribution"),
        ),
        keywords=("measurements", "cities", "demo"),
        themes=(
            Concept(
                "http://publications.europa.eu/resource/authority/data-theme/ENVI", "Environment"
            ),
        ),
        contact_point=ContactPoint("Open data team", email="opendata@example.org"),
        languages=(language("ENG"),),
        spatial=Location(
            "http://publications.europa.eu/resource/authority/continent/EUROPE",
            bbox="POLYGON((-25 34, 45 34, 45 72, -25 72, -25 34))",
            centroid="POINT(10 54)",
        ),
        temporal=Period(dt.date(2024, 1, 1), dt.date(2025, 11, 30)),
        landing_page="https://example.org/herald-demo/city-measurements",
    )
    return Dataset(info, {"type": "generated", "count": records}, tier="high")


class ProgressBars:
    """One plain-text bar per step, redrawn in place with ``\\r`` on a terminal. Into a
    file or a pipe it writes whole lines instead: one per quarter of a step and one
    when the step ends (no carriage-return frames for a log to keep)."""

    WIDTH = 30

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.live = out.isatty()
        self.step: str | None = None
        self.started = time.monotonic()
        self.shown = -1  # quarters of the step already written (not live)

    def __call__(self, event: ProgressEvent) -> None:
        if event.step != self.step:
            if self.step is not None and self.live:
                self.out.write("\n")
            self.step = event.step
            self.started = time.monotonic()
            self.shown = -1
        total = event.total
        fraction = min(1.0, event.done / total) if total else (1.0 if event.finished else 0.0)
        filled = int(fraction * self.WIDTH)
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        if event.step == "get_data":
            count = f"{event.done:,}" + (f"/{total:,} records" if total else " records")
        else:
            count = f"{event.done}/{total} (validate, write entry, publish)"
        elapsed = time.monotonic() - self.started
        line = f"  {event.step:<12} [{bar}] {fraction:4.0%} {count} {elapsed:5.1f}s"
        if self.live:
            self.out.write("\r" + line)
        else:
            quarter = int(fraction * 4)
            if quarter <= self.shown:
                return
            self.shown = quarter
            self.out.write(line + "\n")
        self.out.flush()

    def close(self) -> None:
        if self.step is not None:
            if self.live:
                self.out.write("\n")
            self.out.flush()
            self.step = None


async def _wait_for(client: Client, job_id: int) -> Job:
    deadline = time.monotonic() + _TIMEOUT
    while True:
        job = await client.job(job_id)
        if job is None:
            raise RuntimeError(f"job {job_id} disappeared")
        if not job.active or time.monotonic() > deadline:
            return job
        await asyncio.sleep(0.1)


def _show_version(record: VersionRecord) -> None:
    print(f"\nDataset {record.dataset_id}, version {record.version}: {record.state}")
    if not record.files:
        return
    name_width = max(len("FILE"), *(len(f.name) for f in record.files))
    print(f"  {'FILE'.ljust(name_width)}  {'RECORDS':>9}  {'BYTES':>12}  SHA-256")
    for f in record.files:
        print(f"  {f.name.ljust(name_width)}  {f.record_count:>9,}  {f.byte_size:>12,}  {f.sha256}")


async def run_demo(settings: Settings, records: int = DEFAULT_RECORDS) -> int:
    """Publish the sample dataset; 0 when its version is published."""
    if records < 0:
        print("error: --records must not be negative", file=sys.stderr)
        return 2
    where = "embedded" if not settings.database_url else "configured"
    print(f"Herald demo: {where} PostgreSQL, data in {settings.data_dir.resolve()}")
    # The progress bars tell the story; routine log lines would break them up.
    logging.getLogger("herald").setLevel(logging.WARNING)
    conn = await open_connection(settings)
    async with conn:
        applied = await migrate(conn, settings.schema)
    print(f"  schema {settings.schema!r} ready ({len(applied)} migrations applied now)")
    catalog = CatalogSettings.from_env()
    app = Herald()
    register_catalog(app, settings, catalog)
    runtime = catalog_runtime(app)
    try:
        store = runtime.triple_store  # opened now: a store another process holds fails here
    except TripleStoreError as exc:
        print(f"error: {exc}; is `herald up` running on this data dir?", file=sys.stderr)
        return 1
    bars = ProgressBars(sys.stdout)
    runtime.observers.append(bars)
    try:
        async with await Client.open(app, settings) as client:
            dataset, created = await save_dataset(client, sample_dataset(records))
            print(
                f"  {'registered' if created else 'updated'} dataset {dataset.id!r} "
                f"({records:,} generated records, {dataset.tier} tier)"
            )
            admitted = await request_publication(client, dataset.id)
            note = "" if admitted.outcome.value == "created" else " (already in progress)"
            print(f"  publication: job {admitted.id}, version {admitted.version}{note}\n")
            job = await _run_jobs(app, settings, client, admitted.id)
            bars.close()
            async with client.pool.connection() as c:
                record = await registry.get_version(c, dataset.id, admitted.version)
                graphs = await catalog_graphs(c, catalog.urls)
            if record is None:
                print(f"error: version {admitted.version} was not recorded", file=sys.stderr)
                return 1
            return _summary(settings, catalog, store, graphs, job, record)
    finally:
        bars.close()
        close_embedded_store(settings)


async def _run_jobs(app: Herald, settings: Settings, client: Client, job_id: int) -> Job:
    """Run a worker and the housekeeping duties here until the job is finished."""
    worker = Worker(app, settings=settings, concurrency=4, name="herald-demo")
    keeper = await Housekeeper.open(app, settings, cleanup_interval=1.0)
    stop = asyncio.Event()
    tasks = [asyncio.create_task(worker.run()), asyncio.create_task(keeper.run(stop))]
    try:
        job = await _wait_for(client, job_id)
        if job.state == JobState.DEAD:  # undo the failed attempt now
            await keeper.cleanup.run_once()
        return job
    finally:
        worker.stop()
        stop.set()
        await asyncio.gather(*tasks)
        await keeper.close()


def _summary(
    settings: Settings,
    catalog: CatalogSettings,
    store: TripleStore,
    graphs: list[str],
    job: Job,
    record: VersionRecord,
) -> int:
    _show_version(record)
    if record.state != VersionState.PUBLISHED:
        print(f"\nPublication job {job.id} ended {job.state}.")
        if record.error:
            print(record.error)
        elif job.errors:
            print(job.errors[-1]["message"])
        return 1
    validation = record.validation or {}
    findings = validation.get("findings", [])
    verdict = "conforms" if validation.get("conforms") else "does not conform"
    print(
        f"\nValidation (SHACL, DCAT-AP {validation.get('tier', '?')} tier): {verdict}, "
        f"{len(findings)} finding(s)"
    )
    for finding in findings:
        print(
            f"  - {finding['severity']}: {finding['focus_node']} {finding['path']}: "
            f"{finding['message']}"
        )
    export_path = (settings.data_dir / "catalog.ttl").resolve()
    export_path.write_bytes(export_catalog(store, "turtle", graphs=graphs))
    urls = catalog.urls
    print("\nDCAT-AP")
    print(f"  Turtle export of the catalog: {export_path}")
    print(f"  files under:                  {(settings.data_dir / 'exports').resolve()}")
    print(f"  this version:                 {urls.version(record.dataset_id, record.version)}")
    print(f"  the catalog:                  {urls.catalog_graph}")
    print(
        "\nThese URLs are served by the API (`herald up`; pip install -e '.[api]'), to an API "
        "key with the read scope:"
    )
    print("  .venv/bin/herald apikey create me --scopes read      # prints a token, once")
    print("  .venv/bin/herald up --app herald.demo:app            # API, worker, scheduler")
    print(f'  curl -H "Authorization: Bearer <token>" {urls.catalog_graph}')
    return 0
