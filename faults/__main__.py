"""``python -m faults run --short|--full [--only NAME ...] [--seed N] [--out DIR]``.

Runs the named fault scenarios one after another, prints the table, writes the report
(JSON, Markdown table, PNG plot) and exits 1 when any invariant broke.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from faults.report import table, write
from faults.scenarios import SCENARIOS, Result, run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m faults", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    go = sub.add_parser("run", help="run fault scenarios and check every invariant")
    size = go.add_mutually_exclusive_group(required=True)
    size.add_argument("--short", action="store_true", help="the short (CI) versions")
    size.add_argument("--full", action="store_true", help="the full versions (long)")
    go.add_argument("--only", nargs="+", choices=sorted(SCENARIOS), help="these scenarios")
    go.add_argument("--seed", type=int, default=None, help="override every scenario's seed")
    go.add_argument("--out", type=Path, default=Path("fault-report"), help="report directory")
    sub.add_parser("list", help="list the scenarios")
    return parser


async def _run_all(names: list[str], short: bool, seed: int | None, out: Path) -> list[Result]:
    results = []
    for name in names:
        scenario = SCENARIOS[name]
        print(f"[{scenario.number}] {name}: {scenario.title} ...", flush=True)
        workdir = Path(tempfile.mkdtemp(prefix=f"faults-{name}-"))
        result = await run(scenario, short=short, workdir=workdir, seed=seed)
        if result.ok:  # nothing to look into: keep only the report
            shutil.rmtree(workdir, ignore_errors=True)
        verdict = "pass" if result.ok else f"FAIL (evidence kept in {workdir})"
        print(f"    {result.seconds:.0f}s, {verdict}", flush=True)
        for violation in result.violations:
            print(f"    - {violation}", flush=True)
        results.append(result)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # The faults cut connections on purpose; the pools' reconnect warnings are expected.
    logging.getLogger("psycopg.pool").setLevel(logging.ERROR)
    if args.command == "list":
        for s in sorted(SCENARIOS.values(), key=lambda s: s.number):
            print(f"{s.number:2d} {s.name:24s} seed {s.seed:4d}  {s.title}")
        return 0
    names = args.only or sorted(SCENARIOS, key=lambda n: SCENARIOS[n].number)
    results = asyncio.run(_run_all(names, args.short, args.seed, args.out))
    print()
    print(table(results))
    for path in write(results, args.out):
        print(f"wrote {path}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
