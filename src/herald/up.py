"""``herald serve``, ``herald up`` and ``herald apikey``.

* ``serve`` runs the HTTP API alone (uvicorn), for scaling the API out; the operator
  console is mounted on it under ``/ui`` (:mod:`herald.console`);
* ``up`` runs everything in one process: the API, a worker, the scheduler and the
  housekeeping duties (:mod:`herald.ops.housekeeping`), after applying pending migrations. With
  no ``HERALD_DATABASE_URL`` it boots the embedded PostgreSQL. SIGTERM/SIGINT stop the
  API, let running jobs drain, and end the other loops; a second signal stops at once;
* ``apikey create NAME --scopes submit,read`` prints a new bearer token, once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import ipaddress
import logging
import socket
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from herald import loop, tenancy
from herald.config import ConfigError, Settings
from herald.periodic import stop_on_signals

if TYPE_CHECKING:
    import uvicorn

    from herald.api import ApiSettings
    from herald.registry import Herald

# The API stack (FastAPI, uvicorn) is imported when one of these commands runs, so the
# CLI's other commands start as fast as before.

log = logging.getLogger(__name__)

COMMANDS = ("apikey", "serve", "up")


def add_commands(sub: Any) -> None:
    """Add ``apikey``, ``serve`` and ``up`` to the CLI's subcommands."""
    apikey = sub.add_parser("apikey", help="manage API keys (bearer tokens, stored hashed)")
    keys = apikey.add_subparsers(dest="apikey_command", required=True)
    create = keys.add_parser("create", help="create a key; its token is printed once")
    create.add_argument("name")
    create.add_argument(
        "--scopes",
        required=True,
        help="comma-separated: submit, read, operate, admin; platform: act for any tenant",
    )
    create.add_argument(
        "--max-active-jobs",
        type=int,
        default=None,
        help="quota: at most this many of the key's jobs waiting or running (default none)",
    )
    keys.add_parser("list", help="list keys (never their tokens)")
    revoke = keys.add_parser("revoke", help="revoke the live key of that name")
    revoke.add_argument("name")

    serve = sub.add_parser("serve", help="run the HTTP API")
    _http_options(serve)
    serve.add_argument(
        "--reuse-port",
        action="store_true",
        help="share --port with other `serve` processes started with it (the kernel spreads "
        "connections between them: one process per core; Linux SO_REUSEPORT)",
    )
    up = sub.add_parser(
        "up", help="API, worker, scheduler and housekeeping (migrating first) in one process"
    )
    _http_options(up)
    up.add_argument("--concurrency", type=int, default=10, help="jobs run at once")
    up.add_argument("--queues", default=None, help="comma-separated (default: all the app's)")
    up.add_argument(
        "--scheduler-interval", type=float, default=5.0, help="seconds between scheduler ticks"
    )
    up.add_argument("--no-scheduler", action="store_true", help="do not fire schedules here")


def _http_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address the API listens on")
    parser.add_argument("--port", type=int, default=8000, help="port the API listens on")
    parser.add_argument(
        "--insecure-no-auth",
        action="store_true",
        help="serve without API keys: every caller may submit, read and operate, never admin "
        "(local demo only; refused on a non-loopback --host unless HERALD_API_AUTH_FORCE=on)",
    )


def main(args: argparse.Namespace, settings: Settings, load_app: Callable[[], Herald]) -> int:
    """Run one of :data:`COMMANDS` (the CLI has parsed its arguments)."""
    if args.command == "apikey":
        return loop.run(_apikey(args, settings), settings.event_loop)
    from herald.api import ApiSettings

    try:
        api = ApiSettings.from_env()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.insecure_no_auth:
        api = dataclasses.replace(api, auth=False)
    if not api.auth and not api.auth_forced and not is_loopback(args.host):
        print(
            f"error: authentication is off and --host {args.host} is not a loopback address: "
            "anyone who reaches it could act without a key. Bind 127.0.0.1, turn "
            "authentication on, or set HERALD_API_AUTH_FORCE=on if you really mean it",
            file=sys.stderr,
        )
        return 2
    app = load_app()
    if args.command == "serve":
        return loop.run(
            serve(app, settings, api, host=args.host, port=args.port, reuse_port=args.reuse_port),
            settings.event_loop,
        )
    if args.concurrency < 1 or args.scheduler_interval <= 0:
        print(
            "error: --concurrency must be at least 1, --scheduler-interval positive",
            file=sys.stderr,
        )
        return 2
    queues = [q for q in (args.queues or "").split(",") if q] or None
    return loop.run(
        up(
            app,
            settings,
            api,
            host=args.host,
            port=args.port,
            concurrency=args.concurrency,
            queues=queues,
            scheduler_interval=None if args.no_scheduler else args.scheduler_interval,
        ),
        settings.event_loop,
    )


