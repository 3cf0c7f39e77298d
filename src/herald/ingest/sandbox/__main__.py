"""``python -m herald.ingest.sandbox``: run the provider sandbox until interrupted.

Every query parameter of the sandbox has an option (``--plans 1000000 --seed 7
--latency 0.5``...) that sets the default feed; query
parameters still override it per request. The first line printed is the base URL.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import signal
import sys

from herald.ingest.sandbox.server import FeedConfig, Sandbox
from herald.ingest.sandbox.snapshots import SnapshotSpec


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m herald.ingest.sandbox",
        description="Serve seeded event-plans snapshots and provider faults on loopback.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8765, help="0 picks a free port")
    parser.add_argument("--auth", default=None, help="Authorization value every feed requires")
    for name in _OPTIONS:
        parser.add_argument(f"--{name.replace('_', '-')}", dest=name, default=None)
    return parser


# Options: the snapshot's fields and the feed's faults, as their query parameters.
_OPTIONS = [f.name for f in dataclasses.fields(SnapshotSpec)] + [
    f.name for f in dataclasses.fields(FeedConfig) if f.name not in ("spec", "auth")
]


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    given = {name: getattr(args, name) for name in _OPTIONS if getattr(args, name) is not None}
    try:
        default = FeedConfig(auth=args.auth).with_query(given)
    except ValueError as exc:
        sys.exit(f"error: {exc}")
    asyncio.run(_serve(Sandbox(default=default, host=args.host, port=args.port)))


async def _serve(sandbox: Sandbox) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    async with sandbox:
        print(sandbox.base_url, flush=True)
        await stop.wait()


if __name__ == "__main__":
    main()
