"""What a handler receives: the job's identity, its progress, and its lease."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import Executor
from contextlib import asynccontextmanager
from typing import Any

from psycopg_pool import AsyncConnectionPool

from herald import tenancy
from herald.db import AsyncConn
from herald.lease import HeldJob, Lease


class JobContext:
    """Per-attempt context. Every write it makes is fenced by (job id, fence).

    It holds the attempt's lease (:class:`herald.lease.Lease`) and the handlers'
    connection pool, never the worker.
    """

    # One is made for every attempt: slots make that (and each attribute read) cheaper.
    __slots__ = (
        "__weakref__",  # applications key per-attempt state by the context
        "_held",
        "_lease",
        "attempt",
        "checkpoint",
        "checkpoint_skipped",
        "executor",
        "fence",
        "job_id",
        "key",
        "kind",
        "loop",
        "max_attempts",
        "queue",
        "step",
        "tenant",
        "timed_out",
        "version",
    )

    def __init__(
        self,
        lease: Lease,
        held: HeldJob,
        row: dict[str, Any],
        executor: Executor | None = None,
    ) -> None:
        self._lease = lease
        self._held = held
        self.job_id: int = row["id"]
        # The tenant the job belongs to: its handler and every write it makes act for it.
        self.tenant: str = row.get("tenant_id") or tenancy.DEFAULT
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
        self.executor: Executor | None = executor
        # Set by a pipeline step whose progress need not be durable (see skip_checkpoint).
        self.checkpoint_skipped = False
        # Set when the attempt's timeout cancelled it (herald.attempt.Deadlines).
        self.timed_out = False

    @property
    def pool(self) -> AsyncConnectionPool[AsyncConn]:
        """The worker's pool for handlers' own statements (not the lease protocol's)."""
        return self._lease.pool

    @property
    def lost(self) -> asyncio.Event:
        """Set when the lease is known lost (or unconfirmed): the result will be discarded."""
        return self._held.lost

    @property
    def lease_lost(self) -> bool:
        return self._held.is_lost

    @property
    def completed_in_transaction(self) -> bool:
        return self._held.completed

    def time_out(self) -> None:
        """The attempt's timeout passed: cancel its handler (called by the worker)."""
        if self.timed_out:
            return
        self.timed_out = True
        task = self._held.task
        if task is not None and not task.done():
            task.cancel()

    @property
    def worker_id(self) -> str:
        return self._lease.owner

    def ensure_lease(self) -> None:
        """Call right before an external effect: raises :class:`~herald.errors.LeaseLost`
        unless this attempt's lease was confirmed within R_self (no database round trip).
        """
        self._lease.vouch(self._held)

    async def heartbeat(self) -> None:
        """Extend the lease now (the worker also does so on its own every heartbeat)."""
        await self._lease.extend(self._held)

    async def save_checkpoint(self, update: dict[str, Any], step: str | None = None) -> None:
        """Merge ``update`` into the checkpoint and save it, fenced."""
        merged = {**self.checkpoint, **update}
        target_step = step if step is not None else self.step
        await self._lease.save_checkpoint(self._held, target_step, merged)
        self.checkpoint = merged
        self.step = target_step

    def skip_checkpoint(self) -> None:
        """The running pipeline step's progress need not be saved before the next step:
        running the step again on a retry is cheap and safe (it did nothing outside, or
        only what it repeats idempotently). Its result still reaches the next steps in
        memory and is part of the next checkpoint saved; one commit fewer."""
        self.checkpoint_skipped = True

    @asynccontextmanager
    async def transaction(self, result: Any = None) -> AsyncIterator[AsyncConn]:
        """A transaction that commits together with this job's success, or not at all.

        Writes made on the yielded connection and the job's fenced completion commit
        as one: if the lease was lost meanwhile, everything rolls back and
        :class:`~herald.errors.LeaseLost` is raised, so the effect is recorded exactly once.
        """
        async with self._lease.transaction(self._held, result) as conn:
            yield conn
