"""The CLI acts for one tenant: ``--tenant`` (default: the default tenant); ``*`` is the
platform operator's, audited. Every command is listed here, tried or said why not."""

from __future__ import annotations

import argparse
import asyncio
import secrets

import pytest

from herald.cli import _parser, main
from herald.client import open_connection
from herald.config import Settings

MARKER = "globex-secret-" + secrets.token_hex(4)
APP = ["--app", "tests.support:APP"]
# Commands tried as tenant "acme": none may show what tenant "globex" holds.
READS = {
    "jobs": ["jobs"],
    "job": ["job", "1"],
    "dead": ["dead"],
    "queues": ["queues"],
    "apikey list": ["apikey", "list"],
    "tenant list": ["tenant", "list"],
    "dataset list": ["dataset", "list"],
    "ingest runs": ["ingest", "runs"],
    "ingest providers list": ["ingest", "providers", "list"],
    "ingest quarantine": ["ingest", "quarantine"],
    "social accounts": ["social", "accounts"],
}
# The others: what they do, and where their tenancy is shown.
NOT_TRIED = {
    "migrate": "schema changes: no tenant's rows",
    "worker": "the engine: claims for the platform, runs each job as its tenant",
    "scheduler": "the engine: fires each schedule in its tenant (test_tenants)",
    "serve": "the API: the key's tenant (tests/security/test_tenant_matrix)",
    "up": "the API and the engine together",
    "demo": "a demo on the embedded database",
    "enqueue": "tried below: the job is the tenant's",
    "apikey create": "tried below: the key is the tenant's",
    "apikey revoke": "by name, within the tenant (RLS: another tenant's key is not found)",
    "tenant create": "tried below",
    "tenant quotas": "a platform operator's change, audited (test_tenants)",
    "dataset register": "a write as the tenant: the row is its own (RLS WITH CHECK)",
    "dataset publish": "a job of the tenant's own dataset",
    "dataset versions": "reads the tenant's dataset only",
    "dataset delete": "reaches the tenant's own versions only",
    "ingest providers add": "a write as the tenant",
    "ingest providers update": "the tenant's own provider only",
    "ingest fetch": "a job of the tenant's own provider",
    "ingest run": "the tenant's own run only",
    "ingest demo": "a demo",
    "social link": "a write as the tenant",
    "social post": "a job on the tenant's own account",
    "social disconnect": "the tenant's own account only",
    "social keygen": "a local key file",
    "social rotate-keys": "the deployment's sealing keys",
    "social sandbox": "a local simulator",
    "social demo": "a demo",
    "generations partition": "the tenant's own partition",
    "generations act": "the tenant's own partition",
    "generations run": "the tenant's own run",
    "generations feed": "the tenant's own feed",
    "generations quarantine": "the tenant's own quarantine",
    "generations resolve": "the tenant's own quarantine",
    "generations backfill": "the tenant's own backfill",
    "generations seal-secrets": "re-seals the tenant's webhook secrets (every tenant's with "
    "--tenant '*', audited)",
}


def _commands() -> set[str]:
    found: set[str] = set()

    def walk(parser: argparse.ArgumentParser, prefix: list[str]) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    nested = any(isinstance(a, argparse._SubParsersAction) for a in child._actions)
                    if nested:
                        walk(child, [*prefix, name])
                    else:
                        found.add(" ".join([*prefix, name]))

    walk(_parser(), [])
    return found


async def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = await asyncio.to_thread(main, argv)
    out = capsys.readouterr()
    return code, out.out + out.err


@pytest.mark.slow
async def test_every_command_acts_for_its_tenant_only(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _commands() == set(READS) | set(NOT_TRIED), "a command was added: list it here"
    assert settings.database_url is not None
    monkeypatch.setenv("HERALD_DATABASE_URL", settings.database_url)
    monkeypatch.setenv("HERALD_SCHEMA", settings.schema)
    for tenant in ("acme", "globex"):
        code, out = await _run(["tenant", "create", tenant, "--tenant", "*"], capsys)
        assert code == 0, out
    code, out = await _run(
        [
            *APP,
            "enqueue",
            "noop",
            "--payload",
            f'{{"s": "{MARKER}"}}',
            "--key",
            MARKER,
            "--tenant",
            "globex",
        ],
        capsys,
    )
    assert code == 0, out
    code, out = await _run(
        ["apikey", "create", MARKER, "--scopes", "read", "--tenant", "globex"], capsys
    )
    assert code == 0, out
    for name, argv in READS.items():
        code, out = await _run([*APP, *argv, "--tenant", "acme"], capsys)
        assert MARKER not in out, (name, out)
    code, out = await _run([*APP, "jobs", "--tenant", "globex"], capsys)
    assert code == 0 and MARKER in out
    code, out = await _run([*APP, "jobs", "--tenant", "*"], capsys)
    assert code == 0 and MARKER in out
    async with await open_connection(settings) as conn:
        cur = await conn.execute(
            "SELECT actor, reason FROM audit_log WHERE action = 'platform.cli' ORDER BY id"
        )
        entries = await cur.fetchall()
    assert [e["reason"].split(" ", 1)[1] for e in entries] == [
        "tenant create acme --tenant *",
        "tenant create globex --tenant *",
        "--app tests.support:APP jobs --tenant *",
    ]
    assert all(e["actor"].startswith("cli:") for e in entries)
