"""Export benchmark: records/s, seconds and peak RSS per format, and memory at 10x size.

Run from the repository root::

    .venv/bin/python -m benchmarks.bench_export               # 300,000 and 3,000,000 records
    .venv/bin/python -m benchmarks.bench_export --records 100000 --large 0

Every measurement runs in a fresh child process, so its peak RSS (``ru_maxrss``) is its
own. Records come from the generated sample source (six typed columns); generating them
is part of the measured time, as a real source's reading would be. Files are written to
a temporary export store and removed afterwards. ``cpu`` is the child's CPU time: on a
shared machine it is the steadier figure, wall time shows what contention added.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from herald.catalog.export import export_records
from herald.catalog.sources import SAMPLE_COLUMNS, GeneratedSource, sample_rows
from herald.catalog.store import LocalExportStore


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def _child(formats: list[str], records: int) -> dict[str, Any]:
    baseline = _rss_mb()
    with tempfile.TemporaryDirectory(prefix="herald-bench-") as folder:
        store = LocalExportStore(Path(folder))
        source = GeneratedSource(SAMPLE_COLUMNS, lambda: sample_rows(records))
        started, cpu = time.perf_counter(), time.process_time()
        result = export_records(source, store, "bench/v1", "bench", formats)
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert result.record_count == records
    return {
        "formats": formats,
        "records": records,
        "seconds": seconds,
        "cpu": cpu,
        "rss_mb": _rss_mb(),
        "baseline_rss_mb": baseline,
        "bytes": sum(f.byte_size for f in result.files),
    }


def _measure(formats: list[str], records: int) -> dict[str, Any]:
    output = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.bench_export",
            "--child",
            ",".join(formats),
            "--records",
            str(records),
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return dict(json.loads(output))


def _line(m: dict[str, Any]) -> str:
    rate = m["records"] / m["seconds"]
    return (
        f"{'+'.join(m['formats']):<13} {m['records']:>10,} records  {m['seconds']:7.2f} s "
        f"(cpu {m['cpu']:6.2f} s)  {rate:>10,.0f} records/s  {m['bytes'] / 1e6:8.1f} MB  "
        f"peak RSS {m['rss_mb']:6.1f} MB"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--large", type=int, default=3_000_000, help="0 skips the memory run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child.split(","), args.records)))
        return

    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()}")
    singles = [_measure([fmt], args.records) for fmt in ("json", "xml", "csv")]
    for m in singles:
        print(_line(m))
    total = sum(m["seconds"] for m in singles)
    total_cpu = sum(m["cpu"] for m in singles)
    print(
        f"{'three formats':<13} {args.records:>10,} records  {total:7.2f} s "
        f"(cpu {total_cpu:6.2f} s)  (sum of the single-format runs)"
    )
    together = _measure(["json", "xml", "csv"], args.records)
    print(_line(together) + "  (one pass)")
    if args.large:
        large = _measure(["json", "xml", "csv"], args.large)
        print(_line(large) + "  (one pass)")
        growth = large["rss_mb"] / together["rss_mb"] - 1
        print(
            f"peak RSS at {args.large:,} vs {args.records:,} records: "
            f"{large['rss_mb']:.1f} MB vs {together['rss_mb']:.1f} MB ({growth:+.1%}); "
            f"interpreter and imports alone: {together['baseline_rss_mb']:.1f} MB"
        )


if __name__ == "__main__":
    main()
