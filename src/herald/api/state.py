"""What every route can reach: the admission client, the API's own settings, metrics."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Request

from herald.client import Client
from herald.config import ConfigError, Settings
from herald.metrics import HeraldMetrics
from herald.registry import Herald


@dataclass(frozen=True)
class ApiSettings:
    """Settings of the HTTP layer (``HERALD_API_*``).

    ``auth`` False serves every request as an all-scopes "anonymous" caller: for a local
    demo only, never the default. ``retry_after`` is the Retry-After (seconds) sent with
    a 429 when a key is at its quota of active jobs.
    """

    auth: bool = True
    retry_after: int = 5

    def __post_init__(self) -> None:
        if self.retry_after < 1:
            raise ConfigError("retry_after must be at least one second")

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> ApiSettings:
        env = dict(os.environ if environ is None else environ)
        raw = (env.get("HERALD_API_AUTH") or "on").strip().lower()
        if raw not in {"on", "off", "true", "false", "1", "0"}:
            raise ConfigError(f"HERALD_API_AUTH must be on or off, got {raw!r}")
        retry = env.get("HERALD_API_RETRY_AFTER") or "5"
        if not retry.isdigit():
            raise ConfigError(f"HERALD_API_RETRY_AFTER must be whole seconds, got {retry!r}")
        return cls(auth=raw in {"on", "true", "1"}, retry_after=int(retry))


@dataclass
class ApiState:
    app: Herald
    settings: Settings
    api: ApiSettings
    metrics: HeraldMetrics
    client: Client


def _state(request: Request) -> ApiState:
    state = request.app.state.herald
    assert isinstance(state, ApiState)
    return state


State = Annotated[ApiState, Depends(_state)]
