"""``herald social``: accounts, posts, keys, the sandbox and the demo from the command line.

Credentials are never taken as command-line arguments (other users can read them in
the process list): ``link`` reads the access token from an environment variable or
standard input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import TYPE_CHECKING, Any

from herald import loop, tables

if TYPE_CHECKING:
    from herald.config import Settings
    from herald.registry import Herald

COMMAND = "social"
PROVIDERS = ("mastodon", "bluesky", "facebook", "webhook")


def add_commands(sub: Any) -> None:
    """Add ``herald social accounts|link|post|disconnect|keygen|rotate-keys|sandbox|demo``."""
    social = sub.add_parser(COMMAND, help="social publishing: accounts, posts, sandbox, demo")
    actions = social.add_subparsers(dest="social_command", required=True, metavar="ACTION")
    listing = actions.add_parser("accounts", help="list linked accounts (never credentials)")
    listing.add_argument("--all", action="store_true", help="also revoked ones")
    link = actions.add_parser("link", help="link an account (token from --token-env or stdin)")
    link.add_argument("--provider", required=True, choices=PROVIDERS)
    link.add_argument("--name", required=True)
    link.add_argument("--page-id", required=True, help="page, handle/DID or account id")
    link.add_argument("--base-url", default=None, help="API root (self-hosted instance)")
    link.add_argument("--token-env", default=None, help="environment variable with the token")
    link.add_argument("--option", action="append", default=[], help="NAME=VALUE (repeatable)")
    link.add_argument("--reason", default=None, help="why (for the audit log)")
    post = actions.add_parser("post", help="publish a post (prints its job)")
    post.add_argument("account_id", type=int)
    post.add_argument("message")
    post.add_argument("--media-url", default=None)
    post.add_argument("--idempotency-key", required=True, help="the same key answers the same job")
    disconnect = actions.add_parser("disconnect", help="revoke and forget an account's token")
    disconnect.add_argument("account_id", type=int)
    disconnect.add_argument("--reason", required=True, help="why (for the audit log)")
    actions.add_parser("keygen", help="print a new key for HERALD_TOKEN_KEYS")
    actions.add_parser(
        "rotate-keys", help="re-encrypt stored tokens under the newest HERALD_TOKEN_KEYS key"
    )
    sandbox = actions.add_parser("sandbox", help="run the sandbox platform server (foreground)")
    sandbox.add_argument("--port", type=int, default=8765)
    sandbox.add_argument("--accounts", type=int, default=1)
    sandbox.add_argument("--latency", type=float, default=0.0)
    demo = actions.add_parser(
        "demo", help="three platforms, posts with media under 20%% faults, each published once"
    )
    demo.add_argument("--faults", type=float, default=0.2, help="share of calls that fail")
    demo.add_argument("--seed", type=int, default=7, help="the fault plan's seed")


def main(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    command = args.social_command
    if command == "keygen":
        from herald.ops.crypto import TokenCipher

        print(TokenCipher.generate_key())
        return 0
    if command == "sandbox":
        from herald.social.sandbox.__main__ import main as sandbox_main

        argv = ["--port", str(args.port), "--accounts", str(args.accounts)]
        return sandbox_main([*argv, "--latency", str(args.latency)])
    if command == "demo":
        from herald.social.demo import run_demo

        return loop.run(run_demo(settings, faults=args.faults, seed=args.seed), settings.event_loop)
    return loop.run(_run(app, settings, args), settings.event_loop)


def _social_app(app: Herald, settings: Settings) -> Herald:
    from herald.social.runtime import social_runtime

    try:
        social_runtime(app)
    except LookupError:
        from herald.social.app import create_app

        return create_app(settings)
    return app


async def _run(app: Herald, settings: Settings, args: argparse.Namespace) -> int:
    from herald.catalog.cli import cli_actor
    from herald.client import Client
    from herald.ops import audit
    from herald.social import accounts, admission
    from herald.social.runtime import social_runtime

    app = _social_app(app, settings)
    runtime = social_runtime(app)
    runtime.reload_keys()  # this command's HERALD_TOKEN_KEYS, not a cached earlier reading
    actor = cli_actor()
    async with await Client.open(app, settings) as client:
        command = args.social_command
        if command == "accounts":
            async with client.pool.connection() as conn:
                rows = await accounts.list_accounts(conn, include_revoked=args.all)
            columns = ["id", "provider", "name", "external_id", "base_url", "status"]
            print(tables.table([accounts.public_account(r) for r in rows], columns))
            return 0
        if command == "link":
            token = _read_token(args.token_env)
            if not token:
                print("error: no access token (give --token-env or pipe it in)", file=sys.stderr)
                return 2
            options = dict(item.partition("=")[::2] for item in args.option)
            request = accounts.LinkRequest(
                provider=args.provider,
                name=args.name,
                page_id=args.page_id,
                access_token=token,
                base_url=args.base_url,
                options=options,
            )
            note = audit.Note(actor, args.reason or audit.NO_REASON)
            async with client.pool.connection() as conn:
                row = await accounts.link_account(conn, runtime.cipher, actor, request, note=note)
            print(json.dumps(accounts.public_account(row), default=str, indent=2))
            return 0
        if command == "post":
            body = {"account_id": args.account_id, "message": args.message}
            if args.media_url:
                body["media_url"] = args.media_url
            admitted = await admission.submit_post(
                client,
                actor,
                args.account_id,
                args.message,
                args.media_url,
                idempotency_key=args.idempotency_key,
                request_body=body,
            )
            outcome = "created" if admitted.created else "replay"
            print(f"post {admitted.post_id}: job {admitted.job_id} ({outcome})")
            return 0
        if command == "rotate-keys":
            async with client.pool.connection() as conn:
                count = await accounts.rotate_credentials(conn, runtime.cipher)
            print(f"{count} account(s) re-encrypted under the newest key")
            return 0
        if command == "disconnect":
            done = await admission.request_disconnect(
                client, args.account_id, actor=actor, reason=args.reason
            )
            print(
                f"account {done.account_id}: revoke job {done.job_id}; failed posts: "
                f"{', '.join(map(str, done.failed_posts)) or 'none'}"
            )
            return 0
    raise AssertionError(f"unknown social command {args.social_command!r}")


def _read_token(variable: str | None) -> str:
    if variable:
        return os.environ.get(variable, "").strip()
    if sys.stdin.isatty():
        import getpass

        return getpass.getpass("access token: ").strip()
    return sys.stdin.readline().strip()
