"""Settings, read once from the environment (``HERALD_*``) with safe defaults."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

_SCHEMA_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
EVENT_LOOPS = ("auto", "uvloop", "asyncio")


class ConfigError(ValueError):
    """A setting has a value Herald cannot use."""


def _float(env: dict[str, str], name: str, default: float) -> float:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number of seconds, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"{name} must not be negative, got {raw!r}")
    return value


def env_flag(env: dict[str, str], name: str, default: bool) -> bool:
    """A true/false setting: 1/true/yes/on or 0/false/no/off; anything else is refused."""
    return _bool(env, name, default)


def _bool(env: dict[str, str], name: str, default: bool) -> bool:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    lowered = raw.strip().lower()
    if lowered in {"1", "true", "yes", "on"}:
        return True
    if lowered in {"0", "false", "no", "off"}:
        return False
    raise ConfigError(f"{name} must be true or false, got {raw!r}")


@dataclass(frozen=True)
class Settings:
    """Everything the engine needs to know about its surroundings.

    ``database_url`` None means: boot the embedded PostgreSQL under ``data_dir``.
    Durations are seconds.
    """

    database_url: str | None = None
    data_dir: Path = field(default_factory=lambda: Path(".herald"))
    schema: str = "herald"
    lease: float = 30.0
    heartbeat: float | None = None
    poll_interval: float = 1.0
    rescue_interval: float = 5.0
    prune_interval: float = 60.0
    notify: bool = True
    payload_limit: int = 1_000_000
    idempotency_retention: float = 24 * 3600.0
    default_retention: float = 7 * 24 * 3600.0
    shutdown_grace: float = 30.0
    pool_size: int = 4
    # The deadline of every statement of the engine's own (claims, heartbeats, outcomes):
    # set on the server (statement_timeout) and kept by the client.
    statement_timeout: float = 10.0
    # Connections go through a pooler in transaction mode (PgBouncer): no startup options,
    # no server-side prepared statements, migrations under a transaction-scoped lock. The
    # schema must then be the role's search_path (see docs/poolers.md). LISTEN needs a
    # direct connection (listen_url); without one the worker polls.
    pooled: bool = False
    listen_url: str | None = None
    # auto: uvloop where installed (see herald.loop); asyncio opts out.
    event_loop: str = "auto"

    def __post_init__(self) -> None:
        if not _SCHEMA_NAME.match(self.schema):
            raise ConfigError(
                "schema must be a lower-case SQL identifier (letters, digits, _), "
                f"got {self.schema!r}"
            )
        if self.lease <= 0:
            raise ConfigError("lease must be positive")
        if self.heartbeat is not None and not 0 < self.heartbeat < self.lease:
            raise ConfigError("heartbeat must be positive and shorter than the lease")
        if self.heartbeat_interval >= self.self_fence_after:
            raise ConfigError("heartbeat must be shorter than 0.8 x the lease (self-fencing)")
        if self.statement_timeout <= 0:
            raise ConfigError("statement_timeout must be positive")
        if self.poll_interval <= 0 or self.rescue_interval <= 0:
            raise ConfigError("poll and rescue intervals must be positive")
        if self.payload_limit <= 0:
            raise ConfigError("payload_limit must be positive")
        if self.event_loop not in EVENT_LOOPS:
            raise ConfigError(
                f"HERALD_EVENT_LOOP must be one of {', '.join(EVENT_LOOPS)}, "
                f"not {self.event_loop!r}"
            )

    @property
    def heartbeat_interval(self) -> float:
        return self.heartbeat if self.heartbeat is not None else self.lease / 3

    @property
    def self_fence_margin(self) -> float:
        """How long before the server's expiry a worker gives up an unconfirmed lease."""
        return self.lease / 5

    @property
    def self_fence_after(self) -> float:
        """R_self: seconds without a confirmed lease after which its handler is cancelled."""
        return self.lease - self.self_fence_margin

    @property
    def channel(self) -> str:
        """The LISTEN/NOTIFY channel of this schema's jobs."""
        return f"herald_jobs_{self.schema}"

    def with_(self, **changes: object) -> Settings:
        return replace(self, **changes)  # type: ignore[arg-type]

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        env = dict(os.environ if environ is None else environ)
        heartbeat_raw = env.get("HERALD_HEARTBEAT")
        return cls(
            database_url=env.get("HERALD_DATABASE_URL") or None,
            data_dir=Path(env.get("HERALD_DATA_DIR") or ".herald"),
            schema=env.get("HERALD_SCHEMA") or "herald",
            lease=_float(env, "HERALD_LEASE", 30.0),
            heartbeat=_float(env, "HERALD_HEARTBEAT", 0) if heartbeat_raw else None,
            poll_interval=_float(env, "HERALD_POLL_INTERVAL", 1.0),
            rescue_interval=_float(env, "HERALD_RESCUE_INTERVAL", 5.0),
            prune_interval=_float(env, "HERALD_PRUNE_INTERVAL", 60.0),
            notify=_bool(env, "HERALD_NOTIFY", True),
            payload_limit=int(_float(env, "HERALD_PAYLOAD_LIMIT", 1_000_000)),
            idempotency_retention=_float(env, "HERALD_IDEMPOTENCY_RETENTION", 24 * 3600.0),
            default_retention=_float(env, "HERALD_RETENTION", 7 * 24 * 3600.0),
            shutdown_grace=_float(env, "HERALD_SHUTDOWN_GRACE", 30.0),
            pool_size=int(_float(env, "HERALD_POOL_SIZE", 4)),
            statement_timeout=_float(env, "HERALD_STATEMENT_TIMEOUT", 10.0),
            pooled=_bool(env, "HERALD_POOLED", False),
            listen_url=env.get("HERALD_LISTEN_URL") or None,
            event_loop=(env.get("HERALD_EVENT_LOOP") or "auto").strip().lower(),
        )
