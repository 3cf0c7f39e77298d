"""Users and linked accounts in PostgreSQL, with credentials encrypted at rest.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): a post
names one of these accounts; the auth-check step loads it here, decrypting its
credentials into :class:`~herald.ops.secrets.Secret` values for the adapter, and a
401 marks it ``needs_reauth`` here. Disconnecting (:func:`request_disconnect`) is a
``social.revoke`` job; the credentials are wiped from the row when it is done.

The credentials of an account are one JSON object (``{"access_token": ...}``; the
names each platform's adapter reads) encrypted with :class:`TokenCipher` under a
context naming the account (provider, base URL, external id), so a ciphertext copied
onto another row does not decrypt there. Nothing here ever returns or logs them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import httpx
import psycopg

from herald import sql
from herald.db import AsyncConn
from herald.ops import audit
from herald.ops.crypto import TokenCipher
from herald.ops.errors import Conflict, NotFound
from herald.ops.secrets import Secret
from herald.rows import all_rows, fetch_all, fetch_one, from_row, one_row
from herald.social.adapters.base import PLATFORMS, Account

# The credential an API caller's "access_token" stands for, per platform.
PRIMARY_SECRET = {
    "mastodon": "access_token",
    "bluesky": "app_password",
    "facebook": "page_access_token",
    "webhook": "signing_secret",
}
# Where a platform's API lives unless the account says otherwise (a self-hosted
# Mastodon or PDS names its own; a webhook always does).
DEFAULT_BASE_URL = {"bluesky": "https://bsky.social", "facebook": "https://graph.facebook.com"}


class AccountStatus(StrEnum):
    """Where a linked account stands (``social_accounts.status``)."""

    ACTIVE = "active"
    NEEDS_REAUTH = "needs_reauth"  # a 401: every post fails until it is authorised again
    REVOKING = "revoking"  # disconnect asked; the revoke job wipes the credentials
    REVOKED = "revoked"


ACCOUNT_STATES = tuple(AccountStatus)


class AccountError(Conflict):
    """The account cannot be used for this (revoked, needs re-authorisation...)."""


class InvalidAccount(ValueError):
    """The account's description is unusable (HTTP 422)."""


@dataclass(frozen=True)
class LinkRequest:
    """What a caller gives to link an account (``access_token``: its main credential)."""

    provider: str
    name: str
    page_id: str
    access_token: str
    base_url: str | None = None
    credentials: Mapping[str, str] | None = None
    options: Mapping[str, str] | None = None
    user_id: int | None = None

    def checked(self) -> tuple[str, dict[str, str]]:
        """(base URL, every credential by name), or :class:`InvalidAccount`."""
        if self.provider not in PLATFORMS:
            raise InvalidAccount(f"unknown provider {self.provider!r} ({', '.join(PLATFORMS)})")
        base = self.base_url or DEFAULT_BASE_URL.get(self.provider)
        if not base:
            raise InvalidAccount(f"a {self.provider} account needs its base_url")
        url = httpx.URL(base)
        if url.scheme not in ("http", "https") or not url.host:
            raise InvalidAccount("base_url must be an http(s) URL")
        secrets = {str(k): str(v) for k, v in (self.credentials or {}).items() if v}
        if not self.access_token:
            raise InvalidAccount("access_token must not be empty")
        secrets[PRIMARY_SECRET[self.provider]] = self.access_token
        return base.rstrip("/"), secrets


@dataclass(frozen=True)
class User:
    """A registered user (``social_user_create``)."""

    id: int
    username: str
    email: str
    created_at: dt.datetime


@dataclass(frozen=True)
class LinkedAccount:
    """A linked account without its credentials (``social_account_list``)."""

    id: int
    user_id: int | None
    owner: str
    provider: str
    name: str
    external_id: str
    base_url: str
    options: dict[str, Any]
    status: AccountStatus
    status_reason: str | None
    verified_at: dt.datetime | None
    created_at: dt.datetime
    updated_at: dt.datetime
    revoked_at: dt.datetime | None


