"""Collecting orphaned attempt output: bytes an attempt wrote but never registered.

An orphan stays for ``retention`` seconds (for forensics: the operator view lists it),
then is deleted - but only once its attempt can never register it: no candidate names
the location and the job is not running under that attempt's fence. Fences only grow,
so that answer cannot change after it is given.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING

from herald import tenancy
from herald.db import AsyncConn
from herald.rows import all_rows

if TYPE_CHECKING:
    from herald.generations.shared import Generations

_ATTEMPT = re.compile(r"job-(\d+)-fence-(\d+)\.jsonl$")
DEFAULT_RETENTION = 7 * 86400.0


async def collect(
    gen: Generations, conn: AsyncConn, *, retention: float = DEFAULT_RETENTION
) -> list[str]:
    """Delete orphans older than ``retention`` seconds; returns their locations."""
    cutoff = time.time() - retention
    found: list[tuple[str, int, int]] = []
    for location in gen.store.all_attempt_outputs():
        match = _ATTEMPT.search(location)
        path = gen.store.path(location)
        if match is None or path.stat().st_mtime > cutoff:
            continue
        found.append((location, int(match.group(1)), int(match.group(2))))
    if not found:
        return []
    orphans = await all_rows(
        conn,
        "generations_orphans",
        {
            "locations": [f[0] for f in found],
            "jobs": [f[1] for f in found],
            "fences": [f[2] for f in found],
        },
    )
    collected = []
    for row in orphans:
        gen.store.path(row["location"]).unlink(missing_ok=True)
        collected.append(row["location"])
    return collected


async def collect_once(gen: Generations) -> list[str]:
    """The housekeeping duty: one pass on a connection of its own, for the platform.

    The store holds every tenant's attempt output, so whether a file is an orphan is
    answered from every tenant's candidates and jobs: read by one tenant's rows alone,
    another tenant's registered output would look orphaned."""
    from herald.db import connect, conninfo, database_url

    conn = await connect(conninfo(database_url(gen.settings), gen.settings.schema))
    async with conn:
        with tenancy.platform():
            await tenancy.tell(conn)
            return await collect(gen, conn)
