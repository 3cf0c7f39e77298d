"""``herald tenant create|list|quotas``: the platform operator's tenant management, and
the CLI's ``--tenant`` (which tenant a command acts for; ``*``: the platform, audited).

Every command acts for one tenant: ``--tenant`` (or ``HERALD_TENANT``), else the
default one, so a single-tenant install never names one. ``--tenant '*'`` crosses
tenants: an audit record names the operating-system user and the command line first.
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
from collections.abc import Sequence
from typing import Any

from herald import loop, tables, tenancy
from herald.client import open_connection
from herald.config import Settings
from herald.ops import audit, tenants
from herald.quotas import Quotas
from herald.rows import to_dict

COMMAND = "tenant"
ENV = "HERALD_TENANT"


def actor() -> str:
    """Who runs the CLI, as the audit log names them."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return f"cli:{user}"


def add_option(parser: argparse.ArgumentParser, top: bool) -> None:
    parser.add_argument(
        "--tenant",
        default=None if top else argparse.SUPPRESS,
        metavar="TENANT",
        help=f"the tenant the command acts for (default ${ENV}, else 'default'); "
        "'*': every tenant, as the platform operator (audited)",
    )


def chosen(args: argparse.Namespace) -> str:
    """The tenant named by ``--tenant`` or the environment, checked."""
    name = getattr(args, "tenant", None) or os.environ.get(ENV) or tenancy.DEFAULT
    return name if name == tenancy.PLATFORM else tenancy.checked(name)


async def record_platform_use(settings: Settings, argv: Sequence[str]) -> None:
    """The audit record of a command run across tenants, before it runs."""
    async with await open_connection(settings) as conn:
        await tenancy.tell(conn)
        line = " ".join(["herald", *argv])[:2000]
        await audit.record(conn, actor(), "platform.cli", ("tenant", "*"), line)


def add_commands(sub: Any) -> None:
    parser = sub.add_parser(COMMAND, help="manage tenants (a platform operator's commands)")
    commands = parser.add_subparsers(dest="tenant_command", required=True)
    create = commands.add_parser("create", help="create a tenant")
    create.add_argument("id", help="lower-case letters, digits, - and _ (at most 63)")
    create.add_argument("--name", default="", help="a display name")
    create.add_argument("--reason", default="tenant created from the CLI", help="for the audit log")
    _quota_options(create)
    commands.add_parser("list", help="list tenants and their quotas")
    quotas = commands.add_parser("quotas", help="replace a tenant's quotas (unset: unlimited)")
    quotas.add_argument("id")
    quotas.add_argument("--reason", required=True, help="why (for the audit log)")
    _quota_options(quotas)


def _quota_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-active-jobs", type=int, default=None, help="jobs waiting or running")
    parser.add_argument("--max-per-second", type=float, default=None, help="submissions a second")
    parser.add_argument(
        "--max-payload-bytes", type=int, default=None, help="payload bytes of its active jobs"
    )


def _quotas(args: argparse.Namespace) -> Quotas:
    return Quotas(args.max_active_jobs, args.max_per_second, args.max_payload_bytes)


def main(settings: Settings, args: argparse.Namespace) -> int:
    try:
        return loop.run(_run(settings, args), settings.event_loop)
    except (ValueError, LookupError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


async def _run(settings: Settings, args: argparse.Namespace) -> int:
    async with await open_connection(settings) as conn:
        await tenancy.tell(conn)
        if args.tenant_command == "create":
            spec = tenants.TenantSpec(args.id, args.name, _quotas(args))
            row = await tenants.create(conn, spec, actor=actor(), reason=args.reason)
            print(tables.record(to_dict(row)))
        elif args.tenant_command == "list":
            rows = await tenants.listing(conn)
            columns = ["id", "name", "max_active_jobs", "max_per_second", "max_payload_bytes"]
            print(tables.table([to_dict(row) for row in rows], columns))
        else:
            quotas = await tenants.set_quotas(
                conn, args.id, _quotas(args), actor=actor(), reason=args.reason
            )
            print(tables.record(to_dict(quotas)))
    return 0
