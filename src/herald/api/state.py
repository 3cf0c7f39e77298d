"""What every route can reach: the admission client, the API's own settings, metrics."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request
from psycopg_pool import AsyncConnectionPool

from herald.client import Client
from herald.config import ConfigError, Settings
from herald.db import AsyncConn
from herald.metrics import HeraldMetrics
from herald.registry import Herald

METRICS_MODES = ("public", "key", "off")
_TRUE = {"on", "true", "1", "yes"}
_FALSE = {"off", "false", "0", "no"}


def _flag(env: dict[str, str], name: str, default: str) -> bool:
    raw = (env.get(name) or default).strip().lower()
    if raw not in _TRUE | _FALSE:
        raise ConfigError(f"{name} must be on or off, got {raw!r}")
    return raw in _TRUE


def _whole(env: dict[str, str], name: str, default: int) -> int:
    raw = (env.get(name) or str(default)).strip()
    if not raw.isdigit():
        raise ConfigError(f"{name} must be a whole number, got {raw!r}")
    return int(raw)


@dataclass(frozen=True)
class ApiSettings:
    """Settings of the HTTP layer (``HERALD_API_*``, ``HERALD_METRICS*``).

    ``auth`` False serves every request as an "anonymous" caller with every scope but
    ``admin``: for a local demo only, refused on a non-loopback bind unless
    ``auth_forced``, never the default, and announced by a ``Herald-Auth: off`` header on
    every response. ``retry_after`` is the Retry-After (seconds) sent with a 429 when a
    key is at its quota of active jobs. ``max_body`` bounds every request body (bytes),
    checked before the body is read. ``metrics`` is ``public`` (``/metrics`` needs no
    key), ``key`` (it needs a ``read`` key) or ``off`` (not served by the API; see
    ``metrics_port``, which serves it alone on a port of its own).
    """

    auth: bool = True
    retry_after: int = 5
    max_body: int = 2_000_000
    auth_forced: bool = False
    metrics: str = "public"
    metrics_port: int | None = None

    def __post_init__(self) -> None:
        if self.retry_after < 1:
            raise ConfigError("retry_after must be at least one second")
        if self.max_body < 1024:
            raise ConfigError("max_body must be at least 1024 bytes")
        if self.metrics not in METRICS_MODES:
            raise ConfigError(f"HERALD_METRICS must be one of {', '.join(METRICS_MODES)}")
        if self.metrics_port is not None and not 0 < self.metrics_port < 65536:
            raise ConfigError("HERALD_METRICS_PORT must be a TCP port (1-65535)")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ApiSettings:
        env = dict(os.environ if environ is None else environ)
        port = env.get("HERALD_METRICS_PORT")
        metrics = (env.get("HERALD_METRICS") or ("off" if port else "public")).strip().lower()
        return cls(
            auth=_flag(env, "HERALD_API_AUTH", "on"),
            retry_after=_whole(env, "HERALD_API_RETRY_AFTER", 5),
            max_body=_whole(env, "HERALD_API_MAX_BODY", 2_000_000),
            auth_forced=_flag(env, "HERALD_API_AUTH_FORCE", "off"),
            metrics=metrics,
            metrics_port=_whole(env, "HERALD_METRICS_PORT", 0) if port else None,
        )


@dataclass
class ApiState:
    app: Herald
    settings: Settings
    api: ApiSettings
    metrics: HeraldMetrics
    client: Client
    # Key lookups run for the platform (before the tenant is known) on connections of
    # their own: on the client's, each request would switch a connection to the
    # platform and back to its tenant, two more round trips.
    keys: AsyncConnectionPool[AsyncConn] | None = None


# A coroutine: FastAPI would run a plain function in a worker thread on every request
# (a thread hand-off and contention for the interpreter lock).
async def _state(request: Request) -> ApiState:
    state = request.app.state.herald
    assert isinstance(state, ApiState)
    return state


State = Annotated[ApiState, Depends(_state)]
