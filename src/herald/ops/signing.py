"""Webhook signatures in the Standard Webhooks form (shared by any application).

A secret is ``whsec_`` followed by base64 key bytes. A message is signed as
``v1,<base64 HMAC-SHA256 of "{msg_id}.{timestamp}.{body}">`` and sent with the headers
``webhook-id`` (the idempotency key a receiver deduplicates on), ``webhook-timestamp``
(seconds) and ``webhook-signature``. :func:`verify` is what a receiver runs: it checks
the signature in constant time and refuses timestamps outside a tolerance (replays).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping

PREFIX = "whsec_"
TOLERANCE_S = 300


class SignatureError(ValueError):
    """The message's signature, or its timestamp, does not verify."""


def new_secret() -> str:
    return PREFIX + base64.b64encode(secrets.token_bytes(24)).decode("ascii")


def _key(secret: str) -> bytes:
    if not secret.startswith(PREFIX):
        raise SignatureError("a webhook secret starts with whsec_")
    try:
        return base64.b64decode(secret[len(PREFIX) :], validate=True)
    except ValueError:
        raise SignatureError("a webhook secret is whsec_ and base64") from None


def sign(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_key(secret), signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def headers(secret: str, msg_id: str, body: bytes, now: float | None = None) -> dict[str, str]:
    timestamp = int(time.time() if now is None else now)
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": sign(secret, msg_id, timestamp, body),
    }


def verify(secret: str, received: Mapping[str, str], body: bytes, now: float | None = None) -> str:
    """Check a received message; returns its id (the idempotency key)."""
    try:
        msg_id = received["webhook-id"]
        timestamp = int(received["webhook-timestamp"])
        offered = received["webhook-signature"]
    except (KeyError, ValueError):
        raise SignatureError("webhook-id, webhook-timestamp and webhook-signature needed") from None
    moment = time.time() if now is None else now
    if abs(moment - timestamp) > TOLERANCE_S:
        raise SignatureError("timestamp outside the tolerance")
    expected = sign(secret, msg_id, timestamp, body)
    for candidate in offered.split():
        if hmac.compare_digest(candidate, expected):
            return msg_id
    raise SignatureError("no signature matches")
