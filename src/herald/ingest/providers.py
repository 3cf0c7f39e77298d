"""The provider registry: where a snapshot comes from, how it is fetched, when.

Place in the pipeline: an operator registers a provider (CLI, HTTP API); the fetch job
reads it back with its auth header decrypted (:func:`fetch_settings`). The auth value
is stored only encrypted (the keys of ``HERALD_TOKEN_KEYS``, bound to the provider's
name) and no listing statement selects it: it is never echoed nor logged. A schedule is
a cron recurrence of the ``ingest.fetch`` kind keyed by the provider's name, so it
shares the one-active-fetch-per-provider admission with every manual trigger.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from herald import sql
from herald.backoff import Backoff
from herald.client import Client, Enqueued, Outcome
from herald.db import AsyncConn
from herald.ingest.errors import IngestError
from herald.ingest.fetch import FetchPolicy
from herald.ingest.formats import format_names, snapshot_format
from herald.ingest.mapping import MappingContext
from herald.ingest.secret import AuthHeader, Secret
from herald.ops import audit
from herald.registry import Herald
from herald.rows import fetch_all, fetch_one, from_row, one_row
from herald.schedules import ScheduleSpec, create_schedule, delete_schedule, update_schedule

FETCH = "ingest.fetch"
PROCESS = "ingest.process"
INGEST_ACTOR = "ingest"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_HEADER = re.compile(r"^[!-9;-~]{1,100}$")


class ProviderError(IngestError, ValueError):
    """A provider's definition is invalid (the message says which field and why)."""


class UnknownProvider(IngestError, LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"no provider {name!r} is registered")
        self.name = name


@dataclass(frozen=True)
class ProviderSpec:
    """A provider's definition as an operator gives it.

    ``auth`` is the auth header's value (``None``: keep the stored one on an update;
    ``""``: remove it). ``schedule`` is a five-field cron expression read in
    ``timezone`` (``None``: no schedule).
    """

    name: str
    url: str
    format: str = "event-plans"
    timezone: str = "UTC"
    schedule: str | None = None
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    deadline: float = 1800.0
    attempts: int = 4
    backoff_base: float = 1.0
    backoff_cap: float = 60.0
    max_retry_after: float = 300.0
    auth_name: str = "Authorization"
    auth: Secret | str | None = dataclasses.field(default=None, repr=False)

    def check(self) -> None:
        if not _NAME.match(self.name):
            raise ProviderError(
                "a provider name is 1-128 letters, digits, '.', '_' or '-' (starting with a "
                f"letter or digit); got {self.name!r}"
            )
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname or len(self.url) > 2000:
            raise ProviderError("url must be an http:// or https:// URL with a host")
        if parts.username or parts.password:
            raise ProviderError("put credentials in the auth header, not in the url")
        if self.format not in format_names():
            raise ProviderError(f"format must be one of {', '.join(format_names())}")
        try:
            ZoneInfo(self.timezone)
        except (ZoneInfoNotFoundError, ValueError):
            raise ProviderError(f"timezone {self.timezone!r} is not an IANA zone") from None
        if not _HEADER.match(self.auth_name):
            raise ProviderError(f"{self.auth_name!r} is not a valid header name")
        try:
            self.policy()
        except ValueError as exc:
            raise ProviderError(str(exc)) from None
        if not 1 <= self.attempts <= 20:
            raise ProviderError("attempts must be between 1 and 20")
        if self.backoff_cap < self.backoff_base:
            raise ProviderError("backoff_cap must be at least backoff_base")

    def policy(self) -> FetchPolicy:
        return FetchPolicy(
            attempts=self.attempts,
            backoff=Backoff(base=self.backoff_base, factor=2.0, cap=self.backoff_cap, jitter=0.5),
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            deadline=self.deadline,
            max_retry_after=self.max_retry_after,
        )


@dataclass(frozen=True)
class FetchSettings:
    """What one fetch of a provider needs, auth header decrypted."""

    name: str
    url: str
    format: str
    context: MappingContext
    policy: FetchPolicy
    auth: AuthHeader | None = dataclasses.field(repr=False)


@dataclass(frozen=True)
class Provider:
    """A provider as operators see it (``ingest_provider_get``): whether an auth header
    is set (``has_auth``), never its value."""

    name: str
    url: str
    format: str
    timezone: str
    schedule_id: int | None
    connect_timeout: float
    read_timeout: float
    deadline: float
    attempts: int
    backoff_base: float
    backoff_cap: float
    max_retry_after: float
    auth_name: str | None
    has_auth: bool
    created_at: dt.datetime
    updated_at: dt.datetime


@dataclass(frozen=True)
class ListedProvider(Provider):
    """A provider with its latest run (``ingest_provider_list``)."""

    last_run_id: int | None
    last_run_state: str | None


def shown(provider: Provider) -> dict[str, Any]:
    """A provider as shown to an operator (API, CLI, audit): its columns as a mapping."""
    return dataclasses.asdict(provider)


def _cipher() -> Any:
    from herald.ops.crypto import CipherError, TokenCipher

    try:
        return TokenCipher.from_env()
    except CipherError as exc:
        raise ProviderError(f"cannot store an auth header: {exc}") from None


def _context(name: str) -> str:
    return f"ingest-provider:{name}:auth"


def _encrypt(name: str, value: Secret | str) -> str:
    from herald.ops.secrets import Secret as CipherSecret

    plain = value.reveal() if isinstance(value, Secret) else value
    return str(_cipher().encrypt(CipherSecret(plain), context=_context(name)))


