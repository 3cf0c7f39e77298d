"""Webhook secrets are sealed at rest (the token keys' rotation scheme), opened only to
sign, bound to their subscription; secrets stored as given earlier are sealed later."""

from __future__ import annotations

import os

import pytest

from herald.db import AsyncConn
from herald.generations import outbox, secrets
from herald.generations.errors import PlanError
from herald.generations.runtime import Generations
from herald.ops.crypto import KEYS_VARIABLE, CipherError, TokenCipher


async def _stored(conn: AsyncConn) -> dict[str, str]:
    cur = await conn.execute("SELECT name, secret FROM gen_subscriptions ORDER BY id")
    return {row["name"]: row["secret"] for row in await cur.fetchall()}


async def _subscribe(conn: AsyncConn, name: str) -> str:
    _row, secret = await outbox.subscribe(
        conn, name=name, url="http://127.0.0.1:9/h", datasets=["orders"], actor="ops", reason="t"
    )
    return secret


async def test_a_secret_is_stored_sealed_and_opens_only_for_its_subscription(
    gens: Generations, conn: AsyncConn
) -> None:
    secret = await _subscribe(conn, "finance")
    await _subscribe(conn, "bi")
    stored = await _stored(conn)
    assert secret.startswith("whsec_") and stored["finance"].startswith(secrets.SEALED)
    assert secret not in str(stored) and secret.removeprefix("whsec_") not in str(stored)
    assert secrets.unseal("finance", stored["finance"]).reveal() == secret
    # A sealed value copied onto another subscription does not open there.
    with pytest.raises(CipherError, match="another owner"):
        secrets.unseal("bi", stored["finance"])


async def test_secrets_stored_as_given_are_sealed_and_keys_rotate(
    gens: Generations, conn: AsyncConn, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = await _subscribe(conn, "finance")
    legacy = "whsec_" + "A" * 43  # as an earlier release stored it
    await _subscribe(conn, "bi")
    await conn.execute("UPDATE gen_subscriptions SET secret = %s WHERE name = 'bi'", (legacy,))
    assert secrets.unseal("bi", legacy).reveal() == legacy  # it still signs
    assert await secrets.seal_stored(conn) == 1
    assert await secrets.seal_stored(conn) == 0
    sealed = await _stored(conn)
    assert sealed["bi"].startswith(secrets.SEALED)
    # A new key goes first: every secret is sealed again under it, then the old key goes.
    old_key, new_key = os.environ[KEYS_VARIABLE], TokenCipher.generate_key()
    monkeypatch.setenv(KEYS_VARIABLE, f"{new_key},{old_key}")
    assert await secrets.seal_stored(conn) == 2
    monkeypatch.setenv(KEYS_VARIABLE, new_key)
    resealed = await _stored(conn)
    assert resealed != sealed
    assert secrets.unseal("finance", resealed["finance"]).reveal() == secret
    assert secrets.unseal("bi", resealed["bi"]).reveal() == legacy


async def test_without_a_key_no_subscription_is_made(
    gens: Generations, conn: AsyncConn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEYS_VARIABLE)
    with pytest.raises(PlanError, match=KEYS_VARIABLE):
        await _subscribe(conn, "finance")
    assert await _stored(conn) == {}
