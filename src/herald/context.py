"""What a handler receives: the job's identity, its progress, and its lease."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from psycopg.rows import dict_row

from herald import sql
from herald.encoding import dump_result
from herald.errors import LeaseLost

if TYPE_CHECKING:
    from herald.db import AsyncConn
    from herald.worker import Worker


class JobContext:
    """Per-attempt context. Every write it makes is fenced by (job id, fence)."""

    def __init__(self, worker: Worker, row: dict[str, Any]) -> None:
        self._worker = worker
        self.job_id: int = row["id"]
        self.kind: str = row["kind"]
        self.queue: str = row["queue"]
        self.key: str | None = row["key"]
        self.version: int = row["version"]
        self.attempt: int = row["attempt"]
        self.max_attempts: int = row["max_attempts"]
        self.fence: int = row["fence"]
        self.step: str | None = row["step"]
        self.checkpoint: dict[str, Any] = dict(row["checkpoint"] or {})
        self.loop = asyncio.get_running_loop()
        self.executor: Executor | None = worker.executor
        # Set when the lease is known lost; the handler's result will be discarded.
        self.lost = asyncio.Event()
        self.completed_in_transaction = False
        self.finishing = False  # its transactional completion is being committed

    @property
    def lease_lost(self) -> bool:
        return self.lost.is_set()

    @property
    def worker_id(self) -> str:
        return self._worker.owner

    def _check(self) -> None:
        if self.lost.is_set():
            raise LeaseLost(f"job {self.job_id} lease lost (fence {self.fence})")

    async def heartbeat(self) -> None:
        """Extend the lease now (the worker also does so on its own every lease/3)."""
        self._check()
        if not await self._worker.extend_lease(self.job_id, self.fence):
            self.lost.set()
            self._check()

    async def save_checkpoint(self, update: dict[str, Any], step: str | None = None) -> None:
        """Merge ``update`` into the checkpoint and save it, fenced."""
        self._check()
        merged = {**self.checkpoint, **update}
        target_step = step if step is not None else self.step
        saved = await self._worker.save_checkpoint(self.job_id, self.fence, target_step, merged)
        if not saved:
            self.lost.set()
            self._check()
        self.checkpoint = merged
        self.step = target_step

    @asynccontextmanager
    async def transaction(self, result: Any = None) -> AsyncIterator[AsyncConn]:
        """A transaction that commits together with this job's success, or not at all.

        Writes made on the yielded connection and the job's fenced completion commit
        as one: if the lease was lost meanwhile, everything rolls back and
        :class:`LeaseLost` is raised, so the effect is recorded exactly once.
        """
        self._check()
        worker = self._worker
        try:
            async with worker.pool.connection() as conn:
                try:
                    async with conn.transaction():
                        yield conn
                        # Leave the heartbeat's set first: a heartbeat meeting our
                        # uncommitted completion would take the job for lost. The lock
                        # waits out a heartbeat in flight; it is not held to the commit,
                        # so the worker's transactions commit concurrently.
                        async with worker.lease_lock:
                            self.finishing = True
                        cur = conn.cursor(row_factory=dict_row)
                        await cur.execute(
                            sql.query("finish"),
                            {
                                "ids": [self.job_id],
                                "fences": [self.fence],
                                "outcomes": ["succeeded"],
                                "delays": [None],
                                "errors": [None],
                                "results": [dump_result(result)],
                                "owner": worker.owner,
                            },
                        )
                        if await cur.fetchone() is None:
                            raise _FenceRefused
                    # Committed: from now on the worker must not heartbeat this job.
                    self.completed_in_transaction = True
                finally:
                    self.finishing = False
        except _FenceRefused:
            # The refusal was rolled back with the effect: count it on its own.
            self.lost.set()
            await self._worker.record_stale_write(self.job_id, self.fence, "transaction")
            raise LeaseLost(
                f"job {self.job_id} lost its lease before its transaction committed"
            ) from None


class _FenceRefused(Exception):
    """Internal: roll the handler's transaction back, its completion was refused."""
