"""The dataset registry and version records, on a real PostgreSQL."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import psycopg
import pytest

from herald.catalog.admission import create_version
from herald.catalog.datasets import (
    Dataset,
    InvalidTransition,
    VersionState,
    forget_files,
    get_dataset,
    get_version,
    list_datasets,
    list_versions,
    record_files,
    register_dataset,
    set_version_job,
    transition,
)
from herald.catalog.errors import MetadataError, SourceError
from herald.catalog.export import export_records
from herald.catalog.source_access import SourceAccess
from herald.catalog.sources import GeneratedSource, source_from_spec
from herald.catalog.store import LocalExportStore
from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo
from tests.catalog.samples import BASIC_DATASET, HIGH_DATASET, files
from tests.conftest import SourceRole

SAMPLE = Dataset(HIGH_DATASET, {"type": "generated", "count": 1000}, tier="high")


@pytest.fixture
async def conn(settings: Settings) -> AsyncIterator[AsyncConn]:
    assert settings.database_url is not None
    connection = await connect(conninfo(settings.database_url, settings.schema))
    try:
        yield connection
    finally:
        await connection.close()


async def test_register_round_trips_every_field_and_updates_in_place(conn: AsyncConn) -> None:
    stored, created = await register_dataset(conn, SAMPLE)
    assert created
    assert stored == dataclasses.replace(SAMPLE, next_version=1)
    assert await get_dataset(conn, "measures") == stored
    renamed = dataclasses.replace(SAMPLE, info=dataclasses.replace(HIGH_DATASET, title="New"))
    updated, created = await register_dataset(conn, renamed)
    assert not created and updated.info.title == "New"
    assert [d.id for d in await list_datasets(conn)] == ["measures"]
    assert await get_dataset(conn, "missing") is None


@pytest.mark.parametrize(
    ("dataset", "error", "message"),
    [
        (Dataset(BASIC_DATASET, {"type": "generated", "count": 1}), MetadataError, "publisher"),
        (dataclasses.replace(SAMPLE, source={"type": "ftp"}), SourceError, "source type"),
        (dataclasses.replace(SAMPLE, source={"type": "csv"}), SourceError, "'path'"),
        (
            dataclasses.replace(SAMPLE, info=dataclasses.replace(HIGH_DATASET, id="a/b")),
            ValueError,
            "dataset id",
        ),
        (dataclasses.replace(SAMPLE, tier="gold"), MetadataError, "quality tier"),  # type: ignore[arg-type]
    ],
)
async def test_bad_datasets_are_refused_and_nothing_is_stored(
    conn: AsyncConn, dataset: Dataset, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        await register_dataset(conn, dataset)
    assert await list_datasets(conn) == []


async def test_database_refuses_what_the_code_would_never_write(conn: AsyncConn) -> None:
    await register_dataset(conn, SAMPLE)
    with pytest.raises(psycopg.errors.CheckViolation):
        await conn.execute("UPDATE datasets SET tier = 'gold'")
    assert await create_version(conn, "measures", 1, 7)
    with pytest.raises(psycopg.errors.CheckViolation):
        await conn.execute("UPDATE dataset_versions SET state = 'published'")
    with pytest.raises(psycopg.errors.CheckViolation):
        await conn.execute("UPDATE dataset_versions SET state = 'failed'")
    with pytest.raises(psycopg.errors.UniqueViolation):
        await conn.execute(
            "INSERT INTO dataset_versions (dataset_id, version) VALUES ('measures', 99)"
        )


async def test_versions_move_through_their_states(conn: AsyncConn) -> None:
    await register_dataset(conn, SAMPLE)
    assert await create_version(conn, "measures", 1, 7)
    first = await get_version(conn, "measures", 1)
    assert first is not None and first.state == "requested" and first.job_id == 7
    assert not await create_version(conn, "measures", 1, 7)  # a retried get_data
    await set_version_job(conn, "measures", 1, 42)
    await transition(conn, "measures", 1, VersionState.EXPORTING)
    await record_files(conn, "measures", 1, files(1))
    await record_files(conn, "measures", 1, files(1))  # a retried export records again
    await transition(conn, "measures", 1, VersionState.EXPORTED, record_count=1000)
    with pytest.raises(InvalidTransition, match="is exported; it cannot become deleted"):
        await transition(conn, "measures", 1, VersionState.DELETED)
    report = {"tier": "high", "conforms": True, "findings": []}
    published = await transition(
        conn, "measures", 1, VersionState.PUBLISHED, validation=report, metadata="<a> <b> <c> ."
    )
    assert published.published_at is not None and published.record_count == 1000

    assert await create_version(conn, "measures", 2, 43)
    failed = await transition(
        conn, "measures", 2, VersionState.FAILED, error="persist_data: invalid"
    )
    assert failed.error == "persist_data: invalid"
    assert await create_version(conn, "measures", 3, 44)
    assert not await create_version(conn, "measures", 2, 45)  # numbers are never reused

    stored = await get_version(conn, "measures", 1)
    assert stored is not None and stored.job_id == 42 and stored.validation == report
    assert [(f.format, f.byte_size, f.sha256) for f in stored.files] == sorted(
        (f.format.name, f.byte_size, f.sha256) for f in files(1)
    )
    assert [(v.version, v.state) for v in await list_versions(conn, "measures")] == [
        (3, "requested"),
        (2, "failed"),
        (1, "published"),
    ]
    await transition(conn, "measures", 1, VersionState.DELETING)
    assert await forget_files(conn, "measures", 1) == sorted(f.key for f in files(1))
    deleted = await transition(conn, "measures", 1, VersionState.DELETED)
    assert deleted.deleted_at is not None
    assert not await create_version(conn, "missing", 1, 46)


async def test_sources_from_specs(
    settings: Settings, tmp_path: Path, source_role: SourceRole
) -> None:
    (tmp_path / "rows.csv").write_text("a;b\n1;2\n", encoding="utf-8")
    store = LocalExportStore(tmp_path / "exports")
    access = SourceAccess(tmp_path, source_role.url, schemas=(source_role.schema,))
    specs: list[dict[str, object]] = [
        {"type": "generated", "count": 5},
        {"type": "csv", "path": "rows.csv", "delimiter": ";"},
        {
            "type": "postgres_query",
            "query": "SELECT g FROM generate_series(1, %(n)s) g",
            "params": {"n": 4},
        },
        {"type": "postgres_table", "table": "measures"},
    ]
    counts = []
    for i, spec in enumerate(specs):
        source = source_from_spec(spec, access)
        counts.append(export_records(source, store, f"s{i}/v1", "s", ["csv"]).record_count)
    assert counts == [5, 1, 4, 4]
    assert isinstance(source_from_spec(specs[0], access), GeneratedSource)
    with pytest.raises(SourceError, match="unknown source field"):
        source_from_spec({"type": "generated", "count": 1, "rows": 2}, access)
