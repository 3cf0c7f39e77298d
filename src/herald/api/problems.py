"""Errors as ``application/problem+json`` (RFC 9457), and the mapping of Herald's errors.

Every error the API answers has ``type``, ``title``, ``status``, ``detail`` and
``instance`` (the request path). Bad input is never a 500: validation, unknown kinds,
oversized payloads and values the database cannot store all map to 4xx answers.
"""

from __future__ import annotations

import http
import logging
from collections.abc import Mapping
from typing import Any

import psycopg
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from herald.errors import (
    AdmissionError,
    IdempotencyConflict,
    PayloadTooLarge,
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
    """A 500 is still a problem document (the error itself goes to the log)."""

    async def on_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path, exc_info=exc)
        return problem_response(request, 500, "internal", "internal error; see the server log")

    app.add_exception_handler(Exception, on_error)
