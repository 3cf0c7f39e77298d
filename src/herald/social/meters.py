"""Prometheus figures of the social application kept by the process that does the work.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): the
API counts the posts it accepts; a worker counts every platform call (outcome and
latency, by platform), every snooze a limit or the platform asked for, every post it
published or failed and what happened to credentials (a session refreshed, an account
marked for re-authorisation, a revocation). They join the engine's on ``/metrics``
(:meth:`herald.metrics.HeraldMetrics.include`) in the process that serves it - all of
them under ``herald up``, the API's under ``herald serve``. The figures every process
shares (posts by state, breakers, paused accounts) are read from the database at
scrape time instead (``metrics_social``).

Labels are bounded: a platform (one of four), an outcome, a reason or an action from
the fixed sets below. Nothing here ever sees a credential, an account or a message.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import httpx
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

from herald.social.adapters.base import PLATFORMS

CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
SNOOZE_REASONS = ("rate_limited", "paused", "quota", "breaker")
CREDENTIAL_ACTIONS = ("refresh", "reauth", "revoke")


def call_outcome(status: int | None, error: BaseException | None = None) -> str:
    """One of ok, client_error, unauthorized, rate_limited, server_error, timeout, network."""
    if error is not None:
        return "timeout" if isinstance(error, httpx.TimeoutException) else "network"
    assert status is not None
    if status == 429:
        return "rate_limited"
    if status in (401, 403):
        return "unauthorized"
    if status >= 500:
        return "server_error"
    return "client_error" if status >= 400 else "ok"


def _platform(name: object) -> str:
    text = str(name or "")
    return text if text in PLATFORMS else "other"


class SocialMeters(Collector):
    """The in-process counters of one social runtime (a collector of its own registry)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=False)
        self.posts = Counter(
            "herald_social_posts",
            "Posts accepted (API), published or failed for good (workers) in this process",
            ["platform", "outcome"],
            registry=self.registry,
        )
        self.calls = Counter(
            "herald_social_platform_calls",
            "Platform requests made by this process, by platform and outcome",
            ["platform", "outcome"],
            registry=self.registry,
        )
        self.call_seconds = Histogram(
            "herald_social_platform_call_seconds",
            "Platform request latency, by platform",
            ["platform"],
            buckets=CALL_BUCKETS,
            registry=self.registry,
        )
        self.snoozes = Counter(
            "herald_social_snoozes",
            "Post jobs put back without using an attempt: the platform's 429 "
            "(rate_limited), the account's pause, its token bucket (quota), an open breaker",
            ["platform", "reason"],
            registry=self.registry,
        )
        self.credentials = Counter(
            "herald_social_credentials",
            "Credential events: session refresh stored, account marked for "
            "re-authorisation, revocation (ok, failed, or local only)",
            ["platform", "action", "outcome"],
            registry=self.registry,
        )

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        yield from self.registry.collect()

    def post(self, platform: str, outcome: str) -> None:
        self.posts.labels(_platform(platform), outcome).inc()

    def call(self, platform: object, outcome: str, seconds: float) -> None:
        name = _platform(platform)
        self.calls.labels(name, outcome).inc()
        self.call_seconds.labels(name).observe(max(0.0, seconds))

    def snoozed(self, platform: str, reason: str) -> None:
        if reason not in SNOOZE_REASONS:
            raise ValueError(f"unknown snooze reason {reason!r}")
        self.snoozes.labels(_platform(platform), reason).inc()

    def credential(self, platform: str, action: str, outcome: str) -> None:
        if action not in CREDENTIAL_ACTIONS:
            raise ValueError(f"unknown credential action {action!r}")
        self.credentials.labels(_platform(platform), action, outcome).inc()


class MeteredTransport(httpx.AsyncBaseTransport):
    """Counts each platform request's outcome and latency (simulated faults included:
    to the worker they are the platform's answers)."""

    def __init__(self, inner: httpx.AsyncBaseTransport, meters: SocialMeters) -> None:
        self._inner = inner
        self._meters = meters

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        platform = request.extensions.get("herald.platform")
        if not platform:
            return await self._inner.handle_async_request(request)
        started = time.monotonic()
        try:
            response = await self._inner.handle_async_request(request)
        except Exception as exc:
            self._meters.call(platform, call_outcome(None, exc), time.monotonic() - started)
            raise
        self._meters.call(platform, call_outcome(response.status_code), time.monotonic() - started)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()
