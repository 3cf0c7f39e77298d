"""``herald demo`` and ``herald dataset`` run as commands, as a user runs them."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from rdflib import Graph, Literal

from herald.catalog.metadata import DCAT
from herald.db import connect, conninfo
from herald.migrate import migrate
from tests.catalog.official import official_reports
from tests.procs import herald_command


@pytest.fixture
def env(database: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The environment of a command: its own schema (dropped after) and data dir."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    values = {
        **os.environ,
        "HERALD_DATABASE_URL": database,
        "HERALD_SCHEMA": schema,
        "HERALD_DATA_DIR": str(tmp_path / "data"),
        "HERALD_PUBLIC_URL": "https://data.example.org",
        "HERALD_SOURCE_DIR": str(tmp_path),  # file sources are read only under it
    }
    try:
        yield values
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(
                psycopg.sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                    psycopg.sql.Identifier(schema)
                )
            )


herald = herald_command


def test_demo_publishes_the_sample_dataset(env: dict[str, str]) -> None:
    done = herald(env, "demo", "--records", "20000")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "version 1: published" in out
    data = Path(env["HERALD_DATA_DIR"])
    rows = re.findall(
        r"^\s+(city-measurements\.(\w+))\s+([\d,]+)\s+([\d,]+)\s+([0-9a-f]{64})$", out, re.M
    )
    assert sorted(r[1] for r in rows) == ["csv", "json", "xml"]
    for name, _ext, records, size, sha256 in rows:  # what it prints is what it wrote
        assert records == "20,000"
        # the version's files are in the folder of the attempt that published them
        (written_at,) = (data / "exports" / "city-measurements" / "v1").glob(f"job-*/{name}")
        written = written_at.read_bytes()
        assert int(size.replace(",", "")) == len(written)
        assert sha256 == hashlib.sha256(written).hexdigest()
    assert "high tier): conforms, 0 finding(s)" in out
    assert "https://data.example.org/v1/catalog" in out
    export = data / "catalog.ttl"
    assert f"Turtle export of the catalog: {export.resolve()}" in out
    catalog = Graph().parse(export, format="turtle")
    assert set(catalog.objects(None, DCAT.version)) == {Literal("1")}
    assert len(set(catalog.subjects(DCAT.downloadURL, None))) == 3
    for name, report in official_reports(catalog).items():  # the file a reader gets
        assert report.conforms, (name, report.text())
    # Into a pipe: whole lines, no carriage-return frames.
    assert "\r" not in out
    assert re.search(r"^  get_data .*100% 20,000/20,000 records", out, re.M)
    # The last lines say what the URLs need: the API running, and a key.
    last = out.rstrip().splitlines()[-4:]
    assert "herald up" in last[0] and "API key" in last[0]
    assert "herald apikey create" in last[1] and "herald up" in last[2]
    assert last[3].startswith('  curl -H "Authorization: Bearer <token>" https://data.example.org')


async def _migrate(env: dict[str, str]) -> None:
    conn = await connect(conninfo(env["HERALD_DATABASE_URL"], env["HERALD_SCHEMA"]))
    async with conn:
        await migrate(conn, env["HERALD_SCHEMA"])


@pytest.mark.slow
def test_dataset_commands(env: dict[str, str], tmp_path: Path) -> None:
    asyncio.run(_migrate(env))
    (tmp_path / "air.csv").write_text("station,no2\nBrussels,31.5\nGhent,22.0\n", "utf-8")
    spec = {
        "id": "air",
        "title": "Air quality",
        "description": "Hourly NO2 by station.",
        "publisher": {"name": "Environment Agency", "uri": "https://example.org/agency"},
        "license": "https://creativecommons.org/licenses/by/4.0/",
        "keywords": ["air", "no2"],
        "languages": ["ENG"],
        "source": {"type": "csv", "path": "air.csv"},
        "recurrence": {"frequency": "daily", "timezone": "Europe/Brussels", "at": "02:00"},
    }
    good = tmp_path / "air.json"
    good.write_text(json.dumps(spec), "utf-8")
    registered = herald(env, "dataset", "register", "--file", str(good))
    assert registered.returncode == 0, registered.stderr
    assert re.search(r"registered dataset air, schedule \d+", registered.stdout)

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**spec, "id": "other", "publisher": None}), "utf-8")
    refused = herald(env, "dataset", "register", "--file", str(bad))
    assert refused.returncode == 1 and "'publisher' must be an object" in refused.stderr

    listed = herald(env, "dataset", "list")
    assert re.search(r"^air\s+Air quality\s+basic\s+csv\s+\d+\s+1$", listed.stdout, re.M)
    assert "other" not in listed.stdout

    first = herald(env, "dataset", "publish", "air")
    assert re.fullmatch(r"air: version 1 requested \(job \d+\)\n", first.stdout)
    second = herald(env, "dataset", "publish", "air")
    assert "air: version 1 already in progress" in second.stdout
    versions = herald(env, "dataset", "versions", "air")
    assert re.search(r"^1\s+requested\s", versions.stdout, re.M)

    with psycopg.connect(conninfo(env["HERALD_DATABASE_URL"], env["HERALD_SCHEMA"])) as conn:
        schedules = conn.execute("SELECT kind, key, frequency FROM schedules").fetchall()
        source = conn.execute("SELECT source FROM datasets WHERE id = 'air'").fetchone()
    assert schedules == [("catalog.publish", "air", "daily")]
    assert source is not None and source[0]["path"] == str((tmp_path / "air.csv").resolve())

    # Registered again without a recurrence: the schedule goes, the dataset stays.
    del spec["recurrence"]
    good.write_text(json.dumps(spec), "utf-8")
    updated = herald(env, "dataset", "register", "--file", str(good))
    assert updated.stdout == "updated dataset air\n"
    with psycopg.connect(conninfo(env["HERALD_DATABASE_URL"], env["HERALD_SCHEMA"])) as conn:
        assert conn.execute("SELECT count(*) FROM schedules").fetchone() == (0,)