def is_loopback(host: str) -> bool:
    """True for a bind address only this machine can reach (127.0.0.0/8, ::1, localhost)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


# --- API keys ----------------------------------------------------------------------------


async def _apikey(args: argparse.Namespace, settings: Settings) -> int:
    import psycopg

    from herald.api import create_key, list_keys, revoke_key
    from herald.client import open_connection

    try:
        async with await open_connection(settings) as conn:
            await tenancy.tell(conn)  # the key is the tenant's (--tenant)
            if args.apikey_command == "create":
                key = await create_key(
                    conn, args.name, args.scopes.split(","), args.max_active_jobs
                )
                print(
                    f"created API key {key.name!r} with scopes {','.join(key.scopes)}; "
                    "its token is shown once, store it now:",
                    file=sys.stderr,
                )
                print(key.token)
            elif args.apikey_command == "list":
                for row in await list_keys(conn):
                    status = "revoked" if row["revoked_at"] else "live"
                    quota = row["max_active_jobs"] or "-"
                    scopes = ",".join(row["scopes"])
                    print(
                        f"{row['id']}\t{row['tenant_id']}\t{row['name']}\t{scopes}\t"
                        f"quota={quota}\t{status}"
                    )
            elif not await revoke_key(conn, args.name):
                print(f"error: no live API key named {args.name!r}", file=sys.stderr)
                return 1
            else:
                print(f"revoked API key {args.name!r}")
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except psycopg.errors.UniqueViolation:
        print(f"error: a live API key named {args.name!r} exists already", file=sys.stderr)
        return 1
    except psycopg.errors.UndefinedTable:
        print("error: the schema is not migrated; run `herald migrate` first", file=sys.stderr)
        return 1
    return 0


# --- processes ---------------------------------------------------------------------------


def _server(
    api_app: Any, host: str, port: int, own_signals: bool, grace: float = 30.0
) -> uvicorn.Server:
    import uvicorn

    class HostedServer(uvicorn.Server):
        """Leaves signals to its host (``up`` stops several loops on one signal)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            yield

    # After the grace period, requests still running are cancelled: a slow request (a
    # SPARQL query, a download) can never hold the shutdown up.
    config = uvicorn.Config(
        api_app,
        host=host,
        port=port,
        log_config=None,
        lifespan="on",
        timeout_graceful_shutdown=max(1, int(grace)),
    )
    return uvicorn.Server(config) if own_signals else HostedServer(config)


async def _serve_checked(
    server: uvicorn.Server, sockets: list[socket.socket] | None = None
) -> None:
    try:
        await server.serve(sockets)
    except SystemExit:  # uvicorn exits when it cannot bind or start
        raise RuntimeError("the HTTP API could not start (see the log above)") from None
    if not server.started:
        raise RuntimeError("the HTTP API could not start (see the log above)")


def _api_app(app: Herald, settings: Settings, api: ApiSettings, metrics: Any = None) -> Any:
    """The HTTP API with the operator console mounted under /ui."""
    from herald.api import create_app
    from herald.console import install

    api_app = create_app(app, settings, api, metrics=metrics)
    install(api_app, app)
    return api_app


