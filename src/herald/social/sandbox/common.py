"""Plumbing shared by the sandbox's platform handlers: early answers, quotas, latency.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): not on
the production path; the sandbox answers the calls each step makes.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from herald.social import wire
from herald.social.sandbox.state import SandboxState

Handler = Callable[[Request], Awaitable[Response]]


class Answer(Exception):
    """Stop handling and send this response (an error, a 429, ...)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def reply(data: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    return JSONResponse(data, status_code=status, headers=dict(headers or {}))


def fail(
    platform: str,
    status: int,
    message: str | None = None,
    headers: Mapping[str, str] | None = None,
    **kwargs: Any,
) -> Answer:
    body = wire.error_body(
        platform, status, message or wire.default_message(platform, status), **kwargs
    )
    return Answer(reply(body, status, headers))


def bearer(request: Request) -> str | None:
    raw = request.headers.get("authorization", "")
    scheme, _, value = raw.partition(" ")
    if scheme.lower() in ("bearer", "oauth") and value.strip():
        return value.strip()
    return None


def charge(
    state: SandboxState, platform: str, account: str, *buckets: str, owner: str = ""
) -> dict[str, str]:
    """Count one request in each bucket; the headers to send, or a rate-limit answer."""
    tightest: dict[str, Any] | None = None
    refused: dict[str, Any] | None = None
    for bucket in buckets or ("requests",):
        quota = state.admit(platform, account, bucket)
        if quota is None:
            continue
        if not quota["allowed"] and refused is None:
            refused = quota
        if tightest is None or quota["remaining"] < tightest["remaining"]:
            tightest = quota
    now = state.clock()
    if refused is not None:
        status, headers, body = wire.rate_limited(
            platform,
            limit=refused["limit"],
            reset=refused["reset"],
            window=refused["window"],
            now=now,
            owner=owner or account,
        )
        raise Answer(reply(body, status, headers))
    if tightest is None:
        return {}
    return wire.rate_headers(
        platform,
        limit=tightest["limit"],
        remaining=tightest["remaining"],
        reset=tightest["reset"],
        window=tightest["window"],
        now=now,
        owner=owner or account,
    )


def guarded(state: SandboxState, handler: Handler, *, platform: bool = True) -> Handler:
    """Adds the configured latency (platform routes) and turns :class:`Answer` into a reply."""

    async def run(request: Request) -> Response:
        if platform and state.config.latency > 0:
            await asyncio.sleep(state.config.latency)
        try:
            return await handler(request)
        except Answer as answer:
            return answer.response

    return run


async def json_object(request: Request, platform: str) -> dict[str, Any]:
    try:
        value = json.loads(await request.body() or b"null")
    except ValueError:
        raise fail(platform, 400, "the body is not valid JSON") from None
    if not isinstance(value, dict):
        raise fail(platform, 400, "the body must be a JSON object")
    return value


@dataclass
class Upload:
    data: bytes
    content_type: str


@dataclass
class Form:
    """A form body read whole, its files included, with the parser's spools closed."""

    fields: dict[str, list[str]] = field(default_factory=dict)
    files: dict[str, Upload] = field(default_factory=dict)

    def get(self, name: str, default: str | None = None) -> str | None:
        values = self.fields.get(name)
        return values[-1] if values else default

    def getlist(self, name: str) -> list[str]:
        return self.fields.get(name, [])


async def read_form(request: Request) -> Form:
    result = Form()
    async with request.form() as form:
        for name, value in form.multi_items():
            if isinstance(value, UploadFile):
                content_type = (value.content_type or "").split(";")[0].strip()
                result.files[name] = Upload(await value.read(), content_type)
            else:
                result.fields.setdefault(name, []).append(value)
    return result
