"""``herald generations ...`` on a real database: the operator's view, a run, the feed,
quarantine, an audited action and sealing webhook secrets, through the CLI's own entry."""

from __future__ import annotations

import asyncio
import json

import pytest

from herald.cli import main
from herald.config import Settings
from herald.db import AsyncConn
from herald.generations import secrets
from herald.generations.runtime import Generations
from herald.generations.sample import DATASET
from herald.ops import audit
from tests.generations.helpers import PARTITION, land, orders_file, plan, settled, worker

APP = "herald.generations.sample:app"
BAD_DAY = "2026-07-15"  # a partition whose only input is malformed


async def _herald(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, ["--app", APP, "generations", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


async def test_the_generations_commands_read_and_act_on_a_real_database(
    gens: Generations,
    conn: AsyncConn,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert settings.database_url is not None
    monkeypatch.setenv("HERALD_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("HERALD_SCHEMA", settings.schema)
    manifest = await land(gens, conn, "a.jsonl", orders_file(0, 5))
    bad = await land(gens, conn, "bad.jsonl", b"not json\n", partition=BAD_DAY)
    async with worker(gens, settings):
        run = await plan(gens, conn, [manifest.id])
        await settled(conn, run.id)
        bad_run = await plan(gens, conn, [bad.id], partitions=[BAD_DAY])
        await settled(conn, bad_run.id)

    code, out, _ = await _herald(capsys, "partition", DATASET, PARTITION)
    assert code == 0 and f"{DATASET}/{PARTITION} (owner " in out and "generation 1" in out
    code, out, _ = await _herald(capsys, "partition", DATASET, PARTITION, "--json")
    view = json.loads(out)
    assert view["current"]["generation"] == 1 and view["current"]["manifest_ids"] == [manifest.id]
    assert view["safe_actions"] == []  # a published partition needs no action

    code, out, _ = await _herald(capsys, "run", str(run.id))
    assert code == 0 and f"run {run.id} (scheduled, settled)" in out and "published" in out

    code, out, _ = await _herald(capsys, "feed")
    events = [json.loads(line) for line in out.splitlines()]
    assert [(e["type"], e["generation"], e["partition"]) for e in events] == [
        ("generation.published", 1, PARTITION)
    ]
    code, out, _ = await _herald(capsys, "feed", "--after", str(events[0]["position"]))
    assert (code, out) == (0, "")

    code, out, _ = await _herald(capsys, "quarantine", DATASET)
    assert code == 0 and "bad_record" in out and BAD_DAY in out

    # An action needs a reason; with one it is done and audited under the CLI's actor.
    with pytest.raises(SystemExit) as refused:
        await _herald(capsys, "act", DATASET, BAD_DAY, "retry")
    assert refused.value.code == 2 and "--reason" in capsys.readouterr().err
    why = ("--reason", "rebuild after a fix")
    code, out, err = await _herald(capsys, "act", DATASET, BAD_DAY, "retry", *why)
    assert (code, err) == (1, "error: retry needs a run\n")  # which task to retry
    code, out, err = await _herald(
        capsys, "act", DATASET, BAD_DAY, "retry", "--run", str(bad_run.id), *why
    )
    assert code == 0, (out, err)
    done = json.loads(out)
    assert code == 0 and done["action"] == "retry"
    entries = [e for e in await audit.entries(conn) if e.reason == "rebuild after a fix"]
    assert len(entries) == 1 and entries[0].actor.startswith("cli:")

    # A secret stored as given by an earlier release is sealed by seal-secrets.
    await conn.execute(
        "INSERT INTO gen_subscriptions (name, url, secret, datasets, created_by) "
        "VALUES ('old', 'http://127.0.0.1:9/h', %s, '{orders}', 'ops')",
        ("whsec_" + "B" * 43,),
    )
    code, out, _ = await _herald(capsys, "seal-secrets")
    assert (code, out.strip()) == (0, "1 webhook secret(s) sealed under the newest key")
    cur = await conn.execute("SELECT secret FROM gen_subscriptions WHERE name = 'old'")
    row = await cur.fetchone()
    assert row is not None and row["secret"].startswith(secrets.SEALED)
    monkeypatch.delenv("HERALD_TOKEN_KEYS")
    code, _, err = await _herald(capsys, "seal-secrets")
    assert code == 2 and "HERALD_TOKEN_KEYS" in err
