"""Fetching from the provider sandbox over real sockets: the retry policy against each
fault, Retry-After, partial and refused bodies, the secret header, the sink contract."""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import pickle
import time
from pathlib import Path

import pytest

from herald.backoff import Backoff
from herald.errors import LeaseLost
from herald.ingest.errors import (
    DeadlineExceeded,
    HttpStatusError,
    PartialFetch,
    SnapshotRefused,
    TransportError,
)
from herald.ingest.fetch import Batch, FetchPolicy, fetch_snapshot, parse_retry_after, redact
from herald.ingest.sandbox import FeedConfig, Sandbox, SnapshotSpec, expected_snapshot
from herald.ingest.secret import AuthHeader, Secret

FAST = Backoff(base=0.01, factor=2.0, cap=0.1, jitter=0.5)


class Collector:
    """A sink that keeps what it receives."""

    def __init__(self) -> None:
        self.batches: list[Batch] = []

    async def __call__(self, batch: Batch) -> None:
        self.batches.append(batch)

    @property
    def identities(self) -> list[tuple[str, str]]:
        return sorted(r.identity for b in self.batches for r in b.records)


class Sleeps:
    """Records the waits the fetcher asks for instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay: float) -> None:
        self.delays.append(delay)


def policy(**changes: object) -> FetchPolicy:
    settings: dict[str, object] = {"backoff": FAST, "batch_size": 100, "read_timeout": 5.0}
    settings.update(changes)
    return FetchPolicy(**settings)  # type: ignore[arg-type]


async def test_a_snapshot_streams_to_the_sink_in_batches() -> None:
    sink = Collector()
    async with Sandbox() as sandbox:
        result = await fetch_snapshot(
            sandbox.feed_url("a", plans=250, seed=3), "event-plans", sink, policy=policy()
        )
    expected = expected_snapshot(SnapshotSpec(seed=3, plans=250), 1)
    assert sink.identities == sorted(expected)
    assert [len(b.records) for b in sink.batches[:-1]] == [100] * (len(sink.batches) - 1)
    assert (result.status, result.attempts, result.records, result.rejected) == (
        200,
        1,
        len(expected),
        0,
    )
    assert result.bytes > 100_000 and result.date is not None


async def test_snapshots_change_between_fetches_deterministically_by_seed() -> None:
    spec = SnapshotSpec(seed=11, plans=300)
    async with Sandbox() as sandbox:
        fetched = []
        for _ in range(3):
            sink = Collector()
            await fetch_snapshot(sandbox.feed_url("feed", seed=11, plans=300), "event-plans", sink)
            fetched.append({r.identity: r for b in sink.batches for r in b.records})
        assert sandbox.stats["feed"].served == [1, 2, 3]
    async with Sandbox() as again:  # a fresh server, the same seed: the same snapshot
        sink = Collector()
        await fetch_snapshot(again.feed_url("other", seed=11, plans=300), "event-plans", sink)
        assert {r.identity: r for b in sink.batches for r in b.records} == fetched[0]
        sink = Collector()
        await fetch_snapshot(again.feed_url("x", seed=12, plans=300), "event-plans", sink)
        assert {r.identity: r for b in sink.batches for r in b.records} != fetched[0]
    for version, plans in enumerate(fetched, start=1):
        expected = expected_snapshot(spec, version)
        assert set(plans) == set(expected)
        for identity, plan in plans.items():
            want = expected[identity]
            assert (plan.title, plan.online, plan.sold_out) == (
                want.title,
                want.online,
                want.sold_out,
            )
            assert tuple(z.price for z in plan.zones) == want.prices
            assert plan.starts_at == want.starts_at.replace(tzinfo=dt.UTC)
    first, third = fetched[0], fetched[2]
    common = set(first) & set(third)
    assert set(third) < set(first), "some plans disappeared, none appeared"
    assert any(first[i].min_price != third[i].min_price for i in common)
    assert any(first[i].title != third[i].title for i in common)
    assert any(first[i].online != third[i].online for i in common)


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_server_errors_are_retried_with_backoff(status: int) -> None:
    sleeps = Sleeps()
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=10, fail_first=2, fail_status=status)
        result = await fetch_snapshot(
            url, "event-plans", Collector(), policy=policy(), sleep=sleeps
        )
        assert (result.attempts, sandbox.requests("f")) == (3, 3)
    for retry, delay in enumerate(sleeps.delays, start=1):
        low, high = FAST.bounds(retry)
        assert low <= delay <= high


async def test_retries_are_bounded() -> None:
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=10, fail_first=10)
        with pytest.raises(
            TransportError, match="HTTP 503 Service Unavailable, after 3 attempts"
        ) as caught:
            await fetch_snapshot(
                url, "event-plans", Collector(), policy=policy(attempts=3), sleep=Sleeps()
            )
        assert caught.value.attempts == 3 and sandbox.requests("f") == 3


@pytest.mark.parametrize("status", [429, 503])
async def test_retry_after_seconds_is_honoured(status: int) -> None:
    sleeps = Sleeps()
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=10, fail_first=2, fail_status=status, retry_after=7)
        result = await fetch_snapshot(
            url, "event-plans", Collector(), policy=policy(), sleep=sleeps
        )
    assert result.attempts == 3 and sleeps.delays == [7.0, 7.0]


async def test_retry_after_http_date_is_honoured() -> None:
    sleeps = Sleeps()
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=10, fail_first=1, fail_status=429, retry_after="date:30")
        await fetch_snapshot(url, "event-plans", Collector(), policy=policy(), sleep=sleeps)
    [delay] = sleeps.delays
    assert 28.0 <= delay <= 31.0  # HTTP-dates have a one-second grain


async def test_retry_after_is_really_waited() -> None:
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=10, fail_first=1, fail_status=429, retry_after=1)
        started = time.monotonic()
        result = await fetch_snapshot(url, "event-plans", Collector(), policy=policy())
        assert time.monotonic() - started >= 1.0 and result.attempts == 2


async def test_a_retry_after_too_long_ends_the_fetch_for_the_job_to_snooze() -> None:
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=10, fail_first=1, fail_status=429, retry_after=3600)
        with pytest.raises(TransportError, match="asks to wait 3600 s") as caught:
            await fetch_snapshot(url, "event-plans", Collector(), policy=policy(), sleep=Sleeps())
        assert (caught.value.retry_after, caught.value.attempts, sandbox.requests("f")) == (
            3600.0,
            1,
            1,
        )


@pytest.mark.parametrize("status", [400, 401, 403, 404])
async def test_client_errors_are_not_retried(status: int) -> None:
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=10, fail_first=5, fail_status=status)
        with pytest.raises(HttpStatusError, match=f"HTTP {status}.*not retried") as caught:
            await fetch_snapshot(url, "event-plans", Collector(), policy=policy(), sleep=Sleeps())
        assert (caught.value.status, caught.value.attempts, sandbox.requests("f")) == (status, 1, 1)


async def test_a_connection_cut_before_any_batch_is_retried() -> None:
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=200, drop_after=20_000)
        with pytest.raises(TransportError, match=r"RemoteProtocolError.*after 2 attempts"):
            await fetch_snapshot(
                url,
                "event-plans",
                Collector(),
                policy=policy(attempts=2, batch_size=1000),
                sleep=Sleeps(),
            )
        assert sandbox.requests("f") == 2


async def test_a_connection_cut_after_a_batch_is_a_partial_fetch_not_retried() -> None:
    sink = Collector()
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=400, drop_after=150_000)
        with pytest.raises(PartialFetch, match="the snapshot is incomplete") as caught:
            await fetch_snapshot(
                url, "event-plans", sink, policy=policy(batch_size=50), sleep=Sleeps()
            )
        assert sandbox.requests("f") == 1
    delivered = sum(len(b.records) for b in sink.batches)
    assert caught.value.records == delivered > 0


async def test_a_truncated_document_is_refused_not_retried() -> None:
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=300, truncate_after=120)
        with pytest.raises(SnapshotRefused, match="truncated") as caught:
            await fetch_snapshot(url, "event-plans", Collector(), policy=policy(), sleep=Sleeps())
        assert sandbox.requests("f") == 1 and caught.value.attempts == 1


async def test_malformed_records_are_delivered_as_rejects() -> None:
    sink = Collector()
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=200, malformed_every=20, malformed_kind="mixed")
        result = await fetch_snapshot(url, "event-plans", sink, policy=policy())
    rejected = [r for b in sink.batches for r in b.rejected]
    assert result.rejected == len(rejected) > 0
    assert all(r.raw.startswith(b"<base_plan") and r.reason for r in rejected)
    spec = SnapshotSpec(plans=200, malformed_every=20, malformed_kind="mixed")
    assert sink.identities == sorted(expected_snapshot(spec, 1))


@pytest.mark.parametrize("kind", ["xxe-file", "xxe-net", "external-dtd", "billion-laughs"])
async def test_hostile_documents_read_no_file_and_reach_no_network(
    kind: str, tmp_path: Path
) -> None:
    marker = "TOP-SECRET-7f3a"
    target = tmp_path / "secret.txt"
    target.write_text(marker)
    sink = Collector()
    async with Sandbox(target_file=str(target)) as sandbox:
        with pytest.raises(SnapshotRefused, match="declares a DTD") as caught:
            await fetch_snapshot(
                sandbox.feed_url("f", hostile=kind), "event-plans", sink, policy=policy()
            )
        await asyncio.sleep(0.2)  # a parser that fetched an entity would have hit by now
        assert sandbox.canary_hits == 0
    assert marker not in str(caught.value)
    assert not any(marker in r.title for b in sink.batches for r in b.records)


async def test_a_slow_provider_times_out_and_is_retried() -> None:
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=10, latency=0.5)
        with pytest.raises(TransportError, match=r"ReadTimeout.*after 2 attempts"):
            await fetch_snapshot(
                url,
                "event-plans",
                Collector(),
                policy=policy(attempts=2, read_timeout=0.1),
                sleep=Sleeps(),
            )
        assert sandbox.requests("f") == 2


async def test_a_slow_drip_is_cut_by_the_total_deadline() -> None:
    sink = Collector()
    async with Sandbox() as sandbox:
        # About ten seconds of drip: the deadline cuts it after some batches arrived,
        # with room for a loaded machine to deliver the first ones late.
        url = sandbox.feed_url("f", plans=1000, drip_bytes=2000, drip_interval=0.05)
        with pytest.raises(PartialFetch, match=r"deadline of 2\.5 s passed"):
            await fetch_snapshot(
                url, "event-plans", sink, policy=policy(deadline=2.5, batch_size=2)
            )
    assert sink.batches


async def test_a_deadline_passed_before_any_batch_is_reported_as_such() -> None:
    async with Sandbox() as sandbox:
        url = sandbox.feed_url("f", plans=100, latency=2)
        # (On a loaded machine the deadline can pass before the attempt's request.)
        with pytest.raises(DeadlineExceeded, match=r"deadline of 0\.3 s passed"):
            await fetch_snapshot(url, "event-plans", Collector(), policy=policy(deadline=0.3))


async def test_gzip_bodies_are_decoded_as_they_stream() -> None:
    sink = Collector()
    async with Sandbox() as sandbox:
        result = await fetch_snapshot(
            sandbox.feed_url("f", plans=120, gzip=True), "event-plans", sink
        )
    assert sink.identities == sorted(expected_snapshot(SnapshotSpec(plans=120), 1))
    assert result.bytes > 50_000


async def test_a_checkpoint_that_raises_stops_the_fetch() -> None:
    sink = Collector()
    calls = 0

    async def checkpoint() -> None:
        nonlocal calls
        calls += 1
        if calls == 3:  # before the request, the first batch, then the lease is gone
            raise LeaseLost("lease lost")

    async with Sandbox() as sandbox:
        with pytest.raises(LeaseLost):
            await fetch_snapshot(
                sandbox.feed_url("f", plans=300),
                "event-plans",
                sink,
                policy=policy(),
                checkpoint=checkpoint,
            )
    assert len(sink.batches) == 1


async def test_a_failing_sink_stops_the_fetch_with_its_own_error() -> None:
    async def sink(batch: Batch) -> None:
        raise RuntimeError("staging failed")

    async with Sandbox() as sandbox:
        with pytest.raises(RuntimeError, match="staging failed"):
            await fetch_snapshot(
                sandbox.feed_url("f", plans=300), "event-plans", sink, policy=policy()
            )


async def test_the_auth_header_is_sent_and_never_shown(caplog: pytest.LogCaptureFixture) -> None:
    token = "Bearer s3cr3t-t0ken-value"
    auth = AuthHeader(Secret(token))
    caplog.set_level(logging.DEBUG)
    feeds = {"private": FeedConfig(auth=token, fail_first=1, spec=SnapshotSpec(plans=20))}
    async with Sandbox(feeds) as sandbox:
        url = sandbox.feed_url("private")
        result = await fetch_snapshot(url, "event-plans", Collector(), policy=policy(), auth=auth)
        assert result.attempts == 2  # one 503, retried with the header
        wrong = AuthHeader(Secret("Bearer wrong-value"))
        with pytest.raises(HttpStatusError, match="HTTP 401") as caught:
            await fetch_snapshot(url, "event-plans", Collector(), policy=policy(), auth=wrong)
        with pytest.raises(HttpStatusError):
            await fetch_snapshot(url, "event-plans", Collector(), policy=policy())
    shown = [
        caplog.text,
        str(caught.value),
        repr(caught.value),
        repr(auth),
        str(auth),
        f"{auth.value}",
    ]
    assert "retrying" in caplog.text  # the retry was logged...
    for text in shown:
        assert "s3cr3t" not in text and "wrong-value" not in text  # ...never the secret
    with pytest.raises(TypeError):
        pickle.dumps(auth.value)
    assert auth.value.reveal() == token and auth.value == Secret(token)


def test_secrets_and_headers_are_checked() -> None:
    with pytest.raises(ValueError):
        Secret("")
    with pytest.raises(ValueError, match="line breaks"):
        Secret("a\r\nX-Injected: 1")
    with pytest.raises(ValueError, match="not a valid header name"):
        AuthHeader(Secret("x"), name="Bad Name:")


def test_retry_after_values() -> None:
    now = dt.datetime(2026, 1, 1, 12, 0, 0, tzinfo=dt.UTC)
    assert parse_retry_after("120", now) == 120.0
    assert parse_retry_after(" 1.5 ", now) == 1.5
    assert parse_retry_after("Thu, 01 Jan 2026 12:00:30 GMT", now) == 30.0
    assert parse_retry_after("Thu, 01 Jan 2026 11:00:00 GMT", now) == 0.0  # in the past
    assert parse_retry_after("soon", now) is None
    assert parse_retry_after("-5", now) is None
    assert parse_retry_after(None, now) is None


async def test_only_http_urls_are_fetched() -> None:
    for url in ("ftp://example.org/x", "file:///etc/passwd", "http:///nohost"):
        with pytest.raises(ValueError, match="is http:// or https:// with a host"):
            await fetch_snapshot(url, "event-plans", Collector())


def test_credentials_in_urls_are_redacted() -> None:
    assert redact("https://user:pw@example.org/x?y=1") == "https://***@example.org/x?y=1"
    assert redact("https://example.org/x") == "https://example.org/x"
