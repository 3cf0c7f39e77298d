"""Readers polling a partition during 100 publications never see a mix of generations:
every read is one whole generation, exactly the rows of that generation's inputs."""

from __future__ import annotations

import asyncio

import pytest

from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo
from herald.generations import readers
from herald.generations.errors import NotFound
from herald.generations.runtime import Generations
from tests.generations.helpers import PARTITION, land, orders_file, plan, settled, worker

pytestmark = pytest.mark.slow
PUBLICATIONS = 100


@pytest.mark.timeout(600)  # 100 builds one after the other, on a loaded host
async def test_readers_see_whole_generations_only(
    gens: Generations, conn: AsyncConn, settings: Settings
) -> None:
    # Manifest k holds orders 10k .. 10k+9; generation g reads manifests 0 .. g-1 (a file
    # lands, then a repair publishes it).
    manifests: list[int] = []
    expected: dict[int, set[str]] = {}
    stop = asyncio.Event()
    seen: list[int] = []

    async def reader() -> None:
        assert settings.database_url is not None
        async with await connect(conninfo(settings.database_url, settings.schema)) as own:
            last = 0
            while not stop.is_set():
                await asyncio.sleep(0.005)
                try:
                    current = await readers.read_current(gens, own, "orders", PARTITION)
                except NotFound:
                    continue
                ids = {r["order_id"] for r in current.rows}
                want = set().union(*(expected[m] for m in current.inputs))
                assert ids == want, f"generation {current.generation} is not whole"
                assert len(current.inputs) == current.generation
                assert current.generation >= last  # never back in time
                last = current.generation
                seen.append(current.generation)

    tasks = [asyncio.create_task(reader()) for _ in range(3)]
    async with worker(gens, settings):
        for k in range(PUBLICATIONS):
            landed = await land(gens, conn, f"part-{k:03d}.jsonl", orders_file(10 * k, 10))
            expected[landed.id] = {f"o{10 * k + n:05d}" for n in range(10)}
            manifests.append(landed.id)
            run = await plan(gens, conn, manifests, purpose="repair", policy="rebase")
            await settled(conn, run.id)
    stop.set()
    await asyncio.gather(*tasks)
    assert max(seen) == PUBLICATIONS
    assert len(set(seen)) > PUBLICATIONS // 2  # the readers really ran alongside
