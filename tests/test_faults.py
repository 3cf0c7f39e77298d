"""Fault scenarios, short versions: real worker processes, a real PostgreSQL, faults.

Each test runs one named, seeded scenario end to end (its own embedded PostgreSQL,
supervised ``herald worker`` processes, an HTTP sink, faults, a drain) and asserts the
checker found no broken invariant. The first tests show the checker itself catches
each kind of violation, so a passing scenario means something.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from faults.checker import Observations, check
from faults.report import write
from faults.scenarios import SCENARIOS, Result, run
from faults.supervisor import Event

pytestmark = pytest.mark.slow


def _observations(**changes: object) -> Observations:
    """A small consistent run: job 1 succeeded on its second claim after its worker died."""
    base = Observations(
        accepted={1, 2},
        jobs=[
            {
                "id": 1,
                "kind": "publish",
                "state": "succeeded",
                "attempt": 2,
                "max_attempts": 5,
                "fence": 2,
                "created": 0.0,
                "finished": 9.0,
            },
            {
                "id": 2,
                "kind": "publish",
                "state": "succeeded",
                "attempt": 1,
                "max_attempts": 5,
                "fence": 1,
                "created": 0.0,
                "finished": 1.0,
            },
        ],
        executions=[
            {"job_id": 1, "fence": 1, "started": 0.5, "ended": None, "lease_until": None},
            {"job_id": 1, "fence": 2, "started": 7.0, "ended": 8.9, "lease_until": 17.0},
            {"job_id": 2, "fence": 1, "started": 0.5, "ended": 0.9, "lease_until": 10.0},
        ],
        effects=[{"job_id": 1, "fence": 2}, {"job_id": 2, "fence": 1}],
        rescues=[
            {"job_id": 1, "fence": 1, "owner": "host:4242:abc", "outcome": "waiting", "at": 6.0}
        ],
        stale_writes={"heartbeat": 1},
        dead_letters=[],
        deliveries={"1": 2, "2": 1},
        applied={"1": 1, "2": 1},
        events=[Event(1.0, "kill", 4242)],
    )
    for name, value in changes.items():
        setattr(base, name, value)
    return base


def test_checker_accepts_a_consistent_run() -> None:
    findings = check(_observations(), recovery_bound=14.0)
    assert findings.violations == []
    assert findings.metrics["orphaned_jobs"] == 1
    assert findings.metrics["longest_orphan_s"] == 6.0
    assert findings.metrics["sink_redeliveries"] == 1
    assert findings.metrics["stale_writes_rejected"] == 1


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({"accepted": {1, 2, 3}}, "lost"),
        (
            {
                "effects": [
                    {"job_id": 1, "fence": 2},
                    {"job_id": 1, "fence": 1},
                    {"job_id": 2, "fence": 1},
                ]
            },
            "duplicated effects",
        ),
        ({"effects": [{"job_id": 1, "fence": 1}, {"job_id": 2, "fence": 1}]}, "stale write"),
        ({"applied": {"1": 2, "2": 1}}, "applied twice"),
        ({"applied": {"1": 1}}, "without their effect"),
        (
            {
                "rescues": [
                    {
                        "job_id": 1,
                        "fence": 1,
                        "owner": "host:4242:abc",
                        "outcome": "waiting",
                        "at": 7.5,
                    }
                ]
            },
            "lease overlap",
        ),
        ({"events": [Event(-10.0, "kill", 4242)]}, "not claimed again within R"),
    ],
)
def test_checker_catches_each_violation(changes: dict[str, object], expected: str) -> None:
    findings = check(_observations(**changes), recovery_bound=14.0)
    assert any(expected in v for v in findings.violations), findings.violations


def test_checker_catches_a_job_over_max_attempts() -> None:
    obs = _observations()
    obs.jobs[0]["max_attempts"] = 1
    findings = check(obs, recovery_bound=14.0)
    assert any("more than max_attempts" in v for v in findings.violations)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    "name", [s.name for s in sorted(SCENARIOS.values(), key=lambda s: s.number)]
)
async def test_scenario_short(name: str, tmp_path: Path) -> None:
    result = await run(SCENARIOS[name], short=True, workdir=tmp_path)
    assert result.metrics["jobs"] > 0
    assert result.ok, f"{name} (seed {result.seed}): {result.violations}; evidence in {tmp_path}"


def test_orphan_time_leaves_out_postgresql_outages() -> None:
    outage = [Event(2.0, "pg_crash"), Event(5.0, "pg_start")]
    findings = check(_observations(events=[Event(1.0, "kill", 4242), *outage]), 14.0)
    # 6 s from death to claim; down 2-5 s, plus the reconnect allowance up to 8 s
    assert findings.metrics["longest_orphan_s"] == 1.0


def test_report_writes_json_table_and_plot(tmp_path: Path) -> None:
    findings = check(_observations(), recovery_bound=14.0)
    result = Result(
        number=1,
        name="kill_storm",
        title="Kill storm",
        seed=101,
        version="short",
        started="2026-01-01T00:00:00+00:00",
        seconds=12.0,
        timing={"lease": 10.0},
        plan={"jobs": 2},
        metrics=findings.metrics,
        violations=["1 job(s) lost (not terminal): [3]"],
        orphans=findings.orphans,
        throughput=findings.throughput,
    )
    written = write([result], tmp_path)
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["passed"] is False
    assert doc["scenarios"][0]["metrics"]["orphaned_jobs"] == 1
    table = (tmp_path / "report.md").read_text()
    assert "| 1 | kill_storm | 2 |" in table
    assert "FAIL" in table and "job(s) lost" in table
    assert (tmp_path / "report.png") in written
    assert (tmp_path / "report.png").read_bytes().startswith(b"\x89PNG")


def test_a_claim_that_died_before_logging_still_ends_the_orphan_time() -> None:
    """Job 1's fence-2 claim left no execution row (its worker died first); its rescue
    proves the claim, made before that worker died at 8 s. The first orphaning lasted at
    most 8 - 1 = 7 s, not the 17 s until the fence-3 run started."""
    obs = _observations(
        jobs=[
            {
                "id": 1,
                "kind": "publish",
                "state": "succeeded",
                "attempt": 3,
                "max_attempts": 5,
                "fence": 3,
                "created": 0.0,
                "finished": 19.0,
            },
            {
                "id": 2,
                "kind": "publish",
                "state": "succeeded",
                "attempt": 1,
                "max_attempts": 5,
                "fence": 1,
                "created": 0.0,
                "finished": 1.0,
            },
        ],
        executions=[
            {"job_id": 1, "fence": 1, "started": 0.5, "ended": None, "lease_until": None},
            {"job_id": 1, "fence": 3, "started": 18.0, "ended": 18.9, "lease_until": 28.0},
            {"job_id": 2, "fence": 1, "started": 0.5, "ended": 0.9, "lease_until": 10.0},
        ],
        effects=[{"job_id": 1, "fence": 3}, {"job_id": 2, "fence": 1}],
        rescues=[
            {"job_id": 1, "fence": 1, "owner": "host:4242:abc", "outcome": "waiting", "at": 6.0},
            {"job_id": 1, "fence": 2, "owner": "host:4343:def", "outcome": "waiting", "at": 17.0},
        ],
        events=[Event(1.0, "kill", 4242), Event(8.0, "kill", 4343)],
    )
    findings = check(obs, recovery_bound=14.0)
    assert findings.violations == []
    assert findings.metrics["orphaned_jobs"] == 2
    assert findings.metrics["longest_orphan_s"] == 10.0  # the second: 8 s death -> 18 s claim
