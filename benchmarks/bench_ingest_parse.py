"""Snapshot parsing throughput and memory: plans/s and peak RSS for 100k and 1M plans.

Each figure is taken in a fresh process, so its peak RSS is its own:

- ``parse``: the event-plans parser (expat, record trees, mapping to canonical plans)
  fed 64 KiB chunks of a generated snapshot; only the parser's calls are timed (the
  generator runs between them, untimed). This is the parsing share of a fetch.
- ``tree``: the same without the mapping (records built, mapped to nothing): how the
  time splits between XML and mapping.
- ``expat``: expat alone with handlers that do nothing: the ceiling of any parser that
  calls Python per element, to read the other figures against on a loaded machine.
- ``fetch``: the whole fetch path over loopback HTTP: the sandbox in a process of its
  own serves the snapshot, :func:`herald.ingest.fetch.fetch_snapshot` streams it into
  the parser and hands batches to a sink that drops them (no database yet). Bounded by
  how fast the sandbox generates on this machine, which it prints too.

Peak RSS is ``ru_maxrss``; ``baseline`` is the RSS just before parsing starts. Memory
is flat when the 1M peak is within a few MiB of the 100k peak.

Run from the repository root::

    .venv/bin/python -m benchmarks.bench_ingest_parse
    .venv/bin/python -m benchmarks.bench_ingest_parse --sizes 100000 --modes parse --repeat 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

from benchmarks.bench_core import machine

MODES = ("parse", "tree", "expat", "fetch")


def rss_kib() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") // 1024


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


class _Expat:
    """expat with no-op handlers, shaped like a StreamParser for the timing loop."""

    def __init__(self) -> None:
        from xml.parsers import expat

        self.parser = expat.ParserCreate()
        self.parser.StartElementHandler = lambda name, attrs: None
        self.parser.EndElementHandler = lambda name: None

    def feed(self, data: bytes) -> None:
        self.parser.Parse(data, False)

    def close(self) -> None:
        self.parser.Parse(b"", True)

    def take(self) -> tuple[list[object], list[object]]:
        return [], []


def child_parse(plans: int, zones: int, mode: str) -> dict[str, Any]:
    from herald.ingest.formats import new_parser
    from herald.ingest.sandbox.snapshots import SnapshotSpec, snapshot_chunks
    from herald.ingest.xmlstream import RawElement, StreamParser

    def nothing(_element: RawElement) -> list[object]:
        return []

    mapped = mode == "parse"
    fmt_parser = new_parser("event-plans")
    parser: StreamParser[Any] | _Expat = (
        fmt_parser
        if mapped
        else _Expat()
        if mode == "expat"
        else StreamParser(fmt_parser.layout, nothing, fmt_parser.limits)
    )
    baseline = rss_kib()
    wall = cpu = 0.0
    count = 0
    for chunk in snapshot_chunks(SnapshotSpec(seed=1, plans=plans, zones=zones), 1):
        w, c = time.perf_counter(), time.process_time()
        parser.feed(chunk)
        records, _ = parser.take()
        wall += time.perf_counter() - w
        cpu += time.process_time() - c
        count += len(records)
    w, c = time.perf_counter(), time.process_time()
    parser.close()
    records, _ = parser.take()
    wall += time.perf_counter() - w
    cpu += time.process_time() - c
    count += len(records)
    expected = plans if mapped else 0
    if count < expected * 0.9:  # about 5 % of plans are withdrawn in later versions only
        raise SystemExit(f"parsed {count} plans of {plans}")
    # Rates are per plan of the snapshot, whatever the mode returns.
    return {"plans": plans, "wall": wall, "cpu": cpu, "baseline": baseline, "peak": peak_kib()}


def child_fetch(plans: int, zones: int) -> dict[str, Any]:
    from herald.ingest.fetch import Batch, FetchPolicy, fetch_snapshot
    from herald.ingest.sandbox import spawn_sandbox

    count = 0

    async def sink(batch: Batch) -> None:
        nonlocal count
        count += len(batch.records)

    with spawn_sandbox("--plans", str(plans), "--zones", str(zones)) as sandbox:
        baseline = rss_kib()
        w, c = time.perf_counter(), time.process_time()
        result = asyncio.run(
            fetch_snapshot(sandbox.feed_url("bench"), "event-plans", sink, policy=FetchPolicy())
        )
        wall, cpu = time.perf_counter() - w, time.process_time() - c
    if count != result.records or count < plans * 0.9:
        raise SystemExit(f"fetched {count} plans of {plans}")
    return {"plans": count, "wall": wall, "cpu": cpu, "baseline": baseline, "peak": peak_kib()}


def generation_rate(plans: int, zones: int) -> float:
    from herald.ingest.sandbox.snapshots import SnapshotSpec, snapshot_chunks

    started = time.perf_counter()
    for _ in snapshot_chunks(SnapshotSpec(seed=1, plans=plans, zones=zones), 1):
        pass
    return plans / (time.perf_counter() - started)


def measure(mode: str, plans: int, zones: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.bench_ingest_parse", "--child", mode]
    command += ["--sizes", str(plans), "--zones", str(zones)]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{mode} {plans}: failed\n{done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--sizes", default="100000,1000000", help="plan counts, comma-separated")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--zones", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.child:
        if args.child == "fetch":
            figures = child_fetch(sizes[0], args.zones)
        else:
            figures = child_parse(sizes[0], args.zones, args.child)
        print(json.dumps(figures))
        return
    print(f"machine:  {machine()}")
    print(f"load:     {os.getloadavg()[0]:.2f} (1 min average when the run started)")
    print(f"snapshot: event-plans, {args.zones} zones per plan, one plan per base plan")
    print(f"sandbox generation: {generation_rate(50_000, args.zones):,.0f} plans/s (one core)")
    header = f"{'mode':<6} {'plans':>9}  {'plans/s wall':>12} {'plans/s cpu':>12}"
    print(header + f" {'baseline MiB':>12} {'peak MiB':>9}")
    for mode in args.modes.split(","):
        for plans in sizes:
            runs = [measure(mode, plans, args.zones) for _ in range(args.repeat)]
            best = max(runs, key=lambda r: r["plans"] / r["wall"])
            print(
                f"{mode:<6} {plans:>9,}  {best['plans'] / best['wall']:>12,.0f} "
                f"{best['plans'] / best['cpu']:>12,.0f} {best['baseline'] / 1024:>12.1f} "
                f"{max(r['peak'] for r in runs) / 1024:>9.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
