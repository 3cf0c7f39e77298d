"""Social publishing end to end: HTTP API -> workers -> sandbox platforms (loopback).

Run from the repository root::

    .venv/bin/python -m benchmarks.bench_social                      # every figure
    .venv/bin/python -m benchmarks.bench_social --workers 1 --latency 0 --posts 500

For each platform latency (0 and 50 ms by default) and worker count (1 and 2 processes),
in a fresh schema: the API (``herald serve``, ``--api-processes`` of them sharing the
port), the workers (``herald worker``) and the sandbox platform server (``python -m
herald.social.sandbox``) are processes of their own, this process is the HTTP client;
posts carry no media and no faults are injected. The client is lean
(:mod:`benchmarks.lean_http`, a keep-alive connection per request in flight): it shares
the cores with what it measures, and httpx cost more CPU per post than the API itself
(``--client httpx`` runs it still, to compare). Three figures:

* **admission**: posts/s answered 202 by the API with the workers stopped (``--clients``
  requests in flight, each with its own Idempotency-Key), by the host's clock;
* **drain**: posts/s published by the workers from that backlog, by the database clock
  (first claim to last publication);
* **steady**: posts submitted while the workers run; posts/s from the first admission to
  the last publication, and p50/p99 of admission -> published (the post row's
  ``created_at`` and ``published_at``, both the database's clock).

Where the time goes (printed with each figure): for the admission and the drain, the
CPU milliseconds per post of each process group - the API, the workers, the sandbox, this
process (the HTTP client) - and of the PostgreSQL backends serving each, and the
transactions per post the database counted (``pg_stat_database``: give the benchmark a
database of its own for that figure to be its alone).

``--source DIR`` runs the API, workers and sandbox of another checkout (the code before
a change) with this benchmark, for side-by-side runs under the same load.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import httpx

from benchmarks.accounting import Ledger, spent
from benchmarks.bench_core import Processes, fresh_schema
from benchmarks.lean_http import LeanConnection, LeanHttpError
from herald import loop
from herald.api import create_key
from herald.config import Settings
from herald.db import connect, conninfo, database_url
from herald.ops.crypto import TokenCipher
from herald.social.accounts import PRIMARY_SECRET

_PENDING = "SELECT count(*) AS n FROM social_posts WHERE state <> 'published'"
_SPAN = """
SELECT count(*) AS n,
       extract(epoch FROM max(p.published_at) - min(j.attempted_at))::float8 AS drain_s,
       extract(epoch FROM max(p.published_at) - min(p.created_at))::float8 AS total_s