async def get_provider(conn: AsyncConn, name: str) -> Provider | None:
    return await fetch_one(conn, "ingest_provider_get", {"name": name}, Provider)


async def list_providers(conn: AsyncConn) -> list[ListedProvider]:
    return await fetch_all(conn, "ingest_provider_list", {}, ListedProvider)


async def save_provider(
    conn: AsyncConn, spec: ProviderSpec, *, app: Herald | None = None, note: audit.Note
) -> tuple[Provider, bool]:
    """Register or update ``spec`` (and its schedule) in one transaction, audited.

    Returns the stored provider as shown and whether it was created.
    """
    spec.check()
    keep_auth = spec.auth is None
    cipher = None if keep_auth or spec.auth == "" else _encrypt(spec.name, spec.auth or "")
    params = {
        "name": spec.name,
        "url": spec.url,
        "format": spec.format,
        "timezone": spec.timezone,
        "connect_timeout": spec.connect_timeout,
        "read_timeout": spec.read_timeout,
        "deadline": spec.deadline,
        "attempts": spec.attempts,
        "backoff_base": spec.backoff_base,
        "backoff_cap": spec.backoff_cap,
        "max_retry_after": spec.max_retry_after,
        "auth_name": spec.auth_name if cipher is not None else None,
        "auth_cipher": cipher,
        "keep_auth": keep_auth,
    }
    async with conn.transaction():
        before = await get_provider(conn, spec.name)
        row = await one_row(conn, "ingest_provider_upsert", params)
        created = bool(row["created"])
        after = from_row(Provider, row)
        schedule_id = await _sync_schedule(conn, spec, after.schedule_id, app, note)
        if schedule_id != after.schedule_id:
            await conn.execute(
                sql.query("ingest_provider_set_schedule"),
                {"name": spec.name, "schedule_id": schedule_id},
            )
            after = dataclasses.replace(after, schedule_id=schedule_id)
        await audit.record(
            conn,
            note.actor,
            "register" if created else "update",
            ("ingest_provider", spec.name),
            note.reason,
            None if before is None else _auditable(before),
            _auditable(after),
        )
    return after, created


def _auditable(provider: Provider) -> dict[str, Any]:
    return {
        k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in shown(provider).items()
    }


async def _sync_schedule(
    conn: AsyncConn, spec: ProviderSpec, current: int | None, app: Herald | None, note: audit.Note
) -> int | None:
    reason = f"provider {spec.name} saved by {note.actor}: {note.reason}"[: audit.MAX_REASON]
    if spec.schedule is None:
        if current is not None:
            await delete_schedule(conn, current, actor=INGEST_ACTOR, reason=reason)
        return None
    if current is not None:
        updated = await update_schedule(
            conn,
            current,
            actor=INGEST_ACTOR,
            reason=reason,
            app=app,
            cron=spec.schedule,
            timezone=spec.timezone,
        )
        if updated is not None:
            return current
    row = await create_schedule(
        conn,
        ScheduleSpec(
            kind=FETCH,
            key=spec.name,
            frequency="cron",
            timezone=spec.timezone,
            cron=spec.schedule,
            payload={"provider": spec.name},
            misfire="skip",
        ),
        app=app,
        actor=INGEST_ACTOR,
        reason=reason,
    )
    return row.id


async def fetch_settings(conn: AsyncConn, name: str) -> FetchSettings:
    """A provider's fetch settings with its auth header decrypted (for the fetch job only)."""
    row = await get_provider(conn, name)
    if row is None:
        raise UnknownProvider(name)
    cur = await conn.execute(sql.query("ingest_provider_auth"), {"name": name})
    secret_row = await cur.fetchone()
    auth = None
    if secret_row is not None and secret_row["auth_cipher"] is not None:
        value = _cipher().decrypt(secret_row["auth_cipher"], context=_context(name))
        auth = AuthHeader(Secret(value.reveal()), secret_row["auth_name"])
    spec = ProviderSpec(
        name=row.name,
        url=row.url,
        format=row.format,
        timezone=row.timezone,
        connect_timeout=row.connect_timeout,
        read_timeout=row.read_timeout,
        deadline=row.deadline,
        attempts=row.attempts,
        backoff_base=row.backoff_base,
        backoff_cap=row.backoff_cap,
        max_retry_after=row.max_retry_after,
    )
    return FetchSettings(
        name=spec.name,
        url=spec.url,
        format=snapshot_format(spec.format).name,
        context=MappingContext(ZoneInfo(spec.timezone)),
        policy=spec.policy(),
        auth=auth,
    )


async def request_fetch(
    client: Client, provider: str, *, note: audit.Note | None = None
) -> Enqueued:
    """Admit a fetch of ``provider``; while one is waiting or running, that one is returned
    (``in_progress``) and nothing is created. Audited when a ``note`` says who asked."""
    async with client.pool.connection() as conn, conn.transaction():
        if await get_provider(conn, provider) is None:
            raise UnknownProvider(provider)
        admitted = await client.enqueue(FETCH, {"provider": provider}, key=provider, conn=conn)
        if note is not None and admitted.outcome is Outcome.CREATED:
            after = {"job_id": admitted.id, "version": admitted.version}
            await audit.record(
                conn, note.actor, "fetch", ("ingest_provider", provider), note.reason, None, after
            )
    return admitted
