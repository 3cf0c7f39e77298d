"""FailureSimulator: platform faults injected into a worker's HTTP transport, seeded.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): the
worker builds its platform :class:`httpx.AsyncClient` on ``FailureSimulator(inner)``
instead of the plain transport, so every step's calls meet injected latency, server
errors, 400s, rate limits, timeouts and dropped connections - and the engine's retries,
snoozes, checkpoints and idempotency keys have to cope. It sits in the transport, not
in the adapters, so the adapters under test are exactly the production ones.

Faults look like the platform's own (bodies and headers from :mod:`herald.social.wire`).
A *timeout* and half of the *drops* happen after the request reached the platform: the
post may exist though the caller saw only an error, which is exactly the case the
idempotency keys and lookups are for.

Determinism: the fate of a request is a hash of the seed, the platform, the request's
identity (method, path and the ``herald.key`` extension) and how many times this
simulator has seen that identity - not of the order in which concurrent requests
arrive - so a run is reproducible by its seed, however tasks interleave.

Off by default. Configured by ``HERALD_SOCIAL_FAULTS`` (JSON, see :meth:`FaultPlan.parse`)
and refused at start-up when ``HERALD_ENV=production``.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import statistics
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, field
from email.utils import formatdate
from typing import Any

import httpx

from herald.social import wire
from herald.social.media import is_production

FAULTS_VARIABLE = "HERALD_SOCIAL_FAULTS"
FAULT_KINDS = ("error_5xx", "error_400", "error_429", "timeout", "drop")
_LATENCY_KINDS = ("none", "fixed", "uniform", "exponential", "lognormal")


class SimulatorRefused(RuntimeError):
    """Fault injection was asked for in production."""


@dataclass(frozen=True)
class Latency:
    """Added delay before each request: ``kind`` with its parameters, capped at ``cap``.

    fixed: ``value`` s; uniform: between ``value`` and ``spread``; exponential: mean
    ``value``; lognormal: median ``value`` with shape ``spread`` (sigma).
    """

    kind: str = "none"
    value: float = 0.0
    spread: float = 0.0
    cap: float = 30.0

    def __post_init__(self) -> None:
        if self.kind not in _LATENCY_KINDS:
            raise ValueError(f"latency kind must be one of {', '.join(_LATENCY_KINDS)}")
        if self.value < 0 or self.spread < 0 or self.cap < 0:
            raise ValueError("latency parameters must not be negative")
        if self.kind == "uniform" and self.spread < self.value:
            raise ValueError("uniform latency needs spread (the upper bound) >= value")

    def sample(self, u: float) -> float:
        """The delay at quantile ``u`` (0 < u < 1) of the distribution."""
        u = min(max(u, 1e-12), 1 - 1e-12)
        if self.kind == "fixed":
            delay = self.value
        elif self.kind == "uniform":
            delay = self.value + (self.spread - self.value) * u
        elif self.kind == "exponential":
            delay = -self.value * math.log(1 - u)
        elif self.kind == "lognormal":
            delay = self.value * math.exp(self.spread * statistics.NormalDist().inv_cdf(u))
        else:
            delay = 0.0
        return min(delay, self.cap)


@dataclass(frozen=True)
class FaultProfile:
    """Fault rates (each a probability per request, summing to at most 1) of a platform."""

    latency: Latency = field(default_factory=Latency)
    error_5xx: float = 0.0
    error_400: float = 0.0
    error_429: float = 0.0
    timeout: float = 0.0
    drop: float = 0.0
    # What a simulated 429 asks the caller to wait, in seconds.
    retry_after: float = 1.0
    # How long a simulated timeout hangs before failing (the client's own timeout is
    # usually longer; 0 keeps tests fast).
    hang: float = 0.0

    def __post_init__(self) -> None:
        rates = [getattr(self, kind) for kind in FAULT_KINDS]
        if any(not 0 <= rate <= 1 for rate in rates):
            raise ValueError("fault rates must be between 0 and 1")
        if sum(rates) > 1 + 1e-9:
            raise ValueError(f"fault rates add up to {sum(rates):g}, more than 1")
        if self.retry_after < 0 or self.hang < 0:
            raise ValueError("retry_after and hang must not be negative")

    @classmethod
    def transient(cls, rate: float, **kwargs: Any) -> FaultProfile:
        """``rate`` of requests fail transiently, spread evenly over 5xx, 429, timeouts
        and drops (no 400s: those are meant to end in the dead letters)."""
        share = rate / 4
        return cls(error_5xx=share, error_429=share, timeout=share, drop=share, **kwargs)

    @property
    def active(self) -> bool:
        return self.latency.kind != "none" or any(getattr(self, k) > 0 for k in FAULT_KINDS)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultProfile:
        values = dict(data)
        latency = values.pop("latency", None)
        unknown = set(values) - {f for f in cls.__dataclass_fields__ if f != "latency"}
        if unknown:
            raise ValueError(f"unknown fault settings: {', '.join(sorted(unknown))}")
        return cls(
            latency=Latency(**latency) if isinstance(latency, Mapping) else Latency(),
            **{k: float(v) for k, v in values.items()},
        )


@dataclass(frozen=True)
class FaultPlan:
    """A seed and a profile per platform (``"*"``: every platform not named)."""

    seed: int
    profiles: Mapping[str, FaultProfile]

    def profile(self, platform: str) -> FaultProfile | None:
        return self.profiles.get(platform) or self.profiles.get("*")

    @property
    def active(self) -> bool:
        return any(p.active for p in self.profiles.values())

    @classmethod
    def parse(cls, text: str) -> FaultPlan:
        """``{"seed": 7, "platforms": {"mastodon": {"error_5xx": 0.1, "latency":
        {"kind": "lognormal", "value": 0.05, "spread": 0.5}}, "*": {...}}}``."""
        try:
            data = json.loads(text)
            if not isinstance(data, dict) or not isinstance(data.get("platforms"), dict):
                raise ValueError('expected {"seed": N, "platforms": {...}}')
            profiles = {str(k): FaultProfile.from_dict(v) for k, v in data["platforms"].items()}
            return cls(seed=int(data.get("seed", 0)), profiles=profiles)
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{FAULTS_VARIABLE}: {exc}") from None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> FaultPlan | None:
        env = os.environ if environ is None else environ
        raw = env.get(FAULTS_VARIABLE, "").strip()
        return cls.parse(raw) if raw else None

    def to_json(self) -> str:
        return json.dumps(
            {"seed": self.seed, "platforms": {k: asdict(v) for k, v in self.profiles.items()}}
        )


def _draw(*parts: object) -> float:
    digest = hashlib.sha256("\x00".join(map(str, parts)).encode()).digest()
    return (int.from_bytes(digest[:8], "big") + 0.5) / 2**64


class FailureSimulator(httpx.AsyncBaseTransport):
    """An httpx transport injecting the faults of ``plan`` in front of ``inner``."""

    def __init__(
        self,
        inner: httpx.AsyncBaseTransport,
        plan: FaultPlan,
        *,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if plan.active and is_production(environ):
            raise SimulatorRefused(
                "the failure simulator is refused when HERALD_ENV=production "
                f"(unset {FAULTS_VARIABLE})"
            )
        self._inner = inner
        self.plan = plan
        self._sleep = sleep
        self._clock = clock
        self._seen: Counter[str] = Counter()
        # (platform, fault) -> how many were injected.
        self.injected: Counter[tuple[str, str]] = Counter()

    @classmethod
    def from_env(
        cls, inner: httpx.AsyncBaseTransport, environ: Mapping[str, str] | None = None
    ) -> httpx.AsyncBaseTransport:
        """``inner`` wrapped when ``HERALD_SOCIAL_FAULTS`` asks for it, else ``inner``."""
        plan = FaultPlan.from_env(environ)
        if plan is None or not plan.active:
            return inner
        return cls(inner, plan, environ=environ)

    def decide(self, platform: str, identity: str) -> tuple[str | None, float, float]:
        """(fault or None, latency, a third draw for details) of the next such request."""
        profile = self.plan.profile(platform)
        if profile is None:
            return None, 0.0, 0.0
        occurrence = self._seen[f"{platform}\x00{identity}"]
        self._seen[f"{platform}\x00{identity}"] += 1
        base = (self.plan.seed, platform, identity, occurrence)
        latency = profile.latency.sample(_draw(*base, "latency"))
        u = _draw(*base, "fault")
        threshold = 0.0
        for kind in FAULT_KINDS:
            threshold += getattr(profile, kind)
            if u < threshold:
                return kind, latency, _draw(*base, "detail")
        return None, latency, _draw(*base, "detail")

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        platform = str(request.extensions.get("herald.platform") or "other")
        identity = f"{request.method} {request.url.path} {request.extensions.get('herald.key', '')}"
        fault, latency, detail = self.decide(platform, identity)
        if latency > 0:
            await self._sleep(latency)
        if fault is None:
            return await self._inner.handle_async_request(request)
        self.injected[(platform, fault)] += 1
        profile = self.plan.profile(platform)
        assert profile is not None
        if fault == "error_5xx":
            status = (500, 502, 503)[int(detail * 3)]
            return self._answer(
                request,
                status,
                wire.error_body(platform, status, wire.default_message(platform, status)),
            )
        if fault == "error_400":
            return self._answer(
                request, 400, wire.error_body(platform, 400, "simulated invalid request")
            )
        if fault == "error_429":
            now = self._clock()
            status, headers, body = wire.rate_limited(
                platform,
                limit=1,
                reset=now + profile.retry_after,
                window=max(1.0, profile.retry_after),
                now=now,
            )
            return self._answer(request, status, body, headers)
        if fault == "drop" and detail < 0.5:
            raise httpx.ConnectError(
                "simulated: connection dropped before sending", request=request
            )
        # A timeout, or a drop after sending: the platform acted, the caller never hears.
        response = await self._inner.handle_async_request(request)
        await response.aclose()
        if fault == "timeout":
            if profile.hang > 0:
                await self._sleep(profile.hang)
            raise httpx.ReadTimeout("simulated: no answer in time", request=request)
        raise httpx.RemoteProtocolError(
            "simulated: server disconnected without sending a response", request=request
        )

    def _answer(
        self,
        request: httpx.Request,
        status: int,
        body: dict[str, Any],
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        return httpx.Response(
            status,
            headers={
                "content-type": "application/json",
                "date": formatdate(self._clock(), usegmt=True),
                **(headers or {}),
            },
            content=json.dumps(body).encode(),
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()