FROM social_posts p JOIN jobs j ON j.id = p.job_id
WHERE p.state = 'published'
"""
_LATENCIES = """
SELECT extract(epoch FROM published_at - created_at)::float8 * 1000 AS ms
FROM social_posts WHERE state = 'published'
"""
_POSTS = "SELECT count(*) AS n FROM social_posts"
_PUBLISHED = "SELECT count(*) AS n FROM social_posts WHERE state = 'published'"
_COMMITS = "SELECT xact_commit AS n FROM pg_stat_database WHERE datname = current_database()"
ACCOUNTS = 8


class Spawned(Processes):
    def __enter__(self) -> Self:
        return self


class SandboxProcess(Spawned):
    """The sandbox platform server in a process of its own (``python -m
    herald.social.sandbox``), so that its CPU time is counted apart from the benchmark's
    client and neither slows the other down through one interpreter lock."""

    def start(self, latency: float, source: Path | None) -> dict[str, Any]:
        """Start it with ``ACCOUNTS`` accounts per platform; its listing (URL, accounts)."""
        port = 19000 + os.getpid() % 1000
        # Far above what is sent: this measures Herald, not the platforms' quotas.
        quotas = [f"--quota={p}=10000000/1" for p in ("mastodon", "bluesky", "facebook")]
        command = [sys.executable, "-m", "herald.social.sandbox", "--port", str(port)]
        command += ["--accounts", str(ACCOUNTS), "--latency", str(latency), *quotas]
        self.spawn(command, dict(os.environ), 1, source)
        deadline = time.monotonic() + 60
        while True:
            text = self.logs[0].read_text()
            if text.rstrip().endswith("}"):
                with contextlib.suppress(ValueError):
                    listing: dict[str, Any] = json.loads(text[text.index("{") :])
                    return listing
            self.check_alive(deadline)
            time.sleep(0.1)

    def duplicates(self, url: str) -> int:
        counts = httpx.get(f"{url}/_sandbox/counts", timeout=30).json()
        return sum(c["duplicates"] for c in counts["accounts"]["mastodon"].values())


def environment(settings: Settings, concurrency: int) -> dict[str, str]:
    return {
        **os.environ,
        "HERALD_DATABASE_URL": str(settings.database_url),
        "HERALD_SCHEMA": settings.schema,
        "HERALD_TOKEN_KEYS": TokenCipher.generate_key(),
        # Far above what is sent: this measures Herald, not the platforms' quotas.
        "HERALD_SOCIAL_QUOTAS": "mastodon=off,bluesky=off,facebook=off",
        "HERALD_SOCIAL_ACCOUNT_CONCURRENCY": str(concurrency),
        "HERALD_POOL_SIZE": "10",
    }


async def query(settings: Settings, text: str) -> list[dict[str, Any]]:
    conn = await connect(conninfo(str(settings.database_url), settings.schema))
    async with conn:
        cur = await conn.execute(text.encode())
        return await cur.fetchall()


async def execute(settings: Settings, text: str) -> None:
    conn = await connect(conninfo(str(settings.database_url), settings.schema))
    async with conn:
        await conn.execute(text.encode())


async def wait_published(settings: Settings, within: float) -> None:
    deadline = time.monotonic() + within
    # One connection for the whole wait: a new one per poll cost this process more CPU
    # than the rest of its work during a drain.
    conn = await connect(conninfo(str(settings.database_url), settings.schema))
    async with conn:
        while True:
            pending = await (await conn.execute(_PENDING.encode())).fetchone()
            if pending is None or not pending["n"]:
                return
            if time.monotonic() > deadline:
                raise RuntimeError("posts were not published in time")
            await asyncio.sleep(0.1)


async def api_ready(http: httpx.AsyncClient, api: Processes, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while True:
        try:
            if (await http.get("/health")).status_code == 200:
                return
        except httpx.TransportError:
            pass
        api.check_alive(deadline)
        await asyncio.sleep(0.1)


async def workers_ready(workers: Processes, within: float = 60.0) -> None:
    deadline = time.monotonic() + within
    while not all("started on queues" in log.read_text() for log in workers.logs):
        workers.check_alive(deadline)
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)


async def link_accounts(
    http: httpx.AsyncClient, headers: dict[str, str], listing: dict[str, Any]
) -> list[int]:
    ids = []
    for made in (a for a in listing["accounts"] if a["platform"] == "mastodon"):
        body = {
            "provider": "mastodon",
            "name": made["name"],
            "page_id": made["id"],
            "base_url": made["base_url"],
            "access_token": made["credentials"][PRIMARY_SECRET["mastodon"]],
        }
        response = await http.post("/accounts", json=body, headers=headers)
        response.raise_for_status()
        ids.append(int(response.json()["id"]))
    return ids


async def post_once(http: Poster, body: dict[str, Any], headers: dict[str, str]) -> None:
    """POST a post as a careful client does: a dropped connection (a loaded machine's
    keep-alive races) or a 409 for the same key still in flight is retried with the same
    Idempotency-Key, which makes the retry safe."""
    for attempt in range(5):
        try:
            status, text = await http.post(body, headers)
        except (httpx.TransportError, LeanHttpError):
            if attempt == 4:
                raise
        else:
            if status == 202:
                return
            if status != 409 or attempt == 4:
                raise RuntimeError(f"POST /social/posts: {status} {text}")
        await asyncio.sleep(0.2)


class Poster:
    """One caller's way to POST /social/posts: the lean client's own keep-alive
    connection (the default), or the shared httpx client (``--client httpx``, what the
    benchmark used before; kept to compare the clients' cost)."""

    def __init__(self, port: int, headers: dict[str, str], http: httpx.AsyncClient | None):
        self.http = http
        self.lean = LeanConnection("127.0.0.1", port, headers) if http is None else None
        self.headers = headers

    async def post(self, body: dict[str, Any], headers: dict[str, str]) -> tuple[int, str]:
        if self.lean is not None:
            answer = await self.lean.post_json("/social/posts", body, headers)
            return answer.status, answer.body.decode(errors="replace")
        assert self.http is not None
        response = await self.http.post(
            "/social/posts", json=body, headers={**self.headers, **headers}
        )
        return response.status_code, response.text

    async def close(self) -> None:
        if self.lean is not None:
            await self.lean.close()


async def submit(
    posters: list[Poster],
    accounts: list[int],
    posts: int,
    tag: str,
) -> float:
    """Submit ``posts`` posts with one request in flight per poster; the rate of 202s."""
    numbers = iter(range(posts))

    async def client(poster: Poster) -> None:
        try:
            for n in numbers:
                body = {"account_id": accounts[n % len(accounts)], "message": f"{tag} post {n}"}
                await post_once(poster, body, {"Idempotency-Key": f"{tag}-{n}"})
        finally:
            await poster.close()

    start = time.monotonic()
    async with asyncio.timeout(600):  # a stalled server fails the figure, never hangs it
        await asyncio.gather(*(client(p) for p in posters))
    return posts / (time.monotonic() - start)


class Breakdown:
    """CPU time per post of each process group and its backends, and commits per post,
    between :meth:`start` and :meth:`stop` (see :mod:`benchmarks.accounting`)."""

    def __init__(self, settings: Settings, ledger: Ledger, phase: str, counted: str) -> None:
        self.settings, self.ledger, self.phase, self.counted = settings, ledger, phase, counted

    async def start(self) -> None:
        self.before = await self.ledger.snapshot()
        self.commits = (await query(self.settings, _COMMITS))[0]["n"]
        self.posts = (await query(self.settings, self.counted))[0]["n"]

    async def stop(self, figures: dict[str, float]) -> None:
        posts = (await query(self.settings, self.counted))[0]["n"] - self.posts
        # Backends report their counts at most once a second: let them.
        await asyncio.sleep(1.5)
        cpu = spent(self.before, await self.ledger.snapshot())
        commits = (await query(self.settings, _COMMITS))[0]["n"] - self.commits
        for group, seconds in cpu.items():
            figures[f"{self.phase} cpu {group}"] = seconds * 1000 / posts
        figures[f"{self.phase} commits"] = commits / posts
        parts = ", ".join(f"{group} {seconds * 1000 / posts:.2f}" for group, seconds in cpu.items())
        print(
            f"  {self.phase} CPU ms/post: {parts}; transactions/post {commits / posts:.1f}",
            file=sys.stderr,
        )


@dataclass(frozen=True)
class Run:
    """One figure's set-up."""

    workers: int
    latency: float
    posts: int
    clients: int
    concurrency: int
    api_processes: int = 1
    source: Path | None = None  # another checkout's herald to run (A/B comparisons)
    client: str = "lean"  # the load's HTTP client: lean (benchmarks.lean_http) or httpx


def posters(run: Run, port: int, headers: dict[str, str], http: httpx.AsyncClient) -> list[Poster]:
    """``run.clients`` callers, each with a request in flight at a time."""
    shared = http if run.client == "httpx" else None
    return [Poster(port, headers, shared) for _ in range(run.clients)]


async def measure(url: str, run: Run) -> dict[str, float]:
    workers, latency, posts, clients = run.workers, run.latency, run.posts, run.clients
    concurrency, source = run.concurrency, run.source
    figures: dict[str, float] = {}
    with SandboxProcess("herald-bench-social-sandbox-") as sandbox:
        listing = sandbox.start(latency, source)
        async with fresh_schema(url) as settings:
            env = environment(settings, concurrency)
            conn = await connect(conninfo(url, settings.schema))
            async with conn:
                token = (await create_key(conn, "bench", ["admin"])).token
            headers = {"Authorization": f"Bearer {token}"}
            port = 18000 + os.getpid() % 1000
            command = [sys.executable, "-m", "herald", "--app", "herald.social.app:app"]
            limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
            ledger_conn = await connect(conninfo(url, settings.schema))
            ledger = Ledger(ledger_conn, server_port=_server_port(url))
            ledger.add("bench", [os.getpid()])
            ledger.add("sandbox", [p.pid for p in sandbox.procs])
            with Spawned("herald-bench-social-api-") as api:
                serve = [*command, "serve", "--port", str(port)]
                if run.api_processes > 1:
                    serve.append("--reuse-port")
                api.spawn(serve, env, run.api_processes, source)
                ledger.add("api", [p.pid for p in api.procs])
                async with (
                    httpx.AsyncClient(
                        base_url=f"http://127.0.0.1:{port}", timeout=120.0, limits=limits
                    ) as http,
                    ledger_conn,
                ):
                    await api_ready(http, api)
                    accounts = await link_accounts(http, headers, listing)
                    admission = Breakdown(settings, ledger, "admission", _POSTS)
                    await admission.start()
                    figures["admission"] = await submit(
                        posters(run, port, headers, http), accounts, posts, "backlog"
                    )
                    await admission.stop(figures)
                    print(f"  admission: {figures['admission']:.0f} posts/s", file=sys.stderr)
                    args = ["worker", "--concurrency", str(concurrency)]
                    with Spawned("herald-bench-social-") as pool:
                        pool.spawn([*command, *args], env, workers, source)
                        ledger.add("workers", [p.pid for p in pool.procs])
                        await workers_ready(pool)
                        # From here: the workers' start-up is not part of a post's cost.
                        drain = Breakdown(settings, ledger, "drain", _PUBLISHED)
                        await drain.start()
                        await wait_published(settings, 600)
                        await drain.stop(figures)
                        span = (await query(settings, _SPAN))[0]
                        figures["drain"] = span["n"] / span["drain_s"]
                        # Steady state: the backlog is gone, new posts meet running workers.
                        await execute(settings, "TRUNCATE social_posts, social_post_keys CASCADE")
                        # A new client: the server closed the idle keep-alive
                        # connections during the drain.
                        async with httpx.AsyncClient(
                            base_url=f"http://127.0.0.1:{port}", timeout=120.0, limits=limits
                        ) as fresh:
                            figures["submitted"] = await submit(
                                posters(run, port, headers, fresh), accounts, posts, "steady"
                            )
                        await wait_published(settings, 600)
                        span = (await query(settings, _SPAN))[0]
                        figures["steady"] = span["n"] / span["total_s"]
                        samples = sorted(r["ms"] for r in await query(settings, _LATENCIES))
                        figures["p50"] = statistics.median(samples)
                        figures["p99"] = samples[min(len(samples) - 1, int(len(samples) * 0.99))]
                        figures["duplicates"] = sandbox.duplicates(listing["url"])
    return figures


def _server_port(url: str) -> int:
    return httpx.URL(url).port or 5432


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_social")
    parser.add_argument("--posts", type=int, default=2000, help="posts per figure")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--latency", type=float, nargs="+", default=[0.0, 0.05])
    parser.add_argument("--clients", type=int, default=32, help="HTTP requests in flight")
    parser.add_argument("--concurrency", type=int, default=100, help="jobs per worker")
    parser.add_argument(
        "--api-processes", type=int, default=1, help="API processes sharing the port"
    )
    parser.add_argument(
        "--client",
        choices=("lean", "httpx"),
        default="lean",
        help="the load's HTTP client (httpx: the one used before, to compare their cost)",
    )
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        help="run the herald of another checkout (the code before a change, side by side)",
    )
    args = parser.parse_args(argv)
    url = database_url(Settings.from_env())
    print(f"{args.posts} media-less posts to {ACCOUNTS} sandbox Mastodon accounts per figure")
    print(
        "latency | workers | admission posts/s | drain posts/s | steady posts/s | p50 ms | p99 ms"
    )
    for latency in args.latency:
        for workers in args.workers:
            run = Run(
                workers,
                latency,
                args.posts,
                args.clients,
                args.concurrency,
                args.api_processes,
                args.source,
                args.client,
            )
            figures = loop.run(measure(url, run), "auto")
            print(
                f"{latency * 1000:5.0f} ms | {workers:7d} | {figures['admission']:17.0f} | "
                f"{figures['drain']:13.0f} | {figures['steady']:14.0f} | "
                f"{figures['p50']:6.0f} | {figures['p99']:6.0f}"
                + (f"  DUPLICATES: {figures['duplicates']:.0f}" if figures["duplicates"] else ""),
                flush=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
