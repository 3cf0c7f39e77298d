"""Housekeeping duties: each held by one process at a time, taken over when its holder
stops or dies, and run by every deployment shape (``herald worker`` here)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from herald import Herald
from herald.catalog.undo import PARTIAL_AGE
from herald.config import Settings
from herald.db import connect, conninfo
from herald.ops.housekeeping import Housekeeper, duties, duty_lease
from tests.eventually import eventually_sync
from tests.procs import herald_command
from tests.support import APP

ROOT = Path(__file__).resolve().parent.parent


async def test_each_duty_has_one_holder_and_is_handed_over(settings: Settings) -> None:
    first = await Housekeeper.open(APP, settings, holder="first")
    second = await Housekeeper.open(APP, settings, holder="second")
    try:
        names = {d.name for d in first.duties}
        assert any(n.startswith("cleanup:") for n in names)
        assert await first.hold_once() == names
        assert await second.hold_once() == frozenset()  # held, under a live lease
        assert await first.hold_once() == names  # renewing keeps them
        # A graceful stop hands them over at once.
        await first.release()
        assert await second.hold_once() == names
        # A holder that stops renewing (dead, hung) loses them once its lease lapses.
        assert await first.hold_once() == frozenset()
        await asyncio.sleep(duty_lease(settings) + 0.2)
        assert await first.hold_once() == names
        assert await second.hold_once() == frozenset()
        async with await connect(conninfo(settings.database_url or "", settings.schema)) as c:
            held = {row.name: row.holder for row in await duties(c)}
        assert held == dict.fromkeys(names, "first")
    finally:
        await first.close()
        await second.close()


async def test_only_the_holder_runs_a_duty(settings: Settings) -> None:
    app = Herald()
    runs: list[str] = []

    @app.duty("count", every=0.05)
    def count() -> None:
        runs.append("ran")

    keepers = [await Housekeeper.open(app, settings, holder=f"k{i}") for i in range(3)]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(k.run(stop)) for k in keepers]
    try:
        await asyncio.sleep(1.0)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
        for keeper in keepers:
            await keeper.close()
    ran_in = [k.holder for k in keepers if k.stats.passes.get("count")]
    assert len(ran_in) == 1 and len(runs) >= 5  # one process, again and again
    with pytest.raises(ValueError, match="registered twice"):
        app.duty("count", every=1)(count)


@pytest.mark.slow
def test_herald_worker_runs_cleanup_and_sweeps(settings: Settings, tmp_path: Path) -> None:
    """The scale-out shape: a dead publication is compensated, and a killed writer's
    partial upload swept, by a plain ``herald worker`` (no ``herald up`` anywhere)."""
    data = tmp_path / "data"
    source = tmp_path / "bad.csv"
    source.write_text("a,b\n1\n", "utf-8")
    spec = tmp_path / "bad.json"
    spec.write_text(
        json.dumps(
            {
                "id": "bad",
                "title": "Bad",
                "description": "A record too short.",
                "publisher": {"name": "Office", "uri": "https://example.org/office"},
                "source": {"type": "csv", "path": str(source)},
            }
        ),
        "utf-8",
    )
    partial = data / "exports" / "old" / "v1" / ".old.csv.0123abcd.part"
    partial.parent.mkdir(parents=True)
    partial.write_bytes(b"a,b\n")
    old = time.time() - 2 * PARTIAL_AGE
    os.utime(partial, (old, old))
    env = {
        **os.environ,
        "HERALD_DATABASE_URL": settings.database_url or "",
        "HERALD_SCHEMA": settings.schema,
        "HERALD_DATA_DIR": str(data),
        "HERALD_SOURCE_DIR": str(tmp_path),  # file sources are read only under it
        "HERALD_RESCUE_INTERVAL": "0.2",
        "PYTHONPATH": str(ROOT),
    }

    assert herald_command(env, "dataset", "register", "--file", str(spec)).returncode == 0
    assert herald_command(env, "dataset", "publish", "bad").returncode == 0
    log = tmp_path / "worker.log"
    with log.open("w") as out:
        worker = subprocess.Popen(
            [sys.executable, "-m", "herald", "worker", "--json-logs", "--app", "herald.demo:app"],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        info = conninfo(settings.database_url or "", settings.schema)

        def cleaned_up() -> bool:
            with psycopg.connect(info) as conn:
                row = conn.execute("SELECT cleanup_state FROM dead_letters").fetchone()
            assert worker.poll() is None, log.read_text()
            return row is not None and row[0] == "done" and not partial.exists()

        eventually_sync(cleaned_up, what="the compensation", within=60, report=log.read_text)
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(60)
    messages = [json.loads(line)["message"] for line in log.read_text().splitlines() if line]
    assert any("took over" in m and "catalog.sweep" in m for m in messages)
