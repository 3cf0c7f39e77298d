"""Fetching a snapshot: the HTTP body streamed straight into the parser, records to a sink.

Place in the pipeline: the fetch job's handler calls :func:`fetch_snapshot` with a sink
that stages each :class:`Batch` into the run's rows (fenced) and a checkpoint that
raises once the job's lease is lost; it maps the outcome to the run's state:
:class:`FetchResult` -> staged; :class:`~herald.ingest.errors.PartialFetch`,
:class:`~herald.ingest.errors.SnapshotRefused` -> failed;
:class:`~herald.ingest.errors.TransportError` (with ``retry_after``) -> failed now,
retried or snoozed by the job.

Retries are for transport only: connection errors, timeouts, 5xx and 429, at most
``attempts`` requests, exponential backoff with jitter between them, or the provider's
Retry-After (seconds or an HTTP-date) on 429/503 and on other 5xx that send one. Other
4xx end the fetch at once. A broken or hostile document is never retried: fetching it
again would fail the same way. Once the sink has received a batch, a failure ends the
fetch as partial: what was delivered belongs to this failed attempt.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import logging
import random
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import httpx

from herald.backoff import Backoff
from herald.ingest.errors import (
    DeadlineExceeded,
    DocumentError,
    HttpStatusError,
    PartialFetch,
    SnapshotRefused,
    TransportError,
)
from herald.ingest.formats import new_parser, snapshot_format
from herald.ingest.mapping import MappingContext, SnapshotFormat
from herald.ingest.records import Plan
from herald.ingest.secret import AuthHeader
from herald.ingest.xmlstream import ParseLimits, Rejected, StreamParser

log = logging.getLogger("herald.ingest.fetch")

_RETRY_AFTER_STATUSES = {429, 503}


@dataclass(frozen=True)
class FetchPolicy:
    """Timeouts, retries and batching of one provider's fetches.

    ``attempts`` counts HTTP requests (the first one included). ``read_timeout`` is the
    longest silence while reading; ``deadline`` bounds the whole fetch, waits between
    attempts included. A Retry-After longer than ``max_retry_after`` (or past the
    deadline) ends the fetch with ``retry_after`` set, for the job to snooze instead.
    """

    attempts: int = 4
    backoff: Backoff = field(
        default_factory=lambda: Backoff(base=1.0, factor=2.0, cap=60.0, jitter=0.5)
    )
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    deadline: float = 1800.0
    max_retry_after: float = 300.0
    batch_size: int = 5000
    max_body_bytes: int | None = None

    def __post_init__(self) -> None:
        if self.attempts < 1 or self.batch_size < 1:
            raise ValueError("attempts and batch_size must be at least 1")
        if min(self.connect_timeout, self.read_timeout, self.deadline) <= 0:
            raise ValueError("timeouts and the deadline must be positive")
        if self.max_retry_after < 0:
            raise ValueError("max_retry_after must be >= 0")
        if self.max_body_bytes is not None and self.max_body_bytes < 1:
            raise ValueError("max_body_bytes must be positive")


@dataclass(frozen=True, slots=True)
class Batch:
    """What the sink receives: mapped records and rejected (quarantined) records."""

    records: list[Plan]
    rejected: list[Rejected]


Sink = Callable[[Batch], Awaitable[None]]
Checkpoint = Callable[[], Awaitable[None]]


@dataclass(frozen=True)
class FetchResult:
    """A complete snapshot: every record went to the sink."""

    url: str  # without credentials
    status: int
    attempts: int
    records: int
    rejected: int
    ignored_elements: int
    bytes: int  # decoded body bytes
    seconds: float
    etag: str | None
    last_modified: str | None
    date: str | None  # the provider's Date header


def redact(url: str) -> str:
    """``url`` without user:password, fit for messages and logs."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc="***@" + parts.netloc.rsplit("@", 1)[1]))


_SECONDS = re.compile(r"\d+(\.\d+)?")


def parse_retry_after(value: str | None, now: dt.datetime) -> float | None:
    """Seconds to wait from a Retry-After value (delay-seconds or an HTTP-date).

    ``now`` is the provider's clock when known (its Date header), so a skewed local clock
    does not shorten or stretch the wait. ``None`` when absent or unreadable.
    """
    if value is None:
        return None
    value = value.strip()
    if _SECONDS.fullmatch(value):
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - now).total_seconds())


def _provider_now(response: httpx.Response) -> dt.datetime:
    date = response.headers.get("date")
    if date:
        try:
            parsed = email.utils.parsedate_to_datetime(date)
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
        except (TypeError, ValueError, IndexError):
            pass
    return dt.datetime.now(dt.UTC)


