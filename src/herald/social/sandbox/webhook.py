"""The sandbox's webhook receiver: verifies Standard Webhooks signatures, dedupes by id.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): stands in
for a partner's endpoint in tests, the demo and benchmarks.

As the specification asks of receivers: a missing header or a timestamp more than five
minutes off is refused (400), a bad signature is 401, and a ``webhook-id`` already
received is acknowledged again (200) without being recorded twice. An endpoint marked
gone answers 410.
"""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.social.adapters.webhook import TOLERANCE, secret_bytes, signature_valid
from herald.social.sandbox.common import charge, fail, guarded, reply
from herald.social.sandbox.state import SandboxState

P = "webhook"


def routes(state: SandboxState, gone: set[str]) -> list[Route]:
    async def receive(request: Request) -> Response:
        endpoint = state.account(P, request.path_params["id"])
        if endpoint is None:
            state.admit(P, "-")
            raise fail(P, 404, "no such endpoint")
        headers = charge(state, P, endpoint.id)
        if endpoint.id in gone:
            raise fail(P, 410, "this endpoint was withdrawn", headers)
        message_id = request.headers.get("webhook-id")
        raw_timestamp = request.headers.get("webhook-timestamp", "")
        signature = request.headers.get("webhook-signature")
        if not message_id or not raw_timestamp.isdigit() or not signature:
            raise fail(
                P, 400, "missing webhook-id, webhook-timestamp or webhook-signature", headers
            )
        timestamp = int(raw_timestamp)
        if abs(state.clock() - timestamp) > TOLERANCE:
            raise fail(P, 400, "webhook-timestamp is too far from now", headers)
        body = await request.body()
        key = secret_bytes(endpoint.credentials["signing_secret"])
        if not signature_valid(key, message_id, timestamp, body, signature):
            raise fail(P, 401, "invalid signature", headers)
        base = f"{str(request.base_url).rstrip('/')}/webhooks/{endpoint.id}/posts"
        with state.lock:
            seen = state.remembered(P, endpoint.id, message_id)
            if seen is not None:
                return reply({"id": seen, "url": f"{base}/{seen}", "duplicate": True}, 200, headers)
            try:
                event = json.loads(body)
                data = event["data"]
                text = str(data.get("text") or "")
                media = [str(m.get("sha256")) for m in data.get("media") or []]
            except (ValueError, KeyError, TypeError, AttributeError):
                raise fail(P, 400, "the body is not a post event", headers) from None
            post_id = state.next_id()
            state.add_post(
                P,
                endpoint.id,
                post_id,
                text,
                media,
                key=message_id,
                key_ttl=float("inf"),
                event=event,
            )
        return reply({"id": post_id, "url": f"{base}/{post_id}"}, 200, headers)

    return [Route("/webhooks/{id}", guarded(state, receive), methods=["POST"])]
