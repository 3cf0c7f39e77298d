"""What the catalog jobs of one application share in a process: stores, database, observers.

The embedded Oxigraph store can be opened by one process only (its RocksDB lock), so
every user in this process (workers, cleanup runner, API) shares one instance per
location; worker processes apart from the API need the SPARQL endpoint backend.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from herald import tenancy
from herald.catalog.publishing import CatalogSettings
from herald.catalog.source_access import SourceAccess
from herald.catalog.store import LocalExportStore
from herald.catalog.triplestore import OxigraphStore, TripleStore
from herald.config import Settings
from herald.db import AsyncConn, connect, conninfo, database_url
from herald.generations.shared import Generations
from herald.registry import Herald


@dataclass(frozen=True)
class ProgressEvent:
    """Progress of one step of one publication (``total`` None when unknown)."""

    dataset_id: str
    version: int
    step: str
    done: int
    total: int | None
    finished: bool = False


ProgressObserver = Callable[[ProgressEvent], None]

# The embedded store may be opened by one process only: every user in this process
# (workers, cleanup, API) shares one instance per location.
_EMBEDDED: dict[Path, OxigraphStore] = {}
_EMBEDDED_LOCK = threading.Lock()


def shared_triple_store(settings: Settings, catalog: CatalogSettings) -> TripleStore:
    """The configured triple store: the SPARQL endpoint, or this process's embedded one."""
    if catalog.sparql_query_url and catalog.sparql_update_url:
        return catalog.open_triple_store(settings)
    path = (settings.data_dir / "triplestore").resolve()
    with _EMBEDDED_LOCK:
        store = _EMBEDDED.get(path)
        if store is None:
            store = _EMBEDDED[path] = OxigraphStore(path)
        return store


def close_embedded_store(settings: Settings) -> None:
    """Flush and forget this process's embedded store under ``settings.data_dir``."""
    path = (settings.data_dir / "triplestore").resolve()
    with _EMBEDDED_LOCK:
        store = _EMBEDDED.pop(path, None)
    if store is not None:
        store.close()


@dataclass
class CatalogRuntime:
    """What the catalog jobs of one application use: stores, database, observers."""

    settings: Settings
    catalog: CatalogSettings
    observers: list[ProgressObserver] = field(default_factory=list)
    generations: Generations | None = None  # the publisher of versions as generations
    _conninfo: str | None = None
    _triple_store: TripleStore | None = None

    @property
    def export_store(self) -> LocalExportStore:
        return LocalExportStore.for_settings(self.settings)

    @property
    def triple_store(self) -> TripleStore:
        if self._triple_store is None:
            self._triple_store = shared_triple_store(self.settings, self.catalog)
        return self._triple_store

    @property
    def source_access(self) -> SourceAccess:
        """Where this application's sources may read (HERALD_SOURCE_*)."""
        return SourceAccess.for_settings(self.settings, herald_conninfo=self.conninfo)

    @property
    def conninfo(self) -> str:
        if self._conninfo is None:
            url = database_url(self.settings)
            self._conninfo = conninfo(url, self.settings.schema, "herald-catalog")
        return self._conninfo

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[AsyncConn]:
        conn = await connect(self.conninfo)
        try:
            await tenancy.tell(conn)  # the current tenant, under the runtime role: RLS applies
            yield conn
        finally:
            await conn.close()

    def notify(self, event: ProgressEvent) -> None:
        for observe in list(self.observers):
            observe(event)


_RUNTIMES: weakref.WeakKeyDictionary[Herald, CatalogRuntime] = weakref.WeakKeyDictionary()


def catalog_runtime(app: Herald) -> CatalogRuntime:
    """The runtime :func:`register_catalog` attached to ``app``."""
    try:
        return _RUNTIMES[app]
    except KeyError:
        raise LookupError("the catalog kinds are not registered on this application") from None


def attach_runtime(app: Herald, runtime: CatalogRuntime) -> None:
    if app in _RUNTIMES:
        raise ValueError("the catalog kinds are already registered on this application")
    _RUNTIMES[app] = runtime
