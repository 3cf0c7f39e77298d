"""What each platform's error answers and rate-limit headers look like on the wire.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): not on
the production path. The sandbox platform server and the failure simulator both answer
in these shapes, so the adapters meet exactly the errors the real platforms send.

* Mastodon: ``{"error": "..."}``; ``X-RateLimit-Limit/Remaining`` and
  ``X-RateLimit-Reset`` as an ISO 8601 time; 429 ``{"error": "Too many requests"}``.
* Bluesky (XRPC): ``{"error": "Name", "message": "..."}``; ``RateLimit-Limit``,
  ``RateLimit-Remaining``, ``RateLimit-Reset`` (epoch seconds), ``RateLimit-Policy``
  (``limit;w=window``); 429 ``RateLimitExceeded``.
* Facebook (Graph): ``{"error": {"message", "type", "code", "error_subcode",
  "fbtrace_id"}}``, with HTTP 400 even for throttling (code 80001 for a page's quota),
  whose wait is in ``X-Business-Use-Case-Usage`` (``estimated_time_to_regain_access``,
  minutes).
* Webhook receivers: any JSON; ``Retry-After`` on 429 and 503.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

XRPC_NAMES = {
    400: "InvalidRequest",
    401: "AuthenticationRequired",
    403: "Forbidden",
    404: "NotFound",
    413: "PayloadTooLarge",
    429: "RateLimitExceeded",
    500: "InternalServerError",
    501: "MethodNotImplemented",
    502: "UpstreamFailure",
    503: "NotEnoughResources",
    504: "UpstreamTimeout",
}

GRAPH_DEFAULTS = {
    # status: (code, type, message)
    400: (100, "OAuthException", "(#100) Invalid parameter"),
    401: (190, "OAuthException", "Invalid OAuth access token."),
    403: (200, "OAuthException", "(#200) Permissions error"),
    500: (
        2,
        "OAuthException",
        "An unexpected error has occurred. Please retry your request later.",
    ),
    502: (2, "OAuthException", "Service temporarily unavailable"),
    503: (2, "OAuthException", "Service temporarily unavailable"),
}


def iso_ms(epoch: float) -> str:
    moment = datetime.fromtimestamp(epoch, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def error_body(
    platform: str,
    status: int,
    message: str,
    *,
    name: str | None = None,
    code: int | None = None,
    subcode: int | None = None,
    trace_id: str = "AzHerald00",
) -> dict[str, Any]:
    if platform == "bluesky":
        return {"error": name or XRPC_NAMES.get(status, "InternalServerError"), "message": message}
    if platform == "facebook":
        default_code, kind, _ = GRAPH_DEFAULTS.get(status, GRAPH_DEFAULTS[400])
        error: dict[str, Any] = {
            "message": message,
            "type": kind,
            "code": default_code if code is None else code,
            "fbtrace_id": trace_id,
        }
        if subcode is not None:
            error["error_subcode"] = subcode
        if status >= 500:
            error["is_transient"] = True
        return {"error": error}
    return {"error": message}


def default_message(platform: str, status: int) -> str:
    if platform == "facebook":
        return GRAPH_DEFAULTS.get(status, GRAPH_DEFAULTS[400])[2]
    if status == 429:
        return "Rate Limit Exceeded" if platform == "bluesky" else "Too many requests"
    if status >= 500:
        return "Internal Server Error"
    return "Bad Request"


def rate_headers(
    platform: str,
    *,
    limit: int,
    remaining: int,
    reset: float,
    window: float,
    now: float,
    owner: str = "",
) -> dict[str, str]:
    """The quota headers ``platform`` sends on every answer; ``reset`` is an epoch time."""
    remaining = max(0, remaining)
    if platform == "mastodon":
        return {
            "X-RateLimit-Limit": str(limit),
            "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": iso_ms(reset),
        }
    if platform == "bluesky":
        return {
            "RateLimit-Limit": str(limit),
            "RateLimit-Remaining": str(remaining),
            "RateLimit-Reset": str(math.ceil(reset)),
            "RateLimit-Policy": f"{limit};w={round(window)}",
        }
    if platform == "facebook":
        used = 100 if limit <= 0 else min(100, round(100 * (limit - remaining) / limit))
        regain = math.ceil(max(0.0, reset - now) / 60) if remaining <= 0 else 0
        usage = {
            "type": "pages",
            "call_count": used,
            "total_cputime": max(1, used // 4),
            "total_time": max(1, used // 4),
            "estimated_time_to_regain_access": regain,
        }
        return {
            "X-Business-Use-Case-Usage": json.dumps({owner or "0": [usage]}),
            "X-App-Usage": json.dumps(
                {
                    "call_count": used,
                    "total_cputime": usage["total_cputime"],
                    "total_time": usage["total_time"],
                }
            ),
        }
    return {
        "RateLimit-Limit": str(limit),
        "RateLimit-Remaining": str(remaining),
        "RateLimit-Reset": str(max(0, math.ceil(reset - now))),
    }


def rate_limited(
    platform: str, *, limit: int, reset: float, window: float, now: float, owner: str = ""
) -> tuple[int, dict[str, str], dict[str, Any]]:
    """Status, headers and body of the platform's "over the limit" answer."""
    headers = rate_headers(
        platform, limit=limit, remaining=0, reset=reset, window=window, now=now, owner=owner
    )
    if platform == "facebook":
        body = error_body(
            "facebook",
            400,
            "There have been too many calls to this Page account. Wait a bit and try again.",
            code=80001,
        )
        body["error"]["is_transient"] = True
        return 400, headers, body
    if platform == "webhook":
        headers["Retry-After"] = str(max(1, math.ceil(reset - now)))
    return 429, headers, error_body(platform, 429, default_message(platform, 429))
