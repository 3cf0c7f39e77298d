"""The run's report: JSON (everything), a readable table, and a PNG of the run."""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Callable
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from faults.scenarios import Result

COLUMNS: list[tuple[str, Callable[[Result], str]]] = [
    ("#", lambda r: str(r.number)),
    ("scenario", lambda r: r.name),
    ("jobs", lambda r: str(r.metrics["jobs"])),
    ("deaths", lambda r: str(r.metrics["deaths"])),
    ("lost", lambda r: str(r.metrics["lost"])),
    ("dup. effects", lambda r: str(r.metrics["duplicated_effects"])),
    ("stale applied", lambda r: str(r.metrics["stale_writes_applied"])),
    ("stale rejected", lambda r: str(r.metrics["stale_writes_rejected"])),
    ("max attempts used", lambda r: str(r.metrics["max_attempts_used"])),
    ("over max", lambda r: str(r.metrics["over_max_attempts"])),
    ("overlaps", lambda r: str(r.metrics["lease_overlaps"])),
    ("rescues", lambda r: str(r.metrics["rescues"])),
    ("orphaned", lambda r: str(r.metrics["orphaned_jobs"])),
    ("longest orphan s", lambda r: f"{r.metrics['longest_orphan_s']:.1f}"),
    ("longest to rescue s", lambda r: f"{r.metrics['longest_rescue_lag_s']:.1f}"),
    ("R s", lambda r: f"{r.metrics['recovery_bound_s']:g}"),
    ("seconds", lambda r: f"{r.seconds:.0f}"),
    ("result", lambda r: "pass" if r.ok else "FAIL"),
]


def machine() -> str:
    system = f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs"
    return f"{system}, Python {platform.python_version()}"


def table(results: list[Result]) -> str:
    """A Markdown table, one row per scenario."""
    head = "| " + " | ".join(name for name, _ in COLUMNS) + " |"
    rule = "|" + "|".join("---" for _ in COLUMNS) + "|"
    rows = ["| " + " | ".join(cell(r) for _, cell in COLUMNS) + " |" for r in results]
    lines = [head, rule, *rows]
    for r in results:
        lines.extend(f"- {r.name}: {v}" for v in r.violations)
    return "\n".join(lines)


def document(results: list[Result]) -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "passed": all(r.ok for r in results),
        "scenarios": [asdict(r) for r in results],
    }


def plot(results: list[Result], path: Path) -> bool:
    """Throughput and orphan time over each run; False when matplotlib is absent."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(11, 8), sharex=True)
    for i, r in enumerate(results):
        colour = f"C{i % 10}"
        if r.throughput:
            xs, ys = zip(*r.throughput, strict=True)
            top.plot(xs, ys, label=f"{r.number} {r.name}", linewidth=1, color=colour)
        if r.orphans:
            bottom.scatter(
                [t for t, _, _ in r.orphans],
                [s for _, _, s in r.orphans],
                s=8,
                label=r.name,
                color=colour,
            )
    bounds = sorted({r.metrics["recovery_bound_s"] for r in results})
    for bound in bounds:
        bottom.axhline(bound, color="red", linestyle="--", linewidth=1)
        bottom.annotate(f"R = {bound:g} s", (0, bound), color="red", va="bottom")
    top.set_ylabel("jobs finished per second")
    top.set_title("Throughput over the run")
    top.legend(fontsize=7, ncol=2)
    bottom.set_ylabel("seconds orphaned")
    bottom.set_xlabel("seconds since the scenario started (orphans: at their worker's death)")
    bottom.set_title("Orphan time: worker death to the job's next claim")
    if any(r.orphans for r in results):
        bottom.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(results: list[Result], out: Path) -> list[Path]:
    """Write report.json, report.md and report.png under ``out``; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    doc = document(results)
    written = [out / "report.json", out / "report.md"]
    written[0].write_text(json.dumps(doc, indent=1, default=str))
    version = results[0].version if results else "short"
    header = (
        f"Fault run ({version}), {doc['date']}, {doc['machine']}: "
        f"{'all invariants held' if doc['passed'] else 'INVARIANTS BROKEN'}\n\n"
    )
    written[1].write_text(header + table(results) + "\n")
    if plot(results, out / "report.png"):
        written.append(out / "report.png")
    return written
