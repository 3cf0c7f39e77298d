"""Errors as ``application/problem+json`` (RFC 9457), and the mapping of Herald's errors.

Every error the API answers has ``type``, ``title``, ``status``, ``detail`` and
``instance`` (the request path). Bad input is never a 500: validation, unknown kinds,
oversized payloads and values the database cannot store all map to 4xx answers.
"""

from __future__ import annotations

import http
import logging
import math
from collections.abc import Mapping
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from herald.errors import (
    AdmissionError,
    IdempotencyConflict,
    PayloadTooLarge,
    QuotaExceeded,
    UnknownKind,
)

log = logging.getLogger(__name__)

MEDIA_TYPE = "application/problem+json"
TYPE_BASE = "https://herald.dev/problems/"


class Problem(Exception):
    """Raised by a route to answer with a problem document."""

    def __init__(
        self,
        status: int,
        slug: str,
        detail: str,
        *,
        headers: Mapping[str, str] | None = None,
        **extensions: Any,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.slug = slug
        self.detail = detail
        self.headers = dict(headers or {})
        self.extensions = extensions


def not_found(what: str, ident: object) -> Problem:
    return Problem(404, "not-found", f"no {what} {ident}")


def problem_response(
    request: Request,
    status: int,
    slug: str,
    detail: str,
    *,
    headers: Mapping[str, str] | None = None,
    extensions: Mapping[str, Any] | None = None,
) -> JSONResponse:
    body: dict[str, Any] = {
        "type": TYPE_BASE + slug,
        "title": _title(status),
        "status": status,
        "detail": detail,
        "instance": request.url.path,
    }
    body.update(jsonable_encoder(dict(extensions or {})))
    return JSONResponse(
        body, status_code=status, headers=dict(headers or {}), media_type=MEDIA_TYPE
    )


def _title(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Error"


# Declared on routes so the OpenAPI document shows the error format.
PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["type", "title", "status", "detail", "instance"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
    },
}


def responses(*statuses: int) -> dict[int | str, dict[str, Any]]:
    return {
        status: {"description": _title(status), "content": {MEDIA_TYPE: {"schema": PROBLEM_SCHEMA}}}
        for status in statuses
    }


def _validation_errors(exc: RequestValidationError) -> list[dict[str, Any]]:
    found = []
    for error in exc.errors():
        found.append(
            {
                "loc": [str(part) for part in error.get("loc", ())],
                "msg": str(error.get("msg", "")),
                "type": str(error.get("type", "")),
            }
        )
    return found


def _is_json(content_type: str) -> bool:
    media = content_type.split(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def _unsupported_media_type(request: Request, exc: RequestValidationError) -> str | None:
    """A body sent as something else than JSON (or with no media type) is a 415, not a
    list of missing fields."""
    declared = request.headers.get("content-type")
    about_body = any(tuple(e.get("loc", ()))[:1] == ("body",) for e in exc.errors())
    length = request.headers.get("content-length", "0")
    sent = "chunked" in request.headers.get("transfer-encoding", "") or (
        length.isdigit() and int(length) > 0
    )
    if not (about_body and sent) or (declared is not None and _is_json(declared)):
        return None
    given = f"not {declared.split(';')[0].strip()}" if declared else "and say so in Content-Type"
    return f"the request body must be application/json, {given}"


def _malformed_json(exc: RequestValidationError) -> str | None:
    """What is wrong with a body that is not JSON at all, and where."""
    for error in exc.errors():
        if error.get("type") == "json_invalid":
            loc = tuple(error.get("loc", ()))
            where = f" (at character {loc[1]})" if len(loc) > 1 else ""
            why = (error.get("ctx") or {}).get("error") or "it cannot be parsed"
            return f"the request body is not valid JSON: {why}{where}"
    return None


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into a problem document."""

    async def on_problem(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, Problem)
        return problem_response(
            request,
            exc.status,
            exc.slug,
            exc.detail,
            headers=exc.headers,
            extensions=exc.extensions,
        )

    async def on_validation(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        unsupported = _unsupported_media_type(request, exc)
        if unsupported is not None:
            return problem_response(request, 415, "unsupported-media-type", unsupported)
        malformed = _malformed_json(exc)
        if malformed is not None:
            return problem_response(request, 400, "invalid-json", malformed)
        errors = _validation_errors(exc)
        first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
        where = ".".join(first["loc"])
        detail = f"{where}: {first['msg']}" if where else str(first["msg"])
        return problem_response(request, 422, "validation", detail, extensions={"errors": errors})

    async def on_http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        slug = {400: "bad-request", 404: "not-found", 405: "method-not-allowed"}.get(
            exc.status_code, "http"
        )
        return problem_response(
            request, exc.status_code, slug, str(exc.detail), headers=exc.headers
        )

    async def on_admission(request: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, PayloadTooLarge):
            return problem_response(
                request, 413, "payload-too-large", str(exc), extensions={"limit": exc.limit}
            )
        if isinstance(exc, QuotaExceeded):
            return problem_response(
                request,
                429,
                "tenant-quota",
                str(exc),
                headers={"Retry-After": str(math.ceil(exc.retry_after))},
                extensions={"quota": exc.quota},
            )
        if isinstance(exc, UnknownKind):
            return problem_response(request, 422, "unknown-kind", str(exc))
        return problem_response(request, 422, "invalid-job", str(exc))

    async def on_idempotency(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, IdempotencyConflict)
        return problem_response(
            request, 409, "idempotency-conflict", str(exc), extensions={"job_id": exc.job_id}
        )

    async def on_data_error(request: Request, exc: Exception) -> JSONResponse:
        # A value PostgreSQL cannot hold (out of range, bad encoding) slipped past validation.
        log.info("request refused by the database as invalid data: %s", exc)
        return problem_response(
            request, 422, "invalid-value", f"the database refused a value: {exc}".strip()
        )

    app.add_exception_handler(Problem, on_problem)
    app.add_exception_handler(RequestValidationError, on_validation)
    app.add_exception_handler(StarletteHTTPException, on_http)
    app.add_exception_handler(AdmissionError, on_admission)
    app.add_exception_handler(IdempotencyConflict, on_idempotency)
    app.add_exception_handler(psycopg.errors.DataError, on_data_error)


def map_error(app: FastAPI, error: type[Exception], status: int, slug: str) -> None:
    """Answer ``error`` (raised on bad input by a lower layer) with ``status``."""

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        # A conflict with an active job names it, so the caller can follow that one.
        job_id = getattr(exc, "job_id", None)
        extensions = {"job_id": job_id} if isinstance(job_id, int) else None
        return problem_response(request, status, slug, str(exc), extensions=extensions)

    app.add_exception_handler(error, on_error)


def map_unavailable(app: FastAPI, error: type[Exception], what: str) -> None:
    """Answer ``error`` (a backing service failed) with 503; its text stays in the log,
    since it may quote what the service answered."""

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        log.warning("%s failed on %s %s: %s", what, request.method, request.url.path, exc)
        return problem_response(
            request,
            503,
            "unavailable",
            f"{what} is unavailable; try again later",
            headers={"Retry-After": "5"},
        )

    app.add_exception_handler(error, on_error)


def install_fallback(app: FastAPI) -> None:
    """A 500 is still a problem document, and its error is logged once, with its
    traceback. (A handler for ``Exception`` would not do: Starlette re-raises the error
    after it, and the server logs a second traceback.)"""
    app.add_middleware(_Unhandled)


class _Unhandled:
    """Answers an error no handler took with a 500 problem, before any server sees it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:
            if started:  # too late for another answer: let the server close the connection
                raise
            request = Request(scope)
            log.exception("unhandled error on %s %s", request.method, request.url.path)
            answer = problem_response(
                request, 500, "internal", "internal error; see the server log"
            )
            await answer(scope, receive, send)
