"""finish.sql's parameters travel as array literals built by herald.outcomes: whatever a
result or an error holds must reach the database exactly as encoded."""

from __future__ import annotations

import json
from typing import Any

from herald import Client
from herald.encoding import dump_result
from herald.outcomes import Outcome, encode_error, finish_params

# Texts that an array literal must quote: quotes, backslashes, braces, commas, the word
# NULL, blanks, non-ASCII, an escaped NUL made storable.
AWKWARD: list[Any] = [
    'a "quoted" word',
    "back\\slash \\\\ and \\u0041",
    "{braces}, commas",
    "NULL",
    "null",
    "",
    "  spaced  ",
    "naïve, 日本",
    "nul \x00 inside",
    {"nested": ['"', "\\", None, 1.5]},
]


async def test_outcome_columns_reach_the_database_unchanged(client: Client) -> None:
    results = [dump_result(value) for value in AWKWARD]
    errors = [encode_error("exception", ValueError(str(value))) for value in AWKWARD]
    batch = [
        Outcome(1000 + i, i, "retry", delay=0.25 * i, error=error, result=result)
        for i, (result, error) in enumerate(zip(results, errors, strict=True))
    ]
    batch.append(Outcome(2, 7, "succeeded"))  # all-NULL columns but one
    params = finish_params(batch, "w1")
    async with client.pool.connection() as conn:
        cur = await conn.execute(
            b"SELECT %(ids)s::bigint[] AS ids, %(fences)s::bigint[] AS fences,"
            b" %(outcomes)s::text[] AS outcomes, %(delays)s::float8[] AS delays,"
            b" %(errors)s::jsonb[] AS errors, %(results)s::jsonb[] AS results",
            params,
        )
        row = await cur.fetchone()
    assert row is not None
    assert row["ids"] == [o.job_id for o in batch]
    assert row["fences"] == [o.fence for o in batch]
    assert row["outcomes"] == [o.outcome for o in batch]
    assert row["delays"] == [o.delay for o in batch]
    assert row["errors"] == [None if o.error is None else json.loads(o.error) for o in batch]
    assert row["results"] == [None if o.result is None else json.loads(o.result) for o in batch]
    assert row["results"][0] == AWKWARD[0]
    assert row["results"][8] == "nul \ufffd inside"  # made storable, not refused
