"""Queue samples: what each queue holds, taken periodically so depth, running and the
oldest due job's age can be drawn over time (the console's overview charts them).

The jobs table only says what is true now; a finished job's row says when it ended, so
throughput can be read back from it, but not how deep a queue was at 3 a.m. A
housekeeping duty (one process of the deployment at a time) takes a sample every
:data:`SAMPLE_EVERY` seconds, one row per pass, and drops samples older than
:data:`KEEP_S`. A pass costs one grouped scan of the waiting and running jobs, the same
as the metrics' gauges.
"""

from __future__ import annotations

from herald import sql
from herald.ops.conn import Source, connection

DUTY = "queue-samples"
SAMPLE_EVERY = 30.0
KEEP_S = 25 * 3600  # the console's widest window is 24 h


async def sample_queues(source: Source, keep_s: float = KEEP_S) -> None:
    """Record what every queue holds now, and drop samples older than ``keep_s``."""
    async with connection(source) as conn:
        await conn.execute(sql.query("ops_queue_sample"))
        await conn.execute(sql.query("ops_queue_sample_prune"), {"keep_s": keep_s})
