"""``herald ingest demo`` run as a command, as a user runs it."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.procs import herald_command


@pytest.fixture
def env(database: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    schema = f"t_{uuid.uuid4().hex[:12]}"
    values = {
        **os.environ,
        "HERALD_DATABASE_URL": database,
        "HERALD_SCHEMA": schema,
        "HERALD_DATA_DIR": str(tmp_path / "data"),
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


@pytest.mark.slow
def test_the_demo_ingests_processes_and_searches(env: dict[str, str]) -> None:
    done = herald_command(env, "ingest", "demo", "--plans", "20000")
    assert done.returncode == 0, done.stdout + done.stderr
    run = re.search(
        r"(\d[\d,]*) rows staged, (\d+) malformed .* (\d[\d,]*) processed, 0 failed", done.stdout
    )
    assert run is not None, done.stdout
    assert run.group(1) == run.group(3) and int(run.group(2)) == 4
    items = re.findall(r"^  demo-events:\d+:\d+ +2026-03-0[12] ", done.stdout, re.M)
    assert len(items) == 5 and "next_cursor: yes" in done.stdout
    seconds = float(re.findall(r"Done in ([\d.]+) s", done.stdout)[0])
    assert seconds < 60
