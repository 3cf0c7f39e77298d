"""``herald generations``: a partition's view, safe actions, runs, the feed, quarantine,
backfills, and sealing webhook secrets under the newest key.

Actions need ``--reason``; the actor in the audit log is ``cli:<user>``. The command
line is an operator's tool on the database itself, so it acts with every scope (the
HTTP API is where scopes are checked per key).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from herald import loop
from herald.catalog.cli import cli_actor
from herald.config import Settings
from herald.registry import Herald

COMMAND = "generations"


def add_commands(sub: Any) -> None:
    gen = sub.add_parser(COMMAND, help="datasets published as generations (operator tools)")
    actions = gen.add_subparsers(dest="generations_command", required=True, metavar="ACTION")
    show = actions.add_parser("partition", help="a partition: generation, candidates, tasks...")
    show.add_argument("dataset")
    show.add_argument("partition")
    show.add_argument("--json", action="store_true", help="the whole view as JSON")
    act = actions.add_parser("act", help="retry, skip, discard, publish or override")
    act.add_argument("dataset")
    act.add_argument("partition")
    act.add_argument("action", choices=["retry", "skip", "discard", "publish", "override"])
    act.add_argument("--candidate", type=int, default=None)
    act.add_argument("--run", type=int, default=None)
    act.add_argument("--reason", required=True, help="why (for the audit log)")
    run = actions.add_parser("run", help="a run's status per partition")
    run.add_argument("id", type=int)
    feed = actions.add_parser("feed", help="publication events after a position")
    feed.add_argument("--after", type=int, default=0)
    feed.add_argument("--dataset", default=None)
    held = actions.add_parser("quarantine", help="quarantined input of a dataset")
    held.add_argument("dataset")
    resolve = actions.add_parser("resolve", help="repair, replay or discard a quarantined item")
    resolve.add_argument("item", type=int)
    resolve.add_argument("resolution", choices=["repair", "replay", "discard"])
    resolve.add_argument("--reason", required=True, help="why (for the audit log)")
    progress = actions.add_parser("backfill", help="a backfill's progress per partition")
    progress.add_argument("id", type=int)
    actions.add_parser(
        "seal-secrets",
        help="seal webhook secrets stored as given, and re-seal them under the newest "
        "HERALD_TOKEN_KEYS key",
    )


def main(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    return loop.run(_run(app, settings, args), settings.event_loop)


async def _run(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    from herald import tables, tenancy
    from herald.client import open_connection
    from herald.generations import backfill, operator, outbox, quarantine, records
    from herald.generations.shared import installed

    gens = installed(app)
    if gens is None:
        print("error: this application has no generations installed", file=sys.stderr)
        return 2
    gens.use(settings)
    command = args.generations_command
    async with await open_connection(settings) as conn:
        await tenancy.tell(conn)  # the tenant of --tenant, under row-level security
        if command == "partition":
            view = await operator.partition_view(gens, conn, args.dataset, args.partition)
            if args.json:
                print(json.dumps(view, default=str, indent=2))
            else:
                _print_view(view)
            return 0
        if command == "act":
            done = await operator.act(
                gens,
                conn,
                action=args.action,
                dataset_name=args.dataset,
                partition=args.partition,
                scopes=frozenset({"admin"}),
                actor=cli_actor(),
                reason=args.reason,
                candidate_id=args.candidate,
                run_id=args.run,
            )
            print(json.dumps(done, default=str, indent=2))
            return 0
        if command == "run":
            status = await records.run_status(conn, args.id)
            print(
                f"run {status['id']} ({status['purpose']}, {status['state']}): {status['reason']}"
            )
            print(
                tables.table(
                    status["partitions_detail"],
                    ["partition", "status", "state", "attempt", "fence", "detail"],
                )
            )
            return 0
        if command == "feed":
            events = await outbox.feed(conn, after=args.after, dataset=args.dataset)
            for e in events:
                print(
                    json.dumps(
                        {
                            "position": e.position,
                            "event_id": e.event_id,
                            "type": e.event_type,
                            **e.payload,
                        },
                        default=str,
                    )
                )
            return 0
        if command == "quarantine":
            items = await quarantine.held_items(conn, args.dataset, state=None)
            print(
                tables.table(
                    [item.to_json() for item in items],
                    [
                        "id",
                        "state",
                        "reason_code",
                        "owner",
                        "partition",
                        "manifest_id",
                        "expires_at",
                        "detail",
                    ],
                )
            )
            return 0
        if command == "seal-secrets":
            from herald.generations.errors import PlanError
            from herald.generations.secrets import seal_stored

            try:
                changed = await seal_stored(conn)
            except PlanError as exc:
                print(f"error: {exc}", file=sys.stderr)
                return 2
            print(f"{changed} webhook secret(s) sealed under the newest key")
            return 0
        if command == "resolve":
            done = await quarantine.resolve(
                gens, conn, args.item, args.resolution, actor=cli_actor(), reason=args.reason
            )
            print(json.dumps(done, default=str, indent=2))
            return 0
        progress = await backfill.progress(conn, args.id)
        print(f"backfill {progress['id']}: {progress['done']}/{progress['total']} partitions")
        print(
            tables.table(
                progress["partitions_progress"], ["partition", "state", "attempt", "detail"]
            )
        )
        return 0


def _print_view(view: dict[str, Any]) -> None:
    from herald import tables

    cur = view["current"] or {}
    print(
        f"{view['dataset']}/{view['partition']} (owner {view['owner']}): generation "
        f"{cur.get('generation', 0)}, inputs {cur.get('manifest_ids')}, "
        f"published {cur.get('published_at')}"
    )
    print("\ncandidates:")
    print(
        tables.table(
            view["candidates"],
            ["id", "run_id", "attempt", "fence", "state", "reason_code", "generation", "reason"],
        )
    )
    print("\nunsettled tasks:")
    print(
        tables.table(
            view["running_tasks"],
            [
                "run_id",
                "state",
                "job_id",
                "job_state",
                "attempt",
                "fence",
                "lease_owner",
                "lease_expires_at",
            ],
        )
    )
    for title, key, columns in (
        ("failures", "failures", ["run_id", "state", "detail"]),
        ("quarantined input", "quarantined", ["id", "reason_code", "owner", "expires_at"]),
        ("late sources", "late_sources", ["id", "source", "received_at", "why"]),
        ("affected consumers", "affected_consumers", ["name", "delivered", "pending", "failed"]),
    ):
        print(f"\n{title}:")
        print(tables.table(view[key], columns))
    print("\norphaned outputs:", *(view["orphaned_outputs"] or ["none"]), sep="\n  ")
    print("\nsafe actions:")
    for a in view["safe_actions"]:
        print(f"  {a['action']} {a['target']} (scope {a['scope']}): {a['effect']}")
