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

``--hostile`` measures the hardening's memory instead: each hostile document the
sandbox can serve (billion laughs, quadratic blowup, deep nesting inside and outside a
record, a huge attribute, many attributes) is fed in 64 KiB chunks to a fresh parser
in a fresh process, next to a normal snapshot of about the same size as the largest of
them; printed: the document's size, how far the parser read before it refused, and the
peak RSS over the baseline.

Run from the repository root::

    .venv/bin/python -m benchmarks.bench_ingest_parse
    .venv/bin/python -m benchmarks.bench_ingest_parse --sizes 100000 --modes parse --repeat 3
    .venv/bin/python -m benchmarks.bench_ingest_parse --hostile --hostile-mib 16
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import resource
import subprocess
import sys
import time
from typing import Any

from benchmarks.bench_core import machine

MODES = ("parse", "tree", "expat", "fetch")
HOSTILE = (
    "billion-laughs",
    "quadratic-blowup",
    "deep-nesting",
    "deep-record",
    "huge-attribute",
    "many-attributes",
)
_PLAN_BYTES = 520  # about one plan with 3 zones in the generated snapshot


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


def child_hostile(kind: str, mib: int) -> dict[str, Any]:
    from herald.ingest.errors import DocumentError
    from herald.ingest.formats import new_parser
    from herald.ingest.sandbox.hostile import hostile_document
    from herald.ingest.sandbox.snapshots import SnapshotSpec, _Text, snapshot_chunks

    _Text.ready()  # the generator's tables, built before the baseline is read
    target = mib << 20
    if kind == "normal":
        chunks = snapshot_chunks(SnapshotSpec(seed=1, plans=target // _PLAN_BYTES, zones=3), 1)
    else:
        scale = target // 9 if kind == "many-attributes" else target // 13
        if kind == "huge-attribute":
            scale = target
        chunks = hostile_document(
            kind, canary_url="http://127.0.0.1:9/canary", target_file="/etc/hostname", size=scale
        )
    # The whole document is built first (what building it costs is the sandbox's, not
    # the parser's), then the peak is reset so it measures the parse alone.
    document = b"".join(chunks)
    gc.collect()
    parser = new_parser("event-plans")
    baseline = _reset_peak()
    fed = records = 0
    outcome = "accepted"
    for start in range(0, len(document), 1 << 16):
        piece = document[start : start + (1 << 16)]
        fed += len(piece)
        try:
            parser.feed(piece)
            records += len(parser.take()[0])
        except DocumentError as exc:
            outcome = f"refused: {str(exc)[:70]}"
            break
    if outcome == "accepted":
        try:
            parser.close()
            records += len(parser.take()[0])
        except DocumentError as exc:
            outcome = f"refused: {str(exc)[:70]}"
    return {
        "kind": kind,
        "bytes": len(document),
        "fed": fed,
        "records": records,
        "outcome": outcome,
        "baseline": baseline,
        "peak": _status_kib("VmHWM"),
    }


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise SystemExit(f"no {field} in /proc/self/status")


def _reset_peak() -> int:
    """Reset this process's peak RSS (Linux ``clear_refs`` 5) and return the RSS now."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")
    return _status_kib("VmRSS")


def hostile_figures(mib: int) -> None:
    print(f"hostile documents, scaled to about {mib} MiB; a normal snapshot of that size first")
    print(f"{'document':<18} {'MiB':>8} {'MiB fed':>9} {'peak-baseline MiB':>18}  outcome")
    for kind in ("normal", *HOSTILE):
        command = [sys.executable, "-m", "benchmarks.bench_ingest_parse", "--child-hostile", kind]
        command += ["--hostile-mib", str(mib)]
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SystemExit(f"hostile {kind}: failed\n{done.stderr}")
        r = json.loads(done.stdout.strip().splitlines()[-1])
        outcome = r["outcome"]
        if outcome == "accepted":
            outcome += f", {r['records']:,} plans"
        print(
            f"{kind:<18} {r['bytes'] / 2**20:>8.3f} {r['fed'] / 2**20:>9.3f} "
            f"{(r['peak'] - r['baseline']) / 1024:>18.1f}  {outcome}",
            flush=True,
        )


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
    parser.add_argument("--hostile", action="store_true", help="hostile documents' memory")
    parser.add_argument("--hostile-mib", type=int, default=16)
    parser.add_argument("--child-hostile", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_hostile:
        print(json.dumps(child_hostile(args.child_hostile, args.hostile_mib)))
        return
    if args.hostile:
        print(f"machine:  {machine()}")
        print(f"load:     {os.getloadavg()[0]:.2f} (1 min average when the run started)")
        hostile_figures(args.hostile_mib)
        return
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