@dataclass(frozen=True)
class StoredAccount(LinkedAccount):
    """An account with its encrypted credentials (``social_account_get``): for a job or
    a route that checks it, never shown."""

    credentials: str | None  # None once revoked
    recently_verified: bool


@dataclass(frozen=True)
class RevokedAccount:
    """What disconnecting for good changed (``social_account_revoked``)."""

    id: int
    status: AccountStatus
    status_reason: str | None
    revoked_at: dt.datetime


def credential_context(provider: str, base_url: str, external_id: str) -> str:
    return f"social-account:{provider}:{base_url}:{external_id}"


def public_account(account: LinkedAccount) -> dict[str, Any]:
    """An account as the API and the CLI show it: never its credentials."""
    return {f.name: getattr(account, f.name) for f in dataclasses.fields(LinkedAccount)}


async def create_user(
    conn: AsyncConn, username: str, email: str, *, note: audit.Note | None = None
) -> User:
    try:
        async with conn.transaction():
            row = await one_row(conn, "social_user_create", {"username": username, "email": email})
            user = from_row(User, row)
            if note is not None:
                await audit.record(
                    conn,
                    note.actor,
                    "create_user",
                    ("social_user", user.id),
                    note.reason,
                    None,
                    dataclasses.asdict(user),
                )
    except psycopg.errors.UniqueViolation:
        raise Conflict(f"a user named {username!r} exists already") from None
    except psycopg.errors.CheckViolation:
        raise InvalidAccount(
            "username must be 1-100 letters, digits, _ . - and email an address"
        ) from None
    return user


async def link_account(
    conn: AsyncConn,
    cipher: TokenCipher,
    owner: str,
    request: LinkRequest,
    *,
    note: audit.Note | None = None,
) -> LinkedAccount:
    """Store a new linked account (credentials encrypted) and audit it."""
    base_url, secrets = request.checked()
    external_id = request.page_id
    # Built once to check it is an account an adapter accepts.
    Account(
        request.provider,
        base_url,
        external_id,
        {k: Secret(v) for k, v in secrets.items()},
        dict(request.options or {}),
    )
    context = credential_context(request.provider, base_url, external_id)
    ciphertext = cipher.encrypt(Secret(json.dumps(secrets, sort_keys=True)), context=context)
    params = {
        "user_id": request.user_id,
        "owner": owner,
        "provider": request.provider,
        "name": request.name,
        "external_id": external_id,
        "base_url": base_url,
        "options": json.dumps(dict(request.options or {})),
        "credentials": ciphertext,
    }
    try:
        async with conn.transaction():
            linked = from_row(LinkedAccount, await one_row(conn, "social_account_create", params))
            if note is not None:
                await audit.record(
                    conn,
                    note.actor,
                    "link_account",
                    ("social_account", linked.id),
                    note.reason,
                    None,
                    public_account(linked),
                )
    except psycopg.errors.UniqueViolation:
        raise Conflict(
            f"{request.provider} account {external_id!r} at {base_url} is linked already"
        ) from None
    except psycopg.errors.ForeignKeyViolation:
        raise NotFound("user", request.user_id or 0) from None
    return linked


async def list_accounts(conn: AsyncConn, *, include_revoked: bool = False) -> list[LinkedAccount]:
    params = {"include_revoked": include_revoked, "limit": 1000}
    return await fetch_all(conn, "social_account_list", params, LinkedAccount)


async def get_account(conn: AsyncConn, account_id: int, *, trust: float = 0.0) -> StoredAccount:
    params = {"id": account_id, "verified_within": trust}
    found = await fetch_one(conn, "social_account_get", params, StoredAccount)
    if found is None:
        raise NotFound("account", account_id)
    return found


