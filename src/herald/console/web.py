"""What every console page uses: the signed-in caller, query parameters, redirects.

Extensions import from here (through :mod:`herald.console`) too: ``Signed`` gives a
route the caller (and checks CSRF on every state-changing request), ``text`` and
``number`` read query parameters where an empty field means "not given".
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated
from urllib.parse import urlencode

from fastapi import Depends
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import RedirectResponse

from herald.console.sessions import Caller, signed_in

Signed = Annotated[Caller, Depends(signed_in)]
MAX_ID = 2**63 - 1


class Invalid(Exception):
    """A parameter the console cannot use: answered 422 with the message."""


class Missing(LookupError):
    """What a page or action names does not exist: answered 404 with the message."""


def text(params: QueryParams, name: str, max_length: int = 1000) -> str | None:
    """A text parameter, None when absent or empty."""
    value = params.get(name, "").strip()
    if not value:
        return None
    if len(value) > max_length or "\x00" in value:
        raise Invalid(f"{name} must be at most {max_length} characters")
    return value


def choice(params: QueryParams, name: str, allowed: tuple[str, ...]) -> str | None:
    value = text(params, name, 100)
    if value is not None and value not in allowed:
        raise Invalid(f"{name} must be one of {', '.join(allowed)}")
    return value


def number(params: QueryParams, name: str, low: int = 1, high: int = MAX_ID) -> int | None:
    value = text(params, name, 30)
    if value is None:
        return None
    if not value.isdigit() or not low <= int(value) <= high:
        raise Invalid(f"{name} must be a whole number from {low} to {high}")
    return int(value)


def moment(params: QueryParams, name: str) -> datetime | None:
    """A ``datetime-local`` field, read as UTC (the console shows every time in UTC)."""
    value = text(params, name, 40)
    if value is None:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(f"{name} must be a date and time such as 2025-01-31T14:30") from None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def identifier(value: str, what: str) -> int:
    """A target id from a form or path."""
    if not value.isdigit() or not 1 <= int(value) <= MAX_ID:
        raise Invalid(f"{what} must be a positive whole number, got {value[:40]!r}")
    return int(value)


def base(request: Request) -> str:
    """Where the console is mounted (``/ui``): every link starts here."""
    return str(request.scope.get("root_path") or "")


def query(**values: object) -> str:
    """``?a=1&b=2`` of the values given (None left out), or empty."""
    kept = {k: str(v) for k, v in values.items() if v is not None and v != ""}
    return "?" + urlencode(kept) if kept else ""


def see_other(request: Request, path: str) -> RedirectResponse:
    """Answer a form with 303 to a console page (``path`` under the console)."""
    if not path.startswith("/") or path.startswith("//"):
        path = "/"
    return RedirectResponse(base(request) + path, status_code=303)
