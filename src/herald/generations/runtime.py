"""The generations application: its job kinds and duties, installed on a Herald registry.

    app = Herald()
    gens = install(app, definitions)

Kinds: ``generations.build`` (live runs: scheduled and repairs, queue ``generations``),
``generations.backfill`` (declared backfills, queue ``generations.backfill``, throttled
and with a concurrency share of their own) and ``generations.deliver`` (webhook
deliveries of the outbox, queue ``generations.deliver``). The engine core knows nothing
of this package.
"""

from __future__ import annotations

from typing import Any

from herald.backoff import Backoff
from herald.config import Settings
from herald.context import JobContext
from herald.generations import backfill, build, outbox
from herald.generations.collection import collect_once
from herald.generations.definitions import Definitions
from herald.generations.quarantine import expire
from herald.generations.shared import (
    _INSTALLED,
    BACKFILL,
    BACKFILL_QUEUE,
    BUILD,
    DELIVER,
    DELIVER_QUEUE,
    LIVE_QUEUE,
    Generations,
    installed,
)
from herald.registry import Herald


def install(app: Herald, definitions: Definitions, settings: Settings | None = None) -> Generations:
    """Register the application's kinds and duties on ``app``; returns what they share.

    On an app where :func:`publisher` already put the delivery kind (the catalog's), the
    build kinds and duties join it."""
    gens = installed(app)
    if gens is None:
        gens = Generations(app, definitions, settings)
        _register_delivery(gens)
        _INSTALLED[id(app)] = gens
    else:
        gens.definitions.extend(definitions)
        if settings is not None:
            gens.use(settings)
    _register(gens)
    return gens


def publisher(app: Herald, settings: Settings | None = None) -> Generations:
    """What an application that publishes its own outputs as generations needs (the
    catalog): the coordinator's shared state and the delivery kind of the outbox, with
    no build kinds. Returns the one already on ``app`` if there is one."""
    gens = installed(app)
    if gens is not None:
        return gens
    gens = Generations(app, Definitions(), settings)
    _register_delivery(gens)
    _INSTALLED[id(app)] = gens
    return gens


def _register_delivery(gens: Generations) -> None:
    @gens.app.task(
        DELIVER,
        queue=DELIVER_QUEUE,
        max_attempts=8,
        timeout=60,
        backoff=Backoff(base=0.5, factor=3.0, cap=600.0),
        api_scope=None,
    )
    async def deliver(ctx: JobContext, payload: dict[str, Any]) -> Any:
        return await outbox.deliver(gens, ctx, payload)


def _register(gens: Generations) -> None:
    # Live builds (schedules, repairs) are claimed before backfill tasks by a worker
    # serving both queues; backfills also hold at most their declared slots.
    @gens.app.task(
        BUILD, queue=LIVE_QUEUE, max_attempts=5, timeout=3600, priority=10, api_scope=None
    )
    async def build_live(ctx: JobContext, payload: dict[str, Any]) -> Any:
        return await build.build(gens, ctx, payload)

    @gens.app.task(BACKFILL, queue=BACKFILL_QUEUE, max_attempts=5, timeout=3600, api_scope=None)
    async def build_backfill(ctx: JobContext, payload: dict[str, Any]) -> Any:
        await backfill.throttle(gens, ctx, payload)
        return await build.build(gens, ctx, payload)

    @gens.app.duty("generations.orphan_collection", every=600.0)
    async def collect_orphans() -> None:
        await collect_once(gens)

    @gens.app.duty("generations.quarantine_expiry", every=60.0)
    async def expire_quarantine() -> None:
        await expire(gens)


__all__ = ["Generations", "install", "installed", "publisher"]
