"""Tracing with no provider configured (the default): nothing is started for a post that
carries no trace context, and a caller's context still passes through untouched - from
the request to the job's payload and on to each platform call."""

from __future__ import annotations

import httpx

from herald.social import tracing
from tests.social.echo import echo_server

CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{CALLER_TRACE}-00f067aa0ba902b7-01"


def admitted_context(headers: dict[str, str]) -> dict[str, str]:
    """What the admission stores with the job for a request with ``headers``."""
    with (
        tracing.traced_request(headers, "POST /social/posts"),
        tracing.traced_admission("key") as carrier,
    ):
        return carrier


def test_a_request_without_trace_context_stores_none() -> None:
    assert admitted_context({"content-type": "application/json"}) == {}


def test_a_callers_trace_context_is_stored_with_the_job() -> None:
    stored = admitted_context({"traceparent": TRACEPARENT})
    assert stored["traceparent"].split("-")[1] == CALLER_TRACE


async def sent_traceparent(payload: dict[str, object]) -> str | None:
    """The traceparent header a platform call of a step of this job's payload carries."""
    async with echo_server() as echo:
        transport = tracing.TracingTransport(httpx.AsyncHTTPTransport())
        async with httpx.AsyncClient(transport=transport) as client:
            with tracing.traced_step(payload, job_id=1, attempt=1, step="publish"):
                response = await client.get(f"http://127.0.0.1:{echo.port}/api/v1/statuses")
        for line in response.text.split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "traceparent":
                return value.strip()
        return None


async def test_a_platform_call_of_an_untraced_job_carries_no_trace_context() -> None:
    assert await sent_traceparent({"post_id": 1}) is None


async def test_a_platform_call_carries_the_callers_trace_context_on() -> None:
    stored = admitted_context({"traceparent": TRACEPARENT})
    sent = await sent_traceparent({"post_id": 1, "trace": stored})
    assert sent is not None and sent.split("-")[1] == CALLER_TRACE
