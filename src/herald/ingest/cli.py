"""``herald ingest``: providers, fetches, runs, one run in detail, quarantined records.

The auth header's value is never taken on the command line (other users of the machine
could read it in the process list): ``--auth-env VAR`` names the environment variable
that holds it. Listings say whether a provider has one, never its value.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from herald import loop

if TYPE_CHECKING:
    from herald.config import Settings
    from herald.db import AsyncConn
    from herald.registry import Herald

COMMAND = "ingest"
_FIELDS = ("url", "format", "timezone", "auth_name")
_POLICY = (
    ("connect_timeout", float),
    ("read_timeout", float),
    ("deadline", float),
    ("attempts", int),
    ("backoff_base", float),
    ("backoff_cap", float),
    ("max_retry_after", float),
)


def _provider_options(parser: argparse.ArgumentParser, adding: bool) -> None:
    parser.add_argument("name")
    parser.add_argument("--url", required=adding, help="the snapshot's http(s) URL")
    parser.add_argument("--format", default=None, help="snapshot format (default event-plans)")
    parser.add_argument("--timezone", default=None, help="zone of naive times (default UTC)")
    parser.add_argument("--schedule", default=None, help="cron expression (5 fields)")
    parser.add_argument("--no-schedule", action="store_true", help="remove the schedule")
    parser.add_argument("--auth-env", default=None, metavar="VAR", help="auth header from $VAR")
    parser.add_argument("--auth-name", default=None, help="auth header name (Authorization)")
    parser.add_argument("--no-auth", action="store_true", help="remove the stored auth header")
    for name, kind in _POLICY:
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, type=kind, default=None)
    parser.add_argument("--reason", default=None, help="why (for the audit log)")


def add_commands(sub: Any) -> None:
    """Add ``herald ingest ...`` to the CLI."""
    ingest = sub.add_parser(COMMAND, help="snapshot ingestion: providers, fetches, runs")
    actions = ingest.add_subparsers(dest="ingest_command", required=True, metavar="ACTION")
    providers = actions.add_parser("providers", help="register, update and list providers")
    what = providers.add_subparsers(dest="providers_command", required=True, metavar="ACTION")
    _provider_options(what.add_parser("add", help="register (or replace) a provider"), True)
    _provider_options(what.add_parser("update", help="change some fields of a provider"), False)
    what.add_parser("list", help="list providers and their latest run")
    fetch = actions.add_parser("fetch", help="fetch a provider's snapshot now")
    fetch.add_argument("name")
    fetch.add_argument("--reason", default=None, help="why (for the audit log)")
    runs = actions.add_parser("runs", help="recent ingestion runs")
    runs.add_argument("--provider", default=None)
    runs.add_argument("--limit", type=int, default=20)
    run = actions.add_parser("run", help="one run: counts by state, failed rows")
    run.add_argument("id", type=int)
    quarantine = actions.add_parser("quarantine", help="malformed records kept for review")
    quarantine.add_argument("--provider", default=None)
    quarantine.add_argument("--run", type=int, default=None)
    quarantine.add_argument("--limit", type=int, default=20)
    quarantine.add_argument("--raw", action="store_true", help="print each record's raw text")
    demo = actions.add_parser(
        "demo", help="sandbox -> fetch -> process -> search, end to end, on the embedded database"
    )
    demo.add_argument("--plans", type=int, default=50_000, help="plans in the snapshot")


def main(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    if args.ingest_command == "demo":
        from herald.ingest.demo import run_demo

        return loop.run(run_demo(settings, args.plans), settings.event_loop)
    return loop.run(_run(app, settings, args), settings.event_loop)


def _spec(existing: dict[str, Any] | None, args: argparse.Namespace) -> Any:
    from herald.ingest.providers import ProviderError, ProviderSpec

    base: dict[str, Any] = {}
    if existing is not None:
        keep = (*_FIELDS, *(n for n, _ in _POLICY))
        base = {k: existing[k] for k in keep if existing.get(k) is not None}
    for name in (*_FIELDS, *(n for n, _ in _POLICY)):
        value = getattr(args, name, None)
        if value is not None:
            base[name] = value
    schedule = None if args.no_schedule else args.schedule
    if schedule is None and existing is not None and not args.no_schedule:
        schedule = existing.get("schedule")
    auth: str | None = None
    if args.no_auth:
        auth = ""
    elif args.auth_env:
        auth = os.environ.get(args.auth_env)
        if not auth:
            raise ProviderError(f"${args.auth_env} is not set (or empty)")
    if "url" not in base:
        raise ProviderError("--url is required")
    return ProviderSpec(name=args.name, schedule=schedule, auth=auth, **base)


async def _current_schedule(conn: AsyncConn, schedule_id: int | None) -> str | None:
    from herald.schedules import get_schedule

    if schedule_id is None:
        return None
    row = await get_schedule(conn, schedule_id)
    return None if row is None else row.cron


async def _run(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    from herald import tables
    from herald.catalog.cli import cli_actor
    from herald.client import Client
    from herald.ingest import inspect
    from herald.ingest.providers import (
        ProviderError,
        get_provider,
        list_providers,
        request_fetch,
        save_provider,
        shown,
    )
    from herald.ops.audit import NO_REASON, Note

    note = Note(cli_actor(), getattr(args, "reason", None) or NO_REASON)
    command = args.ingest_command
    async with await Client.open(app, settings) as client:
        if command == "fetch":
            admitted = await request_fetch(client, args.name, note=note)
            state = (
                "already in progress" if admitted.outcome.value == "in_progress" else "requested"
            )
            print(f"{args.name}: fetch {state} (job {admitted.id})")
            return 0
        async with client.pool.connection() as conn:
            if command == "providers" and args.providers_command in ("add", "update"):
                existing = await get_provider(conn, args.name)
                if args.providers_command == "update" and existing is None:
                    print(f"error: no provider {args.name!r} is registered", file=sys.stderr)
                    return 1
                known = None
                if existing is not None:
                    known = {
                        **shown(existing),
                        "schedule": await _current_schedule(conn, existing.schedule_id),
                    }
                try:
                    spec = _spec(known if args.providers_command == "update" else None, args)
                    row, created = await save_provider(conn, spec, app=app, note=note)
                except ProviderError as exc:
                    print(f"error: {exc}", file=sys.stderr)
                    return 2
                auth = "with an auth header" if row.has_auth else "without auth"
                schedule = f", schedule {row.schedule_id}" if row.schedule_id else ""
                verb = "registered" if created else "updated"
                print(f"{verb} provider {row.name} ({row.url}, {auth}{schedule})")
                return 0
            if command == "providers":
                providers = [shown(p) for p in await list_providers(conn)]
                columns = ["name", "url", "format", "schedule_id", "has_auth", "last_run_id"]
                print(tables.table(providers, [*columns, "last_run_state"]))
                return 0
            if command == "runs":
                runs = [asdict(r) for r in await inspect.list_runs(conn, args.provider, args.limit)]
                columns = ["id", "provider", "state", "rows_staged", "rejected", "rows_done"]
                print(tables.table(runs, [*columns, "rows_failed", "started_at", "error"]))
                return 0
            if command == "run":
                detail = await inspect.run_detail(conn, args.id)
                if detail is None:
                    print(f"error: no run {args.id}", file=sys.stderr)
                    return 1
                print(json.dumps(asdict(detail), indent=2, default=str))
                return 0
            held = await inspect.list_quarantine(conn, args.provider, args.run, args.limit)
            columns = ["id", "run_id", "provider", "line", "reason"]
            print(tables.table([asdict(r) for r in held], columns + (["raw"] if args.raw else [])))
            return 0
