"""What the generations application's handlers share: definitions, store, admission.

Kept apart from :mod:`herald.generations.runtime` (which registers the kinds and imports
every handler module) so that those modules can name it without an import cycle.
"""

from __future__ import annotations

from collections.abc import Callable

from psycopg_pool import AsyncConnectionPool

from herald.client import Client
from herald.config import Settings
from herald.context import JobContext
from herald.db import AsyncConn, conninfo, database_url
from herald.generations.definitions import Definitions
from herald.generations.rows import Candidate
from herald.generations.store import Store, root
from herald.registry import Herald

BUILD = "generations.build"
BACKFILL = "generations.backfill"
DELIVER = "generations.deliver"
LIVE_QUEUE = "generations"
BACKFILL_QUEUE = "generations.backfill"
DELIVER_QUEUE = "generations.deliver"


_INSTALLED: dict[int, Generations] = {}

# Checks a candidate's stored output before publication; the failures found (none: it
# passes). A dataset whose output is not one JSON lines file (the catalog's exports)
# declares its own.
Verifier = Callable[[Candidate], list[str]]


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
        self.verifiers: dict[str, Verifier] = {}

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
        return ctx.pool

    def build_kind(self, purpose: str) -> str:
        return BACKFILL if purpose == "backfill" else BUILD

    @property
    def deliver_kind(self) -> str:
        return DELIVER
