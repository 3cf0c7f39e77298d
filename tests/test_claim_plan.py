"""The worker's claim keeps one generic plan (see herald.worker): that plan must stay a
batch-sized one on a table whose statistics know it is large. A generic plan cannot
know the batch's `limit`; it once guessed a batch big enough to hash-join a sequential
scan of the whole jobs table and to JIT-compile the statement, a second per claim."""

from __future__ import annotations

import re
from typing import Any

from herald import Settings, sql
from herald.db import connect, conninfo

_PARAMETER = re.compile(r"%\((\w+)\)s")
_TYPES = {
    "queues": "text[]",
    "kinds": "text[]",
    "limit": "int",
    "owner": "text",
    "lease_s": "float8",
    "suspects": "int",
}
_VALUES = {
    "queues": "'{default}'",
    "kinds": "'{noop}'",
    "limit": "16",
    "owner": "'planner'",
    "lease_s": "30",
    "suspects": "1",
}


def _numbered(text: str) -> tuple[str, list[str]]:
    """The statement with numbered parameters ($1...), and their names in that order."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return _PARAMETER.sub(number, text), names


async def _explain_claim(settings: Settings, *, analyze: bool, explain: str) -> list[Any]:
    """``EXPLAIN (explain) EXECUTE`` of the claim's generic plan on 50,000 waiting jobs
    (the table analyzed first or not), on the worker's kind of connection."""
    assert settings.database_url is not None
    info = conninfo(
        settings.database_url, settings.schema, generic_plans=True, settings=settings, engine=True
    )
    async with await connect(info) as conn:
        await conn.execute(
            "INSERT INTO jobs (kind, state, attempt) "
            "SELECT 'noop', 'waiting', 0 FROM generate_series(1, 50000)"
        )
        if analyze:
            await conn.execute("ANALYZE jobs")
        text, names = _numbered(sql.text("claim"))
        types = ", ".join(_TYPES[n] for n in names)
        await conn.execute(f"PREPARE claim_plan ({types}) AS {text}".encode())
        values = ", ".join(_VALUES[n] for n in names)
        cur = await conn.execute(f"EXPLAIN {explain} EXECUTE claim_plan ({values})".encode())
        return [row["QUERY PLAN"] for row in await cur.fetchall()]


async def test_the_claims_generic_plan_reads_a_batch_not_the_table(settings: Settings) -> None:
    plan = "\n".join(await _explain_claim(settings, analyze=True, explain=""))
    assert "Index Scan using jobs_pkey on jobs j" in plan, plan
    assert "Seq Scan on jobs" not in plan, plan
    assert "JIT" not in plan, plan


def _scans_of(node: dict[str, Any], alias: str) -> list[dict[str, Any]]:
    """The plan nodes under ``node`` that scan the relation named ``alias``."""
    found = [node] if node.get("Alias") == alias else []
    for child in node.get("Plans", []):
        found += _scans_of(child, alias)
    return found


async def test_a_claim_on_a_table_without_statistics_reads_its_batch_only(
    settings: Settings,
) -> None:
    """Before the jobs table is first analyzed (a new deployment, autovacuum off), the
    generic plan guesses every index tiny: it once took the tenant's active-jobs index,
    then read and sorted the tenant's whole backlog for every claim. The candidates must
    come from the claim index, in claim order, one batch of them."""
    rows = await _explain_claim(settings, analyze=False, explain="(ANALYZE, FORMAT JSON)")
    plan = rows[0][0]["Plan"]
    scans = _scans_of(plan, "jobs")  # the candidates (the update's own scan is `j`)
    assert scans, plan
    for scan in scans:
        assert scan.get("Index Name") == "jobs_claim", scan
        assert scan["Actual Rows"] <= 16, scan
