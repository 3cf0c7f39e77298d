"""Regression tests for the dataset-source findings."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Mapping
from pathlib import Path

import psycopg
import pytest

from herald.catalog.errors import SourceError
from herald.catalog.export import export_records
from herald.catalog.source_access import Cancellation, SourceAccess
from herald.catalog.sources import source_from_spec
from herald.catalog.store import LocalExportStore
from tests.conftest import SourceRole


def _export(access: SourceAccess, spec: Mapping[str, object], store: LocalExportStore) -> str:
    for key in store.list("x/v1"):
        store.delete(key)
    result = export_records(source_from_spec(spec, access), store, "x/v1", "x", ["csv"])
    return store.path(result.files[0].key).read_text()


def test_database_sources_read_only_their_schema_as_their_own_role(
    tmp_path: Path, source_role: SourceRole, database: str
) -> None:
    store = LocalExportStore(tmp_path / "exports")
    access = SourceAccess(tmp_path, source_role.url, schemas=(source_role.schema,))
    published = _export(
        access, {"type": "postgres_query", "query": "SELECT * FROM measures"}, store
    )
    assert published.splitlines()[0] == "id,name" and len(published.splitlines()) == 5
    for query in (
        "SELECT rolname, rolpassword FROM pg_authid",
        "SELECT pg_read_file('/etc/passwd')",
        "SELECT nextval('counter')",  # a sequence: read-only transactions cannot advance it
        "SELECT query FROM pg_stat_activity WHERE query IS NOT NULL AND usename <> current_user"
        " AND query <> '<insufficient privilege>' AND false",
    ):
        try:
            text = _export(access, {"type": "postgres_query", "query": query}, store)
        except SourceError as exc:
            assert "passwd" not in str(exc) and "root:" not in str(exc)
        else:  # only what the role may see: here, nothing of other sessions
            assert len(text.splitlines()) == 1, text
    with psycopg.connect(database) as conn:
        row = conn.execute(
            f'SELECT last_value, is_called FROM "{source_role.schema}".counter'
        ).fetchone()
    assert row == (1, False)  # never advanced
    # Herald's own role (a superuser here) is refused, whatever it could read.
    as_herald = SourceAccess(tmp_path, database, herald_conninfo=database)
    with pytest.raises(SourceError, match=r"superuser|Herald's own role"):
        _export(as_herald, {"type": "postgres_query", "query": "SELECT 1"}, store)
    # A role that can read outside the allowed schemas is refused.
    narrow = SourceAccess(tmp_path, source_role.url, schemas=("public",))
    with pytest.raises(SourceError, match="outside the allowed schemas"):
        _export(narrow, {"type": "postgres_query", "query": "SELECT 1"}, store)
    with pytest.raises(SourceError, match="HERALD_SOURCE_DATABASE_URL"):
        _export(SourceAccess(tmp_path), {"type": "postgres_table", "table": "measures"}, store)


def test_a_cancelled_source_query_stops_on_the_server(
    tmp_path: Path, source_role: SourceRole, database: str
) -> None:
    access = SourceAccess(tmp_path, source_role.url, schemas=(source_role.schema,))
    cancellation = Cancellation()
    spec = {"type": "postgres_query", "query": "SELECT pg_sleep(600)"}
    source = source_from_spec(spec, access, cancellation)
    failure: list[BaseException] = []

    def run() -> None:
        try:
            export_records(source, LocalExportStore(tmp_path / "e"), "s/v1", "s", ["csv"])
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    started = time.monotonic()

    def sleeping() -> int:
        with psycopg.connect(database) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE usename = %s AND state = 'active' AND wait_event = 'PgSleep'",
                (source_role.role,),
            ).fetchone()
        return int(row[0]) if row else 0

    while sleeping() == 0:
        assert time.monotonic() - started < 30
        time.sleep(0.05)
    cancellation.cancel()
    thread.join(30)
    assert not thread.is_alive() and isinstance(failure[0], SourceError)
    assert "cancelled" in str(failure[0])
    assert time.monotonic() - started < 30 and sleeping() == 0


def test_file_sources_stay_in_the_source_directory(tmp_path: Path) -> None:
    root = tmp_path / "sources"
    root.mkdir()
    (root / "ok.csv").write_text("a\n1\n", "utf-8")
    secret = tmp_path / "secret.csv"
    secret.write_text("password\nhunter2\n", "utf-8")
    (root / "link.csv").symlink_to(secret)
    (root / "proc.csv").symlink_to("/proc/self/environ")
    access = SourceAccess(root)
    store = LocalExportStore(tmp_path / "exports")
    assert _export(access, {"type": "csv", "path": "ok.csv"}, store).split() == ["a", "1"]
    for path in (
        "../secret.csv",
        "../../../../etc/hostname",
        str(secret),
        "link.csv",
        "proc.csv",
        "/proc/self/environ",
        "missing.csv",
    ):
        with pytest.raises(SourceError) as refused:
            _export(access, {"type": "csv", "path": path}, store)
        message = str(refused.value)
        assert "hunter2" not in message and os.environ.get("PATH", "§") not in message


def test_errors_never_quote_a_files_contents(tmp_path: Path) -> None:
    (tmp_path / "dup.csv").write_text("token-abc,token-abc\n1,2\n", "utf-8")
    (tmp_path / "extra.jsonl").write_text('{"a": 1}\n{"a": 2, "token-xyz": 3}\n', "utf-8")
    store = LocalExportStore(tmp_path / "exports")
    access = SourceAccess(tmp_path)
    for spec in ({"type": "csv", "path": "dup.csv"}, {"type": "jsonl", "path": "extra.jsonl"}):
        with pytest.raises(SourceError) as refused:
            _export(access, spec, store)
        assert "token-" not in str(refused.value)


async def test_registration_refuses_sources_that_cannot_work(api: object) -> None:
    from tests.security.conftest import Api, problem

    assert isinstance(api, Api)
    base = {
        "id": "files",
        "title": "Files",
        "description": "",
        "publisher": {"name": "Office", "uri": "https://example.org/office"},
    }
    for source in (
        {"type": "csv", "path": "nowhere.csv"},
        {"type": "csv", "path": "../../../../etc/hostname"},
        {"type": "postgres_table", "table": "api_keys"},  # no source role configured
    ):
        r = await api.http.post(
            "/v1/datasets", json={**base, "source": source}, headers=api.auth("admin")
        )
        problem(r, 422, "invalid-dataset")
    await asyncio.sleep(0)