def shared_socket(host: str, port: int) -> socket.socket:
    """A listening socket other processes may bind too (SO_REUSEPORT)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


async def serve(
    app: Herald,
    settings: Settings,
    api: ApiSettings,
    *,
    host: str,
    port: int,
    reuse_port: bool = False,
) -> int:
    """The API and console alone (and the metrics port, if any); SIGTERM/SIGINT stop it.

    ``reuse_port``: several processes serve one port, each with its own pools."""
    from herald.metrics import HeraldMetrics

    metrics = HeraldMetrics()
    grace = settings.shutdown_grace
    api_app = _api_app(app, settings, api, metrics)
    sockets = [shared_socket(host, port)] if reuse_port else None
    if api.metrics_port is None:
        await _serve_checked(_server(api_app, host, port, own_signals=True, grace=grace), sockets)
        return 0
    servers = [
        _server(api_app, host, port, False, grace),
        _metrics_server(app, settings, api, metrics, host),
    ]

    def shutdown() -> None:
        for server in servers:
            server.force_exit = server.should_exit
            server.should_exit = True

    with stop_on_signals(shutdown):
        tasks = [
            asyncio.create_task(_serve_checked(s, sockets if s is servers[0] else None))
            for s in servers
        ]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        shutdown()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    failed = [r for r in results if r is not None]
    for error in failed:
        log.error("server failed: %r", error)
    return 1 if failed else 0


def _metrics_server(
    app: Herald, settings: Settings, api: ApiSettings, metrics: Any, host: str
) -> uvicorn.Server:
    from herald.api.app import create_metrics_app

    assert api.metrics_port is not None
    metrics_app = create_metrics_app(app, settings, metrics, api)
    return _server(metrics_app, host, api.metrics_port, False, settings.shutdown_grace)


async def up(
    app: Herald,
    settings: Settings,
    api: ApiSettings,
    *,
    host: str,
    port: int,
    concurrency: int = 10,
    queues: list[str] | None = None,
    scheduler_interval: float | None = 5.0,
) -> int:
    """API, worker, scheduler and housekeeping (rescue, prune, cleanup, the application's
    sweeps) in this process."""
    from herald.api import list_keys
    from herald.client import open_connection
    from herald.metrics import HeraldMetrics
    from herald.migrate import migrate
    from herald.ops.housekeeping import Housekeeper
    from herald.schedules import Scheduler
    from herald.worker import Worker

    async with await open_connection(settings) as conn:
        for migration in await migrate(conn, settings.schema):
            log.info("applied migration %04d_%s", migration.version, migration.name)
        if api.auth and not any(k["revoked_at"] is None for k in await list_keys(conn)):
            log.warning("no API key exists yet: create one with `herald apikey create`")
    metrics = HeraldMetrics()
    # The worker rescues and prunes; housekeeping (cleanup, sweeps) runs beside it, one
    # process of the deployment at a time, as in `herald worker`.
    worker = Worker(app, settings=settings, concurrency=concurrency, queues=queues)
    metrics.watch_worker(worker)
    server = _server(
        _api_app(app, settings, api, metrics), host, port, False, settings.shutdown_grace
    )
    servers = [server]
    if api.metrics_port is not None:
        servers.append(_metrics_server(app, settings, api, metrics, host))
    stop = asyncio.Event()

    def shutdown() -> None:
        for each in servers:
            if stop.is_set():  # second signal: do not wait for anything
                each.force_exit = True
            each.should_exit = True
        stop.set()
        worker.stop()

    with stop_on_signals(shutdown):
        keeper = await Housekeeper.open(app, settings)
        scheduler = None
        if scheduler_interval is not None:
            scheduler = await Scheduler.open(app, settings, interval=scheduler_interval)
        parts = [
            *(asyncio.create_task(_serve_checked(s), name="api") for s in servers),
            asyncio.create_task(worker.run(), name="worker"),
            asyncio.create_task(keeper.run(stop), name="housekeeping"),
        ]
        if scheduler is not None:
            parts.append(asyncio.create_task(scheduler.run(stop), name="scheduler"))
        log.info(
            "herald up: API on http://%s:%d (console at /ui), worker on %s, scheduler %s",
            host,
            port,
            ",".join(worker.queues),
            "on" if scheduler is not None else "off",
        )
        try:
            await asyncio.wait(parts, return_when=asyncio.FIRST_COMPLETED)
            unexpected = not stop.is_set()
            if unexpected:  # one part ended on its own: take the others down with it
                log.error("a part of herald up stopped on its own; stopping the others")
                shutdown()
            results = await asyncio.gather(*parts, return_exceptions=True)
        finally:
            if scheduler is not None:
                await scheduler.close()
            await keeper.close()
    failures = [(t.get_name(), r) for t, r in zip(parts, results, strict=True) if r is not None]
    for name, error in failures:
        log.error("%s failed: %r", name, error)
    return 1 if failures or unexpected else 0
