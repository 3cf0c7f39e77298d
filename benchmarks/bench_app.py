"""The application the benchmark's worker processes run (``benchmarks.bench_app:app``).

``bench.noop`` does nothing, so a drain measures the engine alone. ``bench.stamp``
returns the moment its handler started on the host's monotonic clock (system-wide on
Linux), which the benchmark compares with the moment just before it enqueued the job.
"""

from __future__ import annotations

import time
from typing import Any

from herald.context import JobContext
from herald.registry import Herald

app = Herald()


@app.task("bench.noop", queue="bench")
async def noop(ctx: JobContext, payload: dict[str, Any]) -> None:
    return None


@app.task("bench.stamp", queue="bench_latency")
async def stamp(ctx: JobContext, payload: dict[str, Any]) -> dict[str, float]:
    return {"started": time.monotonic()}
