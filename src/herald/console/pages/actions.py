"""Every manual action goes the same way: review, reason, confirm, run, audit.

``/actions/<name>?target=..`` (GET from a link or a selection, or POST from an edit
form) shows what the action will do to each target and asks for a reason; nothing is
changed. The confirmation posts to ``/actions/<name>/run`` with the session's CSRF token;
the run checks the scope again, performs the action target by target (each in its own
transaction with its audit record, written by the engine's function), keeps the outcome
for the next page and redirects there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from herald.console.forms import read_form
from herald.console.registry import Action, Done, Registry, Review
from herald.console.render import render
from herald.console.sessions import Caller, set_flash
from herald.console.web import Invalid, Missing, Signed, see_other
from herald.errors import HeraldError
from herald.ops.audit import MAX_REASON

router = APIRouter()
RESERVED = frozenset({"target", "reason", "csrf"})


class UnknownAction(Missing):
    """No action of that name is registered."""


def _action(request: Request, name: str) -> Action:
    registry = request.app.state.registry
    assert isinstance(registry, Registry)
    action = registry.action(name)
    if action is None:
        raise UnknownAction(f"there is no action {name!r}")
    return action


def _targets(action: Action, values: Sequence[str]) -> list[str]:
    targets = list(dict.fromkeys(v.strip() for v in values if v.strip()))  # unique, in order
    if not targets:
        raise Invalid("select at least one item to act on")
    if len(targets) > action.max_targets:
        raise Invalid(f"{action.label} acts on at most {action.max_targets} items at once")
    return targets


async def _review_page(
    request: Request,
    caller: Caller,
    action: Action,
    targets: list[str],
    params: Mapping[str, str],
    *,
    reason: str = "",
    problem: str | None = None,
) -> Response:
    review: Review = await action.review(caller, targets, params)
    option_names = {option.name for option in review.options}
    carried = {k: v for k, v in review.params.items() if k not in option_names}
    return await render(
        request,
        "review.html",
        caller,
        status=422 if problem else 200,
        action=action,
        review=review,
        targets=targets,
        carried=carried,
        chosen={name for name in option_names if params.get(name) == "on"},
        reason=reason,
        problem=problem,
        max_reason=MAX_REASON,
        back=action.back(targets),
    )


@router.api_route("/actions/{name}", methods=["GET", "POST"])
async def review(name: str, request: Request, caller: Signed) -> Response:
    action = _action(request, name)
    caller.require(action.scope)
    if request.method == "POST":
        form = await read_form(request)
        values, params = form.getlist("target"), {k: form[k] for k in form if k not in RESERVED}
    else:
        query = request.query_params
        values = query.getlist("target")
        params = {k: query[k] for k in query if k not in RESERVED}
    targets = _targets(action, values)
    return await _review_page(request, caller, action, targets, params)


@router.post("/actions/{name}/run")
async def run(name: str, request: Request, caller: Signed) -> Response:
    action = _action(request, name)
    caller.require(action.scope)
    form = await read_form(request)
    targets = _targets(action, form.getlist("target"))
    params = {k: form[k] for k in form if k not in RESERVED}
    reason = form.get("reason", "").strip()
    if not reason or len(reason) > MAX_REASON:
        problem = (
            "Say why: every action needs a reason, which the audit log keeps."
            if not reason
            else f"The reason is longer than {MAX_REASON} characters."
        )
        return await _review_page(
            request, caller, action, targets, params, reason=reason, problem=problem
        )
    done: list[dict[str, str | None]] = []
    refused: list[str] = []
    for target in targets:
        try:
            outcome = await action.perform(caller, target, reason, params)
        except (HeraldError, ValueError, Missing) as exc:
            refused.append(f"{target}: {exc}")
            continue
        if isinstance(outcome, Done):
            done.append({"message": outcome.message, "link": outcome.link})
        else:
            done.append({"message": outcome, "link": None})
    await set_flash(
        caller,
        {"action": action.label, "reason": reason, "done": done, "refused": refused},
    )
    return see_other(request, action.back(targets))
