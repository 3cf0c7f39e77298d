"""``python -m herald.social.sandbox``: run the sandbox platform server in the foreground.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): a
stand-in for the platforms, for trying Herald by hand or pointing a benchmark at it.
Prints the URL and the credentials of the accounts it made as one JSON document, then
serves until interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys

from herald import loop
from herald.social.adapters.base import PLATFORMS
from herald.social.sandbox.server import Sandbox
from herald.social.sandbox.state import Quota, SandboxConfig


def _quota(raw: str) -> tuple[str, str, Quota]:
    """``platform[.bucket]=requests/seconds``, e.g. ``mastodon=300/300``."""
    try:
        target, _, spec = raw.partition("=")
        platform, _, bucket = target.partition(".")
        requests, _, window = spec.partition("/")
        if platform not in PLATFORMS:
            raise ValueError(f"unknown platform {platform!r}")
        return platform, bucket or "requests", Quota(int(requests), float(window))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"{raw!r}: expected platform[.bucket]=requests/seconds ({exc})"
        ) from None


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m herald.social.sandbox",
        description="A loopback stand-in for Mastodon, Bluesky, Facebook Pages and webhooks.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="loopback address (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765, 0 = any)")
    parser.add_argument("--accounts", type=int, default=1, help="accounts to make per platform")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to each answer")
    parser.add_argument(
        "--media-processing", type=float, default=0.0, help="seconds Mastodon media stay processing"
    )
    parser.add_argument(
        "--quota",
        type=_quota,
        action="append",
        default=[],
        help="override a quota: platform[.bucket]=requests/seconds (repeatable)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    config = SandboxConfig(latency=args.latency, media_processing=args.media_processing)
    for platform, bucket, quota in args.quota:
        config.quotas.setdefault(platform, {})[bucket] = quota
    try:
        sandbox = Sandbox(config, host=args.host, port=args.port)
        sandbox.bind()
    except (ValueError, OSError) as exc:
        print(f"sandbox: {exc}", file=sys.stderr)
        return 2
    accounts = [
        sandbox.add_account(platform)
        for platform in PLATFORMS
        for _ in range(max(0, args.accounts))
    ]
    listing = {
        "url": sandbox.url,
        "accounts": [
            {
                "platform": a.platform,
                "id": a.id,
                "name": a.name,
                "base_url": a.account(sandbox.url).base_url,
                "credentials": a.credentials,
                "info": a.info,
            }
            for a in accounts
        ],
    }
    print(json.dumps(listing, indent=2), flush=True)
    # On uvloop where installed, like Herald's own processes: a benchmark's sandbox shares
    # the cores with what it measures.
    with contextlib.suppress(KeyboardInterrupt):
        loop.run(sandbox.serve(), "auto")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
