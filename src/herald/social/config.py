"""Settings of the social application (``HERALD_SOCIAL_*``), with the documented defaults.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): the job
kind reads its attempt budget and backoff from here, the guards their per-account rate
and concurrency limits and the circuit breaker's threshold, the steps how long a
successful auth check is trusted.

Rate limits default to each platform's documented per-account quota (Mastodon 300
calls per 5 minutes, Bluesky 3000 per 5 minutes, Facebook Pages 4800 per day per user;
webhooks none) and are turned into a token bucket that can never exceed the quota in
any window of its length (see :meth:`Quota.bucket`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from herald.backoff import Backoff
from herald.config import ConfigError

# Documented per-account quotas: (requests, window in seconds); None: no quota.
DOCUMENTED_QUOTAS: dict[str, tuple[int, float] | None] = {
    "mastodon": (300, 300.0),
    "bluesky": (3000, 300.0),
    "facebook": (4800, 86400.0),
    "webhook": None,
}
_QUOTA = re.compile(r"^\s*(\w+)\s*=\s*(\d+)\s*/\s*(\d+(?:\.\d+)?)\s*$")


@dataclass(frozen=True)
class Quota:
    """At most ``requests`` calls per account in every window of ``window`` seconds."""

    requests: int
    window: float

    def bucket(self) -> tuple[float, float]:
        """(rate per second, burst) of a token bucket that stays within the quota.

        A bucket lets through at most ``burst + rate * W`` calls in any span of ``W``
        seconds; with ``rate = (requests - burst) / window`` that is ``requests``.
        """
        burst = max(1.0, float(self.requests // 30))
        if burst >= self.requests:
            burst = 1.0
        rate = max(self.requests - burst, 1.0) / self.window
        return rate, burst


def _float(env: Mapping[str, str], name: str, default: float) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a number, got {raw!r}") from None
    if value < 0:
        raise ConfigError(f"{name} must not be negative")
    return value


def parse_quotas(raw: str) -> dict[str, Quota | None]:
    """``mastodon=300/300,bluesky=3000/300`` (``webhook=0/1`` or ``off`` for none)."""
    quotas: dict[str, Quota | None] = {}
    for item in filter(None, (part.strip() for part in raw.split(","))):
        if item.endswith("=off"):
            quotas[item[: -len("=off")].strip()] = None
            continue
        match = _QUOTA.match(item)
        if match is None:
            raise ConfigError(f"HERALD_SOCIAL_QUOTAS: cannot read {item!r} (platform=N/SECONDS)")
        name, requests, window = match.group(1), int(match.group(2)), float(match.group(3))
        if name not in DOCUMENTED_QUOTAS:
            raise ConfigError(f"HERALD_SOCIAL_QUOTAS: unknown platform {name!r}")
        quotas[name] = Quota(requests, window) if requests > 0 and window > 0 else None
    return quotas


@dataclass(frozen=True)
class SocialSettings:
    """What the social kinds need besides the engine's settings."""

    max_attempts: int = 5
    backoff: Backoff = field(default_factory=lambda: Backoff(base=1.0, factor=5.0, jitter=0.2))
    quotas: Mapping[str, Quota | None] = field(
        default_factory=lambda: {
            p: (None if q is None else Quota(*q)) for p, q in DOCUMENTED_QUOTAS.items()
        }
    )
    account_concurrency: int = 4
    # Consecutive transient failures of a platform that open its breaker, and how long
    # it stays open before one probe may try.
    breaker_failures: int = 5
    breaker_open: float = 30.0
    # How long a successful auth check is trusted before the next post checks again.
    auth_trust: float = 300.0
    # A snooze for a token shorter than this is waited out in place.
    short_wait: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.max_attempts <= 1000:
            raise ConfigError("HERALD_SOCIAL_MAX_ATTEMPTS must be between 1 and 1000")
        if self.account_concurrency < 1 or self.breaker_failures < 1:
            raise ConfigError("account concurrency and breaker threshold must be at least 1")

    def quota(self, platform: str) -> Quota | None:
        return self.quotas.get(platform)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> SocialSettings:
        env = os.environ if environ is None else environ
        defaults = cls()
        quotas = dict(defaults.quotas)
        quotas.update(parse_quotas(env.get("HERALD_SOCIAL_QUOTAS", "")))
        base = _float(env, "HERALD_SOCIAL_BACKOFF_BASE", defaults.backoff.base)
        return cls(
            max_attempts=int(_float(env, "HERALD_SOCIAL_MAX_ATTEMPTS", defaults.max_attempts)),
            backoff=Backoff(base=base, factor=defaults.backoff.factor, jitter=0.2),
            quotas=quotas,
            account_concurrency=int(
                _float(env, "HERALD_SOCIAL_ACCOUNT_CONCURRENCY", defaults.account_concurrency)
            ),
            breaker_failures=int(
                _float(env, "HERALD_SOCIAL_BREAKER_FAILURES", defaults.breaker_failures)
            ),
            breaker_open=_float(env, "HERALD_SOCIAL_BREAKER_OPEN", defaults.breaker_open),
            auth_trust=_float(env, "HERALD_SOCIAL_AUTH_TRUST", defaults.auth_trust),
        )
