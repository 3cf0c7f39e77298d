"""Admitting social work: a post (idempotent per owner for 24 hours) and a disconnection.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): this is
before it. :func:`submit_post` records the post and its ``social.post`` job in one
transaction, so an accepted post is durable the moment the caller hears 202; the same
owner's ``Idempotency-Key`` with the same body answers the same job for 24 hours and
with another body is refused (:class:`KeyReused`). :func:`request_disconnect` marks an
account ``revoking``, fails the posts still waiting for it with the reason, and admits
the ``social.revoke`` job that calls the platform and wipes the credentials.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from psycopg.rows import dict_row

from herald import sql
from herald.client import Client, Outcome
from herald.ops import audit
from herald.ops.errors import Conflict, NotFound
from herald.rows import all_rows, maybe_row
from herald.social import accounts

POST = "social.post"
REVOKE = "social.revoke"
SERVICE = "social"
KEY_RETENTION = 24 * 3600.0


class KeyReused(Conflict):
    """The idempotency key was used by this owner for another request body (HTTP 409)."""


@dataclass(frozen=True)
class PostAdmitted:
    post_id: int
    job_id: int
    created: bool
    provider: str | None = None  # the account's platform, when created


@dataclass(frozen=True)
class DisconnectAdmitted:
    account_id: int
    job_id: int
    failed_posts: list[int]
    created: bool


def body_hash(body: dict[str, Any]) -> str:
    """The fingerprint of a request body: the same JSON in any key order is the same."""
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


async def submit_post(
    client: Client,
    owner: str,
    account_id: int,
    message: str,
    media_url: str | None,
    *,
    idempotency_key: str,
    request_body: dict[str, Any],
    trace: dict[str, str] | None = None,
) -> PostAdmitted:
    """Record the post and admit its job, or answer the one this key admitted before."""
    fingerprint = body_hash(request_body)
    async with client.pool.connection() as conn, conn.transaction():
        cur = conn.cursor(row_factory=dict_row)
        key_params = {"owner": owner, "key": idempotency_key}
        await cur.execute(
            sql.query("social_post_key_claim"),
            {**key_params, "body_hash": fingerprint, "retention_s": KEY_RETENTION},
        )
        if await cur.fetchone() is None:
            await cur.execute(sql.query("social_post_key_get"), key_params)
            earlier = await cur.fetchone()
            if earlier is None or earlier["job_id"] is None:
                raise Conflict("this idempotency key is being used by a request in flight")
            if earlier["body_hash"] != fingerprint:
                raise KeyReused(
                    f"idempotency key {idempotency_key!r} was used for another request in the "
                    "last 24 hours"
                )
            return PostAdmitted(earlier["post_id"], earlier["job_id"], created=False)
        account = await accounts.get_account(conn, account_id)
        if account["status"] != "active":
            raise accounts.AccountError(
                f"account {account_id} is {account['status']}"
                + (f": {account['status_reason']}" if account["status_reason"] else "")
            )
        await cur.execute(
            sql.query("social_post_create"),
            {
                "owner": owner,
                "account_id": account_id,
                "message": message,
                "media_url": media_url,
                "idempotency_key": idempotency_key,
                "body_hash": fingerprint,
            },
        )
        post = await cur.fetchone()
        assert post is not None
        payload: dict[str, Any] = {
            "post_id": post["id"],
            "account_id": account_id,
            "provider": account["provider"],
        }
        if trace:
            payload["trace"] = trace
        admitted = await client.enqueue(POST, payload, key=f"post:{post['id']}", conn=conn)
        await conn.execute(
            sql.query("social_post_set_job"),
            {**key_params, "id": post["id"], "job_id": admitted.id},
        )
        return PostAdmitted(post["id"], admitted.id, created=True, provider=account["provider"])


async def request_disconnect(
    client: Client, account_id: int, *, actor: str, reason: str
) -> DisconnectAdmitted:
    """Mark the account revoking, fail its waiting posts, admit the revoke job; audited."""
    actor, reason = audit.require(actor, reason)
    async with client.pool.connection() as conn, conn.transaction():
        before = await maybe_row(conn, "social_account_lock", {"id": account_id})
        if before is None:
            raise NotFound("account", account_id)
        if before["status"] == "revoked":
            raise Conflict(f"account {account_id} is disconnected already")
        why = f"account disconnected by {actor}: {reason}"[:4000]
        await accounts.set_status(
            conn, account_id, "revoking", why, ("active", "needs_reauth", "revoking")
        )
        params = {"account_id": account_id, "reason": why}
        failed = [
            row["id"] for row in await all_rows(conn, "social_posts_fail_for_account", params)
        ]
        admitted = await client.enqueue(
            REVOKE, {"account_id": account_id}, key=f"account:{account_id}", conn=conn
        )
        after = {**before, "status": "revoking", "status_reason": why, "revoke_job_id": admitted.id}
        await audit.record(
            conn,
            actor,
            "disconnect_account",
            ("social_account", account_id),
            reason,
            dict(before),
            {**after, "failed_posts": failed},
        )
        return DisconnectAdmitted(
            account_id, admitted.id, failed, admitted.outcome is Outcome.CREATED
        )
