"""The generations application: its job kinds and duties, installed on a Herald registry.

    app = Herald()
    gens = Generations.install(app, definitions)

Kinds: ``generations.build`` (live runs: scheduled and repairs, queue ``generations``),
``generations.backfill`` (declared backfills, queue ``generations.backfill``, throttled
and with a concurrency share of their own) and ``generations.deliver`` (webhook
deliveries of the outbox, queue ``generations.deliver``). The engine core knows nothing
of this package.
"""

from __future__ import annotations

from typing import Any

from psycopg_pool import AsyncConnectionPool

from herald.client import Client
from herald.config import Settings
from herald.context import JobContext
from herald.db import AsyncConn, conninfo, database_url
from herald.generations.definitions import Definitions
from herald.generations.store import Store, root
from herald.registry import Herald

BUILD = "generations.build"
BACKFILL = "generations.backfill"
DELIVER = "generations.deliver"
LIVE_QUEUE = "generations"
BACKFILL_QUEUE = "generations.backfill"
DELIVER_QUEUE = "generations.deliver"


_INSTALLED: dict[int, Generations] = {}


def installed(app: Herald) -> Generations | None:
    """The generations application installed on ``app``, if any (for adapters)."""
    return _INSTALLED.get(id(app))


class Generations:
    """What the handlers of the application share: definitions, store, admission."""

    def __init__(
        self, app: Herald, definitions: Definitions, settings: Settings | None = None
    ) -> None:
        self.app = app
        self.definitions = definitions
        self._settings = settings
        self._store: Store | None = None
        self._admitter: Client | None = None

    @classmethod
    def install(
        cls, app: Herald, definitions: Definitions, settings: Settings | None = None
    ) -> Generations:
        gens = cls(app, definitions, settings)
        gens._register()
        _INSTALLED[id(app)] = gens
        return gens

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = Settings.from_env()
        return self._settings

    def use(self, settings: Settings) -> None:
        """Point the application at other settings (a test's schema, say)."""
        self._settings, self._store, self._admitter = settings, None, None

    @property
    def store(self) -> Store:
        if self._store is None:
            self._store = Store(root(self.settings))
        return self._store

    @property
    def admitter(self) -> Client:
        """Admission only, always on a caller's connection (its pool is never opened)."""
        if self._admitter is None:
            info = conninfo(database_url(self.settings), self.settings.schema)
            self._admitter = Client(self.app, self.settings, info)
        return self._admitter

    @staticmethod
    def pool(ctx: JobContext) -> AsyncConnectionPool[AsyncConn]:
        return ctx._worker.pool

    def build_kind(self, purpose: str) -> str:
        return BACKFILL if purpose == "backfill" else BUILD

    @property
    def deliver_kind(self) -> str:
        return DELIVER

    def _register(self) -> None:
        from herald.backoff import Backoff
        from herald.generations import backfill, build, outbox

        # Live builds (schedules, repairs) are claimed before backfill tasks by a worker
        # serving both queues; backfills also hold at most their declared slots.
        @self.app.task(
            BUILD, queue=LIVE_QUEUE, max_attempts=5, timeout=3600, priority=10, api_scope=None
        )
        async def build_live(ctx: JobContext, payload: dict[str, Any]) -> Any:
            return await build.build(self, ctx, payload)

        @self.app.task(BACKFILL, queue=BACKFILL_QUEUE, max_attempts=5, timeout=3600, api_scope=None)
        async def build_backfill(ctx: JobContext, payload: dict[str, Any]) -> Any:
            await backfill.throttle(self, ctx, payload)
            return await build.build(self, ctx, payload)

        @self.app.task(
            DELIVER,
            queue=DELIVER_QUEUE,
            max_attempts=8,
            timeout=60,
            backoff=Backoff(base=0.5, factor=3.0, cap=600.0),
            api_scope=None,
        )
        async def deliver(ctx: JobContext, payload: dict[str, Any]) -> Any:
            return await outbox.deliver(self, ctx, payload)

        @self.app.duty("generations.orphan_collection", every=600.0)
        async def collect_orphans() -> None:
            from herald.generations.collection import collect_once

            await collect_once(self)

        @self.app.duty("generations.quarantine_expiry", every=60.0)
        async def expire_quarantine() -> None:
            from herald.generations.quarantine import expire

            await expire(self)
