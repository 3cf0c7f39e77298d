"""``herald dataset``: register, list, publish and show the versions of datasets.

A dataset is described by a JSON file, the same document ``POST /v1/datasets`` takes
(see :mod:`herald.catalog.specs`). File sources given by a relative path are read
relative to the spec file.
"""

from __future__ import annotations

import argparse
import getpass
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from herald import loop

if TYPE_CHECKING:
    from herald.catalog.datasets import Dataset
    from herald.config import Settings
    from herald.registry import Herald

# The domain modules (rdflib, SHACL) are imported when a dataset command runs, so
# they do not slow down every other ``herald`` command.

COMMAND = "dataset"


def add_commands(sub: Any) -> None:
    """Add ``herald dataset register|list|publish|versions|delete`` to the CLI."""
    dataset = sub.add_parser(
        COMMAND, help="register, list, publish and delete versions of catalog datasets"
    )
    actions = dataset.add_subparsers(dest="dataset_command", required=True, metavar="ACTION")
    register = actions.add_parser("register", help="register or update a dataset from JSON")
    register.add_argument("--file", required=True, type=Path, help="the dataset's JSON spec")
    register.add_argument("--reason", default=None, help="why (for the audit log)")
    actions.add_parser("list", help="list registered datasets")
    publish = actions.add_parser("publish", help="request a new version's publication")
    publish.add_argument("id")
    publish.add_argument("--reason", default=None, help="why (for the audit log)")
    versions = actions.add_parser("versions", help="a dataset's versions, latest first")
    versions.add_argument("id")
    delete = actions.add_parser("delete", help="remove a version's files and catalog entry")
    delete.add_argument("id")
    delete.add_argument("version", type=int)
    delete.add_argument("--reason", required=True, help="why (for the audit log)")


def cli_actor() -> str:
    """Who the audit log names for a command run here: the operating-system user."""
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no user name for this uid (e.g. in a container)
        return "cli"


def main(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    """Run one ``herald dataset`` command; the exit status."""
    spec: tuple[Dataset, dict[str, Any] | None] | None = None
    if args.dataset_command == "register":
        path: Path = args.file
        try:
            data = json.loads(path.read_text("utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            print(f"error: cannot read {path}: {exc}", file=sys.stderr)
            return 2
        from herald.catalog.specs import parse_dataset

        spec = parse_dataset(data, path.resolve().parent)
    return loop.run(_run(app, settings, args, spec), settings.event_loop)


async def _run(
    app: Herald,
    settings: Settings,
    args: argparse.Namespace,
    spec: tuple[Dataset, dict[str, Any] | None] | None,
) -> int:
    from herald import tables
    from herald.catalog import datasets as registry
    from herald.catalog.admission import request_deletion, request_publication, save_dataset
    from herald.client import Client
    from herald.ops.audit import NO_REASON, Note

    note = Note(cli_actor(), getattr(args, "reason", None) or NO_REASON)
    async with await Client.open(app, settings) as client:
        command = args.dataset_command
        if spec is not None:
            stored, created = await save_dataset(client, *spec, note=note)
            schedule = f", schedule {stored.schedule_id}" if stored.schedule_id is not None else ""
            print(f"{'registered' if created else 'updated'} dataset {stored.id}{schedule}")
            return 0
        if command == "publish":
            admitted = await request_publication(client, args.id, note=note)
            state = (
                "already in progress" if admitted.outcome.value == "in_progress" else "requested"
            )
            print(f"{args.id}: version {admitted.version} {state} (job {admitted.id})")
            return 0
        if command == "delete":
            admitted = await request_deletion(client, args.id, args.version, note=note)
            print(f"{args.id}: version {args.version} is being deleted (job {admitted.id})")
            return 0
        async with client.pool.connection() as conn:
            if command == "list":
                rows = [
                    {
                        "id": d.id,
                        "title": d.info.title,
                        "tier": d.tier,
                        "source": d.source.get("type"),
                        "schedule": d.schedule_id,
                        "next_version": d.next_version,
                    }
                    for d in await registry.list_datasets(conn)
                ]
                print(
                    tables.table(
                        rows, ["id", "title", "tier", "source", "schedule", "next_version"]
                    )
                )
                return 0
            if await registry.get_dataset(conn, args.id) is None:
                raise registry.UnknownDataset(args.id)
            found = await registry.list_versions(conn, args.id)
            rows = [
                {
                    "version": v.version,
                    "state": v.status,
                    "records": v.record_count,
                    "files": len(v.files),
                    "job": v.job_id,
                    "published_at": v.published_at,
                    "error": v.problem,
                }
                for v in found
            ]
            print(
                tables.table(
                    rows, ["version", "state", "records", "files", "job", "published_at", "error"]
                )
            )
            return 0