async def find_account(conn: AsyncConn, provider: str, external_id: str) -> int:
    """The linked account of ``provider`` with this page/account id (exactly one)."""
    rows = await all_rows(
        conn, "social_account_find", {"provider": provider, "external_id": external_id}
    )
    if not rows:
        raise NotFound(f"{provider} account", external_id)
    if len(rows) > 1:
        raise Conflict(
            f"{provider} account {external_id!r} is linked at several base URLs: "
            "name it by its account_id"
        )
    return int(rows[0]["id"])


def decrypt_account(cipher: TokenCipher, row: Mapping[str, Any] | StoredAccount) -> Account:
    """The adapter's view of an account (its credentials decrypted into secrets): a
    :class:`StoredAccount` or a row of the pipeline's own statements naming the same
    columns."""
    if isinstance(row, StoredAccount):
        row = dataclasses.asdict(row)
    if row["credentials"] is None:
        raise AccountError(f"account {row['id']} is revoked: it has no credentials")
    context = credential_context(row["provider"], row["base_url"], row["external_id"])
    plain = cipher.decrypt(row["credentials"], context=context)
    values = json.loads(plain.reveal())
    return Account(
        platform=row["provider"],
        base_url=row["base_url"],
        ref=row["external_id"],
        secrets={str(k): Secret(str(v)) for k, v in values.items()},
        options={str(k): str(v) for k, v in (row["options"] or {}).items()},
    )


async def store_renewed(
    conn: AsyncConn,
    cipher: TokenCipher,
    row: Mapping[str, Any],
    account: Account,
    renewed: Mapping[str, Secret],
) -> None:
    """Keep credentials an adapter renewed (a refreshed session) for the next job."""
    if not renewed:
        return
    values = {k: v.reveal() for k, v in {**account.secrets, **renewed}.items()}
    context = credential_context(row["provider"], row["base_url"], row["external_id"])
    ciphertext = cipher.encrypt(Secret(json.dumps(values, sort_keys=True)), context=context)
    await conn.execute(
        sql.query("social_account_store_credentials"), {"id": row["id"], "credentials": ciphertext}
    )


async def set_status(
    conn: AsyncConn, account_id: int, status: str, reason: str | None, allowed: tuple[str, ...]
) -> bool:
    cur = await conn.execute(
        sql.query("social_account_set_status"),
        {"id": account_id, "status": status, "reason": reason, "allowed": list(allowed)},
    )
    return await cur.fetchone() is not None


async def mark_needs_reauth(conn: AsyncConn, account_id: int, reason: str) -> bool:
    """A 401: every later post to the account fails until it is authorised again."""
    return await set_status(
        conn, account_id, "needs_reauth", reason[:4000], ("active", "needs_reauth")
    )


async def mark_verified(conn: AsyncConn, account_id: int) -> None:
    await conn.execute(sql.query("social_account_verified"), {"id": account_id})


async def mark_revoked(conn: AsyncConn, account_id: int, reason: str) -> RevokedAccount | None:
    """Credentials wiped, status revoked (idempotent: None if it was already)."""
    params = {"id": account_id, "reason": reason}
    return await fetch_one(conn, "social_account_revoked", params, RevokedAccount)


async def rotate_credentials(conn: AsyncConn, cipher: TokenCipher) -> int:
    """Re-encrypt every credential not under the newest key; how many were.

    Run after putting a new key first in ``HERALD_TOKEN_KEYS``; once it answers 0 the
    older keys can be removed.
    """
    rotated = 0
    for row in await all_rows(conn, "social_accounts_encrypted"):
        if not cipher.needs_rotation(row["credentials"]):
            continue
        context = credential_context(row["provider"], row["base_url"], row["external_id"])
        ciphertext = cipher.rotate(row["credentials"], context=context)
        await conn.execute(
            sql.query("social_account_store_credentials"),
            {"id": row["id"], "credentials": ciphertext},
        )
        rotated += 1
    return rotated
