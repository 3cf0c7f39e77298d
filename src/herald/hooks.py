"""What the core offers the layers above it to plug into, so it never imports them.

* An **admission gate** runs in the worker before a kind's handler, on each attempt; it
  may raise :class:`herald.Snooze` to put the job back without charging an attempt
  (rate and concurrency limits are gates, see :func:`herald.ops.limits.declare`). Gates
  are registered per kind with :meth:`herald.Herald.gate`.
* A **maintenance hook** prunes state of its own beside the pruner's pass, in every
  worker (so it must be safe to run concurrently: SKIP LOCKED, small batches). Hooks
  are found through the ``herald.maintenance`` entry-point group (a package declares
  ``name = "module:HOOK"``), or registered on an application with
  :meth:`herald.Herald.maintenance_hook`.
* A **housekeeping duty** (:meth:`herald.Herald.duty`) runs in one process at a time.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from psycopg_pool import AsyncConnectionPool

from herald.config import Settings
from herald.db import AsyncConn

if TYPE_CHECKING:
    from herald.context import JobContext

MAINTENANCE_ENTRY_POINTS = "herald.maintenance"

Pool = AsyncConnectionPool[AsyncConn]
# gate(pool, ctx, payload): return to let the handler run, raise Snooze to wait.
Gate = Callable[[Pool, "JobContext", dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class Pruned:
    """What one batch of a maintenance hook deleted, and whether more may be left."""

    deleted: int
    more: bool


@dataclass(frozen=True)
class MaintenanceHook:
    """``prune_once(pool, settings)`` deletes one bounded batch of its state."""

    name: str
    prune_once: Callable[[Pool, Settings], Awaitable[Pruned]]


@cache
def discovered_maintenance_hooks() -> tuple[MaintenanceHook, ...]:
    """The hooks installed packages declare in the ``herald.maintenance`` group."""
    found = []
    for point in sorted(importlib.metadata.entry_points(group=MAINTENANCE_ENTRY_POINTS)):
        hook = point.load()
        if not isinstance(hook, MaintenanceHook):
            raise TypeError(f"entry point {point.name!r} is not a MaintenanceHook: {hook!r}")
        found.append(hook)
    return tuple(found)
