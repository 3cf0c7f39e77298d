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
from typing import TYPE_CHECKING, Any

import httpx

from herald.context import JobContext
from herald.db import AsyncConn, Row
from herald.errors import Permanent, Retry
from herald.generations import secrets
from herald.generations.errors import PlanError
from herald.generations.records import one, rows
from herald.ops import audit, signing
from herald.ops.conn import to_json
from herald.ops.crypto import CipherError
from herald.rows import one_row

if TYPE_CHECKING:
    from herald.generations.shared import Generations


async def subscribe(
    conn: AsyncConn, *, name: str, url: str, datasets: Sequence[str], actor: str, reason: str
) -> tuple[Row, str]:
    """Create a subscription; returns it and its secret (shown once, never again)."""
    actor, reason = audit.require(actor, reason)
    if not url.startswith(("http://", "https://")):
        raise PlanError("a webhook url is http(s)")
    secret = signing.new_secret()
    sealed = secrets.seal(name, secret)  # stored sealed only; shown once, here
    async with conn.transaction():
        row = await one_row(
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
        await audit.record(
            conn, actor, "generations.subscribe", ("gen_subscription", row["id"]), reason, after=row
        )
    return row, secret


async def feed(
    conn: AsyncConn, *, after: int = 0, dataset: str | None = None, limit: int = 100
) -> list[Row]:
    if not 1 <= limit <= 1000:
        raise PlanError("limit must be between 1 and 1000")
    return await rows(
        conn, "generations_feed", {"after": after, "dataset": dataset, "limit": limit}
    )


def body_of(delivery: Row) -> bytes:
    event = {
        "type": delivery["event_type"],
        "event_id": str(delivery["event_id"]),
        "timestamp": delivery["created_at"],
        "data": delivery["payload"],
    }
    return (to_json(event) or "{}").encode()


async def deliver(gen: Generations, ctx: JobContext, payload: dict[str, Any]) -> dict[str, Any]:
    delivery_id = int(payload["delivery_id"])
    async with gen.pool(ctx).connection() as conn:
        delivery = await one(conn, "generations_delivery_get", {"id": delivery_id})
    if delivery is None:
        raise Permanent(f"delivery {delivery_id} does not exist")
    if delivery["state"] != "pending":
        return {"state": delivery["state"]}
    body = body_of(delivery)
    msg_id = str(delivery["event_id"])
    try:
        secret = secrets.unseal(delivery["subscription"], delivery["secret"])
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
            response = await http.post(delivery["url"], content=body, headers=sent)
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
            await one(conn, "generations_delivery_record", outcome)
        raise Retry(f"delivery {delivery_id}: {status or error}")
    # Settled: the outcome commits with the job's fenced completion.
    async with ctx.transaction() as conn:
        await one(conn, "generations_delivery_record", outcome)
    return {
        "state": "delivered" if delivered else "failed",
        "status": status,
        "event": json.loads(body)["event_id"],
    }


async def deliveries(conn: AsyncConn, limit: int = 100) -> list[Row]:
    return await rows(conn, "generations_deliveries_list", {"limit": limit})
