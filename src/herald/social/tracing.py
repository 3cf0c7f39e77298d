"""OpenTelemetry spans from the HTTP request to each platform call, across the queue.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): the
``POST /social/posts`` route opens a server span (continuing a caller's
``traceparent``), admission a child span whose context is stored in the job's payload
(``trace``), so every attempt and step of the job - in whatever worker, after whatever
retry - continues that trace; each platform request is a client span whose W3C
``traceparent`` goes downstream in its headers (:class:`TracingTransport`).

Off by default: without a configured provider nothing is recorded, and where no trace
context is in play either (no ``traceparent`` came with the request) no span is even
started (:func:`_silent`), so tracing costs a post nothing. A caller's context still
passes through to the job and the platforms when it is off.
``HERALD_OTEL_EXPORTER=otlp`` exports over OTLP/HTTP (needs
``opentelemetry-exporter-otlp-proto-http``; endpoint from the standard
``OTEL_EXPORTER_OTLP_*`` variables), ``console`` prints spans; tests pass a provider
with an in-memory exporter to :func:`use_provider`.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx
from opentelemetry import baggage, trace
from opentelemetry.propagate import extract, get_global_textmap, inject
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SpanExporter,
)
from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

from herald.config import ConfigError

EXPORTER_VARIABLE = "HERALD_OTEL_EXPORTER"
INSTRUMENTATION = "herald.social"
_provider: trace.TracerProvider | None = None


def use_provider(provider: trace.TracerProvider | None) -> None:
    """Send this process's social spans to ``provider`` (None: the global one)."""
    global _provider
    _provider = provider


def configure_from_env(environ: Mapping[str, str] | None = None) -> TracerProvider | None:
    """The provider ``HERALD_OTEL_EXPORTER`` asks for (off, console, otlp), installed."""
    env = os.environ if environ is None else environ
    choice = env.get(EXPORTER_VARIABLE, "off").strip().lower() or "off"
    if choice == "off":
        return None
    exporter: SpanExporter
    if choice == "console":
        exporter = ConsoleSpanExporter()
    elif choice == "otlp":
        try:
            module = importlib.import_module(
                "opentelemetry.exporter.otlp.proto.http.trace_exporter"
            )
        except ImportError:
            raise ConfigError(
                f"{EXPORTER_VARIABLE}=otlp needs opentelemetry-exporter-otlp-proto-http installed"
            ) from None
        exporter = module.OTLPSpanExporter()
    else:
        raise ConfigError(f"{EXPORTER_VARIABLE} must be off, console or otlp, got {choice!r}")
    service = env.get("OTEL_SERVICE_NAME", "herald")
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(BatchSpanProcessor(exporter))
    use_provider(provider)
    return provider


def tracer() -> Tracer:
    source = _provider if _provider is not None else trace.get_tracer_provider()
    return source.get_tracer(INSTRUMENTATION)


# What get_tracer_provider() answers while no provider is installed: its spans are no-ops.
_NO_OP_PROVIDERS = (trace.ProxyTracerProvider, trace.NoOpTracerProvider)


def _silent() -> bool:
    """Nothing records spans and no trace context is current: a span would be a no-op
    and an ``inject`` would write nothing, so the callers skip both. (With a context
    current - a caller's ``traceparent`` - the no-op spans still carry it on.)"""
    return (
        _provider is None
        and isinstance(trace.get_tracer_provider(), _NO_OP_PROVIDERS)
        and not trace.get_current_span().get_span_context().is_valid
        and not baggage.get_all()
    )


@contextmanager
def traced_request(headers: Mapping[str, str], name: str) -> Iterator[None]:
    """A server span for an HTTP request, continuing the caller's ``traceparent``."""
    if _silent() and not any(field in headers for field in get_global_textmap().fields):
        yield
        return
    parent = extract(dict(headers))
    with tracer().start_as_current_span(name, context=parent, kind=SpanKind.SERVER):
        yield


@contextmanager
def traced_admission(idempotency_key: str) -> Iterator[dict[str, str]]:
    """A span for admitting a post; yields its context to store with the job."""
    if _silent():
        yield {}
        return
    with tracer().start_as_current_span("social.admission") as span:
        span.set_attribute("herald.idempotency_key_length", len(idempotency_key))
        carrier: dict[str, str] = {}
        inject(carrier)
        yield carrier


@contextmanager
def traced_step(payload: Mapping[str, Any], job_id: int, attempt: int, step: str) -> Iterator[None]:
    """A span for one step of one attempt, child of the admission's stored context."""
    stored = payload.get("trace")
    if not stored and _silent():
        yield
        return
    parent = extract(dict(stored)) if isinstance(stored, Mapping) else None
    with tracer().start_as_current_span(
        f"social.post {step}", context=parent, kind=SpanKind.CONSUMER
    ) as span:
        span.set_attribute("herald.job_id", job_id)
        span.set_attribute("herald.attempt", attempt)
        span.set_attribute("herald.step", step)
        yield


class TracingTransport(httpx.AsyncBaseTransport):
    """A client span per platform request, with ``traceparent`` sent downstream."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if _silent():
            return await self._inner.handle_async_request(request)
        platform = str(request.extensions.get("herald.platform") or "http")
        name = f"{platform} {request.method} {request.url.path}"
        with tracer().start_as_current_span(name, kind=SpanKind.CLIENT) as span:
            span.set_attribute("http.request.method", request.method)
            span.set_attribute("server.address", request.url.host)
            span.set_attribute("url.path", request.url.path)
            carrier: dict[str, str] = {}
            inject(carrier)
            for name_, value in carrier.items():
                request.headers[name_] = value
            try:
                response = await self._inner.handle_async_request(request)
            except Exception as exc:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                raise
            span.set_attribute("http.response.status_code", response.status_code)
            if response.status_code >= 400:
                span.set_status(Status(StatusCode.ERROR, f"HTTP {response.status_code}"))
            return response

    async def aclose(self) -> None:
        await self._inner.aclose()
