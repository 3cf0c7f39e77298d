"""Consumers: the outbox delivered to subscribed webhooks, and readable as a feed.

Every publication writes one event in the transaction of its pointer swap, and one
delivery (a Herald job) per subscription. A delivery posts the event signed in the
Standard Webhooks form; the event id is the ``webhook-id`` a receiver deduplicates on
(notifications are at-least-once). 2xx is delivered; 5xx, 429 and network errors are
retried with backoff; other 4xx are final. ``change`` tells a new generation
(``new``) from a correction of one readers saw (``correction``, naming ``supersedes``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol
from uuid import UUID

import httpx

from herald.context import JobContext
from herald.db import AsyncConn
from herald.errors import Permanent, Retry
from herald.generations import secrets
from herald.generations.errors import PlanError
from herald.generations.records import execute
from herald.generations.rows import Delivery, DeliveryListed, FeedEvent, Subscription
from herald.ops import audit, signing
from herald.ops.conn import to_json
from herald.ops.crypto import CipherError
from herald.rows import fetch_all, fetch_one, from_row, one_row

if TYPE_CHECKING:
    from herald.generations.shared import Generations


async def subscribe(
    conn: AsyncConn, *, name: str, url: str, datasets: Sequence[str], actor: str, reason: str
) -> tuple[Subscription, str]:
    """Create a subscription; returns it and its secret (shown once, never again)."""
    actor, reason = audit.require(actor, reason)
    if not url.startswith(("http://", "https://")):
        raise PlanError("a webhook url is http(s)")
    secret = signing.new_secret()
    sealed = secrets.seal(name, secret)  # stored sealed only; shown once, here
    async with conn.transaction():
        created = await one_row(
            conn,
            "generations_subscription_create",
            {
                "name": name,
                "url": url,
                "secret": sealed,
                "datasets": list(datasets),
                "created_by": actor,
            },
        )
        subscription = from_row(Subscription, created)
        await audit.record(
            conn,
            actor,
            "generations.subscribe",
            ("gen_subscription", subscription.id),
            reason,
            after=subscription.to_json(),
        )
    return subscription, secret


async def feed(
    conn: AsyncConn, *, after: int = 0, dataset: str | None = None, limit: int = 100
) -> list[FeedEvent]:
    if not 1 <= limit <= 1000:
        raise PlanError("limit must be between 1 and 1000")
    return await fetch_all(
        conn, "generations_feed", {"after": after, "dataset": dataset, "limit": limit}, FeedEvent
    )


async def delivery(conn: AsyncConn, delivery_id: int) -> Delivery | None:
    """A delivery with its subscription's address and secret and its event."""
    return await fetch_one(conn, "generations_delivery_get", {"id": delivery_id}, Delivery)


class Event(Protocol):
    """What a delivery's body is made of: its outbox event (a :class:`Delivery` or a
    :class:`FeedEvent` names it)."""

    @property
    def event_type(self) -> str: ...
    @property
    def event_id(self) -> UUID: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def payload(self) -> dict[str, Any]: ...


def body_of(event: Event) -> bytes:
    data = {
        "type": event.event_type,
        "event_id": str(event.event_id),
        "timestamp": event.created_at,
        "data": event.payload,
    }
    return (to_json(data) or "{}").encode()


async def deliver(gen: Generations, ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    delivery_id = int(payload["delivery_id"])
    async with gen.pool(ctx).connection() as conn:
        found = await delivery(conn, delivery_id)
    if found is None:
        raise Permanent(f"delivery {delivery_id} does not exist")
    if found.state != "pending":
        return {"state": found.state}
    body = body_of(found)
    msg_id = str(found.event_id)
    try:
        secret = secrets.unseal(found.subscription, found.secret)
    except (CipherError, PlanError) as exc:  # no key opens it: retrying cannot help
        raise Permanent(f"delivery {delivery_id}: the subscription's secret: {exc}") from None
    sent = {
        "content-type": "application/json",
        **signing.headers(secret.reveal(), msg_id, body),
    }
    status: int | None = None
    error: str | None = None
    try:
        async with httpx.AsyncClient(timeout=10.0) as http:
            response = await http.post(found.url, content=body, headers=sent)
        status = response.status_code
    except httpx.HTTPError as exc:
        error = f"{type(exc).__name__}: {exc}"[:500]
    delivered = status is not None and 200 <= status < 300
    retryable = status is None or status >= 500 or status == 429
    final = not delivered and (not retryable or ctx.attempt >= ctx.max_attempts)
    outcome = {
        "id": delivery_id,
        "status": status,
        "error": error,
        "delivered": delivered,
        "final": final,
    }
    if not delivered and not final:
        async with gen.pool(ctx).connection() as conn:
            await execute(conn, "generations_delivery_record", outcome)
        raise Retry(f"delivery {delivery_id}: {status or error}")
    # Settled: the outcome commits with the job's fenced completion.
    async with ctx.transaction() as conn:
        await execute(conn, "generations_delivery_record", outcome)
    return {
        "state": "delivered" if delivered else "failed",
        "status": status,
        "event": json.loads(body)["event_id"],
    }


async def deliveries(conn: AsyncConn, limit: int = 100) -> list[DeliveryListed]:
    return await fetch_all(conn, "generations_deliveries_list", {"limit": limit}, DeliveryListed)
