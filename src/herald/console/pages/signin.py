"""Signing in with an API key and signing out.

A key needs the ``read`` scope (or ``admin``) to use the console. With authentication
off (``HERALD_API_AUTH=off``, a local demo) the sign-in page offers to enter without a
key, as the API then serves everyone; such a session is refused once auth is on again.
"""

from __future__ import annotations

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.api.auth import ANONYMOUS
from herald.console.render import render
from herald.console.sessions import api_state as state_of
from herald.console.sessions import (
    check_signin_form,
    console_settings,
    find_key,
    forget_signin_token,
    remember_signin_token,
    sign_in,
    sign_out,
    signin_token,
)
from herald.console.web import Signed, see_other

router = APIRouter()


def _next(value: str | None) -> str:
    """Where to go after signing in: a console path, never another site."""
    if not value or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return "/"
    return value


async def _form(
    request: Request, status: int = 200, problem: str | None = None, target: str | None = None
) -> Response:
    token = signin_token(request)
    page = await render(
        request,
        "signin.html",
        None,
        status=status,
        problem=problem,
        next=target or _next(request.query_params.get("next")),
        auth=state_of(request).api.auth,
        signin_csrf=token,
    )
    remember_signin_token(request, page, token)
    return page


@router.get("/signin")
async def signin_page(request: Request) -> Response:
    return await _form(request)


@router.post("/signin")
async def signin(request: Request) -> Response:
    form = await check_signin_form(request)
    state = state_of(request)
    target = _next(form.get("next"))
    if not state.api.auth:
        principal = ANONYMOUS
    else:
        token = form.get("api_key", "").strip()
        found = await find_key(state, token) if token else None
        if found is None:
            return await _form(request, 401, "That API key is unknown or has been revoked.", target)
        if not found.allows("read"):
            return await _form(
                request,
                403,
                f"API key {found.name!r} lacks the read scope the console needs.",
                target,
            )
        principal = found
    response = see_other(request, target)
    await sign_in(request, response, principal, console_settings(request))
    forget_signin_token(request, response)
    return response


@router.post("/signout")
async def signout(request: Request, caller: Signed) -> Response:
    response = see_other(request, "/signin")
    await sign_out(caller, request, response)
    return response
