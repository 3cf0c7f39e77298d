"""The provider sandbox as a server: its own process, its endpoints, its generated data."""

from __future__ import annotations

import httpx
import pytest

from herald.ingest.formats import new_parser
from herald.ingest.sandbox import FeedConfig, Sandbox, SnapshotSpec, snapshot_chunks, spawn_sandbox
from herald.ingest.sandbox.snapshots import expected_plan, present


def test_the_same_seed_and_version_give_the_same_bytes() -> None:
    spec = SnapshotSpec(seed=4, plans=300, zones=5, plans_per_base=2)
    assert b"".join(snapshot_chunks(spec, 3)) == b"".join(snapshot_chunks(spec, 3))
    assert b"".join(snapshot_chunks(spec, 3)) != b"".join(snapshot_chunks(spec, 4))
    chunks = list(snapshot_chunks(spec, 1, chunk_bytes=4096))
    assert len(chunks) > 10 and all(len(c) < 4096 + 5000 for c in chunks)


def test_plans_that_disappear_stay_gone() -> None:
    spec = SnapshotSpec(seed=8, plans=2000)
    gone = [i for i in range(2000) if not present(spec, i, 10)]
    assert 50 < len(gone) < 200  # about 5 % are withdrawn within ten versions
    for index in gone:
        versions = [present(spec, index, v) for v in range(1, 12)]
        assert versions == sorted(versions, reverse=True)  # present, then absent for good


def test_large_snapshots_are_generated_lazily() -> None:
    chunks = snapshot_chunks(SnapshotSpec(plans=10_000_000), 1)
    first = next(chunks)  # ten million plans: only the first chunk is ever built
    assert first.startswith(b"<?xml") and len(first) < 70_000


def test_zone_count_and_prices_follow_the_spec() -> None:
    spec = SnapshotSpec(seed=2, plans=50, zones=9)
    parser = new_parser("event-plans")
    for chunk in snapshot_chunks(spec, 1):
        parser.feed(chunk)
    parser.close()
    records, _ = parser.take()
    for plan in records:
        expected = expected_plan(spec, int(plan.plan_id) - 1, 1)
        assert expected is not None
        assert len(plan.zones) == 9 and tuple(z.price for z in plan.zones) == expected.prices


async def test_endpoints_and_parameter_errors() -> None:
    async with Sandbox({"fixed": FeedConfig(version=7)}) as sandbox, httpx.AsyncClient() as http:
        assert (await http.get(f"{sandbox.base_url}/healthz")).text == "ok\n"
        bad = await http.get(sandbox.feed_url("x", bogus=1))
        assert bad.status_code == 400 and "unknown sandbox parameter 'bogus'" in bad.text
        bad = await http.get(sandbox.feed_url("x", plans="many"))
        assert bad.status_code == 400 and "is not a int" in bad.text
        assert (await http.get(f"{sandbox.base_url}/nowhere")).status_code == 404
        head = await http.head(sandbox.feed_url("x", plans=5))
        assert head.status_code == 200 and head.headers["x-snapshot-version"] == "1"
        for _ in range(2):  # a pinned version does not move
            got = await http.get(sandbox.feed_url("fixed", plans=3))
            assert got.headers["x-snapshot-version"] == "7"
        assert (await http.get(f"{sandbox.base_url}/canary/x")).status_code == 404
        stats = (await http.get(f"{sandbox.base_url}/stats")).json()
    assert stats["canary_hits"] == 1
    assert stats["feeds"]["fixed"] == {"requests": 2, "served": [7, 7]}
    assert stats["feeds"]["x"]["requests"] == 1  # refused requests never reach a feed


def test_feed_configs_are_validated() -> None:
    with pytest.raises(ValueError, match="hostile is one of"):
        FeedConfig(hostile="nope")
    with pytest.raises(ValueError, match="fail_status"):
        FeedConfig(fail_status=200)
    with pytest.raises(ValueError, match="malformed_kind"):
        FeedConfig().with_query({"malformed_kind": "odd"})


@pytest.mark.slow  # starts an interpreter: a few seconds on a loaded machine
def test_the_sandbox_runs_as_a_process() -> None:
    with spawn_sandbox("--plans", "40", "--seed", "5") as sandbox:
        body = httpx.get(sandbox.feed_url("demo")).content
        again = httpx.get(sandbox.feed_url("demo", "version=1")).content
        assert body == again == b"".join(snapshot_chunks(SnapshotSpec(seed=5, plans=40), 1))
        assert httpx.get(sandbox.feed_url("demo", "fail_first=9")).status_code == 503
    assert sandbox.process.returncode is not None
