"""The worker's claim keeps one generic plan (see herald.worker): that plan must stay a
batch-sized one on a table whose statistics know it is large. A generic plan cannot
know the batch's `limit`; it once guessed a batch big enough to hash-join a sequential
scan of the whole jobs table and to JIT-compile the statement, a second per claim."""

from __future__ import annotations

import re

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


async def test_the_claims_generic_plan_reads_a_batch_not_the_table(settings: Settings) -> None:
    assert settings.database_url is not None
    info = conninfo(
        settings.database_url, settings.schema, generic_plans=True, settings=settings, engine=True
    )
    async with await connect(info) as conn:
        await conn.execute(
            "INSERT INTO jobs (kind, state, attempt) "
            "SELECT 'noop', 'waiting', 0 FROM generate_series(1, 50000)"
        )
        await conn.execute("ANALYZE jobs")
        text, names = _numbered(sql.text("claim"))
        types = ", ".join(_TYPES[n] for n in names)
        await conn.execute(f"PREPARE claim_plan ({types}) AS {text}".encode())
        values = ", ".join(_VALUES[n] for n in names)
        cur = await conn.execute(f"EXPLAIN EXECUTE claim_plan ({values})".encode())
        plan = "\n".join(row["QUERY PLAN"] for row in await cur.fetchall())
    assert "Index Scan using jobs_pkey on jobs j" in plan, plan
    assert "Seq Scan on jobs" not in plan, plan
    assert "JIT" not in plan, plan
