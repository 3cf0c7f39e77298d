"""Webhook secrets sealed at rest, with the key-rotation scheme of stored tokens.

A subscription's signing secret is stored only as ``sealed:`` + the output of
:meth:`herald.ops.crypto.TokenCipher.encrypt` (Fernet keys from ``HERALD_TOKEN_KEYS``,
newest first), bound to the subscription's name: a sealed value copied onto another
subscription does not open there. It is opened only to sign a delivery, never returned
by the API after its creation, never logged. A secret stored as given by an earlier
release (``whsec_...``) still signs; :func:`seal_stored` seals it, and re-seals the others
under the newest key once a new key was put first.
"""

from __future__ import annotations

from herald.db import AsyncConn
from herald.generations.errors import PlanError
from herald.generations.records import execute
from herald.ops.crypto import CipherError, TokenCipher
from herald.ops.secrets import Secret
from herald.rows import all_rows

SEALED = "sealed:"


def _context(name: str) -> str:
    return f"generations-subscription:{name}:secret"


def cipher() -> TokenCipher:
    """The configured cipher; a clear error when no usable key is configured."""
    try:
        return TokenCipher.from_env()
    except CipherError as exc:
        raise PlanError(f"cannot seal a webhook secret: {exc}") from None


def seal(name: str, secret: str, keys: TokenCipher | None = None) -> str:
    sealed = (keys or cipher()).encrypt(Secret(secret), context=_context(name))
    return SEALED + sealed


def unseal(name: str, stored: str, keys: TokenCipher | None = None) -> Secret:
    """The secret a subscription signs with (stored sealed, or as given before sealing)."""
    if not stored.startswith(SEALED):
        return Secret(stored)
    return (keys or cipher()).decrypt(stored.removeprefix(SEALED), context=_context(name))


async def seal_stored(conn: AsyncConn, keys: TokenCipher | None = None) -> int:
    """Seal the secrets stored as given, and re-seal under the newest key those sealed
    under an older one; how many were rewritten. Run after putting a new key first in
    ``HERALD_TOKEN_KEYS``; once it answers 0 the old key can be dropped."""
    keys = keys or cipher()
    changed = 0
    async with conn.transaction():
        for row in await all_rows(conn, "generations_subscription_secrets", {}):
            stored = row["secret"]
            if stored.startswith(SEALED) and not keys.needs_rotation(stored.removeprefix(SEALED)):
                continue
            plain = unseal(row["name"], stored, keys)
            await execute(
                conn,
                "generations_subscription_set_secret",
                {"id": row["id"], "secret": seal(row["name"], plain.reveal(), keys)},
            )
            changed += 1
    return changed
