"""The acceptance test: the reference's late-partition trace on real worker processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from herald.config import Settings
from herald.generations import late_partition
from herald.generations.late_partition import DAILY_RUN, REPAIR_RUN

pytestmark = pytest.mark.slow


async def test_the_partition_that_finished_twice(settings: Settings, tmp_path: Path) -> None:
    trace = await late_partition.replay(settings, tmp_path, generation_before=41, lease=2.0)
    logs = "see the worker logs under " + str(tmp_path)
    current, winner, repair = trace.current, trace.winner, trace.repair_job
    assert current is not None and winner is not None and repair is not None, logs
    assert current.generation == 42, logs
    # Generation 42 is run 771's retry: the same job under the next fence. The expiry of
    # the stopped worker's lease was not charged as an attempt (poison isolation).
    assert winner.run_id == REPAIR_RUN
    assert winner.job_id == repair.job_id
    assert winner.attempt == 1 and winner.fence == 2
    assert winner.reason_code == "base_current"
    assert len(current.manifest_ids or []) == 2  # original inputs + the late file
    assert current.row_count == 45
    # Run 772 never replaced the repair: it waited (late input missing) or was discarded
    # as superseded by generation 42, which already includes all of its inputs.
    codes = [(d.decision, d.reason_code) for d in trace.daily_decisions]
    assert codes[-1] == ("discard", "superseded"), codes
    assert all(d in (("wait", "missing_input"), ("discard", "superseded")) for d in codes)
    assert trace.daily_partition is not None and trace.daily_partition.state == "discarded"
    # 771's first attempt's bytes stay where it wrote them, unregistered and invisible.
    assert trace.orphans == [
        f"out/orders/{late_partition.PARTITION}/run-{REPAIR_RUN}/job-{repair.job_id}-fence-1.jsonl"
    ]
    assert trace.zombie_candidates == 0
    # Its late report was refused by the fence.
    assert any("fence 1" in r for r in trace.refusals), trace.refusals
    # Consumers: 42 events, the last a correction naming generation 42.
    assert len(trace.events) == 42
    assert trace.events[-1].event_type == "generation.corrected"
    assert trace.events[-1].payload["generation"] == 42
    assert DAILY_RUN not in {e.payload["run_id"] for e in trace.events}
    text = "\n".join(late_partition.report(trace))
    assert "generation 42" in text and "orphaned output" in text