class _Retryable(Exception):
    """Internal: this attempt failed in a way another attempt may not."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.retry_after = retry_after


async def fetch_snapshot(
    url: str,
    fmt: SnapshotFormat | str,
    sink: Sink,
    *,
    policy: FetchPolicy | None = None,
    auth: AuthHeader | None = None,
    context: MappingContext | None = None,
    limits: ParseLimits | None = None,
    checkpoint: Checkpoint | None = None,
    pace: Checkpoint | None = None,
    client: httpx.AsyncClient | None = None,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    rng: random.Random | None = None,
) -> FetchResult:
    """Fetch ``url``, parse it as ``fmt`` and hand every record to ``sink`` in batches.

    ``checkpoint`` is awaited before each request and before each batch goes to the
    sink: it raises to stop the fetch (a lost lease, a cancellation), and whatever it
    raises propagates unchanged, as does anything the sink raises. ``pace`` is awaited
    before each batch goes to the sink, with no write in flight and the body not read
    meanwhile: it may rest there to leave the machine to searches
    (:class:`~herald.ingest.pacing.Pacer`). ``client`` lets the
    caller share connection pools; ``sleep`` and ``rng`` make the waits testable.
    """
    policy = policy or FetchPolicy()
    chosen = snapshot_format(fmt) if isinstance(fmt, str) else fmt
    shown = redact(url)
    if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
        raise ValueError(f"{shown}: a snapshot URL is http:// or https:// with a host")
    headers = {"Accept": "application/xml, text/xml;q=0.9, */*;q=0.1"}
    if auth is not None:
        headers[auth.name] = auth.value.reveal()
    # httpx drops Authorization on a redirect to another origin, but not other names.
    follow = auth is None or auth.name.lower() == "authorization"
    timeout = httpx.Timeout(
        policy.read_timeout, connect=policy.connect_timeout, pool=policy.connect_timeout
    )
    own = client is None
    http = client or httpx.AsyncClient()
    # The deadline starts once the client exists: building one (its TLS context) is
    # local work that a loaded machine can make slow, not time spent on the provider.
    started = time.monotonic()
    deadline = started + policy.deadline
    attempt = 0
    try:
        while True:
            attempt += 1
            if checkpoint is not None:
                await checkpoint()
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadlineExceeded(
                    f"{shown}: the fetch deadline of {policy.deadline:g} s passed",
                    attempts=attempt - 1,
                )
            attempt_state = _Attempt(
                shown, chosen, sink, policy, context, limits, (checkpoint, pace), attempt, started
            )
            scope = asyncio.timeout(remaining)
            try:
                async with scope:
                    return await attempt_state.run(http, url, headers, timeout, follow)
            except _Retryable as failure:
                reason, wait = str(failure), failure.retry_after
            except TimeoutError:
                if not scope.expired():
                    raise  # not our deadline: the sink's or the checkpoint's own timeout
                attempt_state.check_partial(f"the fetch deadline of {policy.deadline:g} s passed")
                raise DeadlineExceeded(
                    f"{shown}: the fetch deadline of {policy.deadline:g} s passed "
                    f"during attempt {attempt}",
                    attempts=attempt,
                ) from None
            if attempt >= policy.attempts:
                raise TransportError(
                    f"{shown}: {reason}, after {attempt} attempt{'s' if attempt > 1 else ''}",
                    attempts=attempt,
                    retry_after=wait,
                )
            delay = wait if wait is not None else policy.backoff.delay(attempt, rng)
            if wait is not None and (
                wait > policy.max_retry_after or time.monotonic() + wait > deadline
            ):
                raise TransportError(
                    f"{shown}: {reason}; the provider asks to wait {wait:g} s, longer than "
                    "this fetch may wait",
                    attempts=attempt,
                    retry_after=wait,
                )
            if time.monotonic() + delay > deadline:
                raise DeadlineExceeded(
                    f"{shown}: {reason}; no time left for attempt {attempt + 1} before the "
                    f"deadline of {policy.deadline:g} s",
                    attempts=attempt,
                )
            log.warning(
                "fetch %s: attempt %d failed (%s); retrying in %.2f s",
                shown,
                attempt,
                reason,
                delay,
            )
            await sleep(delay)
    finally:
        if own:
            await http.aclose()


class _Attempt:
    """One HTTP request and its body, parsed and delivered as it streams."""

    def __init__(
        self,
        shown: str,
        fmt: SnapshotFormat,
        sink: Sink,
        policy: FetchPolicy,
        context: MappingContext | None,
        limits: ParseLimits | None,
        hooks: tuple[Checkpoint | None, Checkpoint | None],
        attempt: int,
        started: float,
    ) -> None:
        self.shown = shown
        self.sink = sink
        self.policy = policy
        self.checkpoint, self.pace = hooks
        self.attempt = attempt
        self.started = started
        self.parser: StreamParser[Plan] = new_parser(fmt, context, limits)
        self.delivered = 0  # batches handed to the sink
        self.records = 0
        self.rejected = 0
        self.received = 0
        self._records: list[Plan] = []  # parsed, not yet in a batch
        self._rejected: list[Rejected] = []
        self._writing: asyncio.Future[None] | None = None

    async def run(
        self,
        http: httpx.AsyncClient,
        url: str,
        headers: dict[str, str],
        limits: httpx.Timeout,
        follow: bool,
    ) -> FetchResult:
        try:
            async with http.stream(
                "GET", url, headers=headers, timeout=limits, follow_redirects=follow
            ) as response:
                status = response.status_code
                if status >= 300:
                    self._refuse_status(response)
                async for chunk in response.aiter_bytes():
                    await self._feed(chunk)
                await self._feed(None)
                await self._wait_writing()
        except httpx.HTTPError as exc:
            await self._abandon()
            what = type(exc).__name__
            detail = str(exc) or "no detail"
            self.check_partial(f"{what} while reading the body: {detail}")
            raise _Retryable(f"{what}: {detail}") from None
        except BaseException:
            await self._abandon()
            raise
        stats = self.parser.stats
        return FetchResult(
            url=self.shown,
            status=status,
            attempts=self.attempt,
            records=self.records,
            rejected=self.rejected,
            ignored_elements=stats.ignored_elements,
            bytes=self.received,
            seconds=time.monotonic() - self.started,
            etag=response.headers.get("etag"),
            last_modified=response.headers.get("last-modified"),
            date=response.headers.get("date"),
        )

    def _refuse_status(self, response: httpx.Response) -> None:
        status = response.status_code
        if status >= 500 or status == 429:
            wait = None
            if status in _RETRY_AFTER_STATUSES:
                wait = parse_retry_after(
                    response.headers.get("retry-after"), _provider_now(response)
                )
            raise _Retryable(f"HTTP {status} {response.reason_phrase}".rstrip(), wait)
        if 300 <= status < 400:
            where = response.headers.get("location", "?")
            message = f"{self.shown}: HTTP {status} redirect to {redact(where)} not followed"
            raise HttpStatusError(message, status=status, attempts=self.attempt)
        raise HttpStatusError(
            f"{self.shown}: HTTP {status} {response.reason_phrase}".rstrip()
            + " (not retried: the request itself was refused)",
            status=status,
            attempts=self.attempt,
        )

    async def _feed(self, chunk: bytes | None) -> None:
        parser = self.parser
        try:
            if chunk is None:
                parser.close()
            else:
                self.received += len(chunk)
                limit = self.policy.max_body_bytes
                if limit is not None and self.received > limit:
                    raise DocumentError(f"the body exceeds {limit} bytes", self.received)
                parser.feed(chunk)
        except DocumentError as exc:
            # Records mapped before the break still go nowhere: the run fails whole.
            raise SnapshotRefused(
                f"{self.shown}: {exc}",
                attempts=self.attempt,
                records=self.records,
                rejected=self.rejected,
                offset=exc.offset,
            ) from None
        size = self.policy.batch_size
        if parser.pending >= size or chunk is None:
            records, rejected = parser.take()
            self._records.extend(records)
            self._rejected.extend(rejected)
            # Exactly batch_size records per batch (the last one may be smaller).
            while len(self._records) >= size or (
                chunk is None and (self._records or self._rejected)
            ):
                batch = Batch(self._records[:size], self._rejected)
                del self._records[:size]
                self._rejected = []
                await self._deliver(batch)

    async def _deliver(self, batch: Batch) -> None:
        await self._wait_writing()
        if self.pace is not None:
            await self.pace()
        if self.checkpoint is not None:
            await self.checkpoint()
        self.delivered += 1
        self.records += len(batch.records)
        self.rejected += len(batch.rejected)
        # The sink writes while the next chunks are read and parsed; one write at a time.
        self._writing = asyncio.ensure_future(self.sink(batch))

    async def _wait_writing(self) -> None:
        if self._writing is not None:
            writing, self._writing = self._writing, None
            await writing

    async def _abandon(self) -> None:
        if self._writing is not None:
            writing, self._writing = self._writing, None
            writing.cancel()
            await asyncio.gather(writing, return_exceptions=True)

    def check_partial(self, reason: str) -> None:
        """Raise :class:`PartialFetch` if the sink already has part of this snapshot."""
        if self.delivered:
            raise PartialFetch(
                f"{self.shown}: {reason}, after {self.records} records and {self.rejected} "
                "rejects were delivered: the snapshot is incomplete",
                attempts=self.attempt,
                records=self.records,
                rejected=self.rejected,
            )
