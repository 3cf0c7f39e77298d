"""The failure simulator: seeded, order-independent, refused in production, realistic faults."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import pytest

from herald.social.adapters import adapter_for
from herald.social.errors import PermanentError, RateLimited, SocialError, TransientError
from herald.social.sandbox import Sandbox
from herald.social.simulator import (
    FailureSimulator,
    FaultPlan,
    FaultProfile,
    Latency,
    SimulatorRefused,
)
from tests.social.support import post

PROFILE = FaultProfile(error_5xx=0.1, error_400=0.05, error_429=0.1, timeout=0.05, drop=0.1)


def simulator(seed: int, profile: FaultProfile = PROFILE, **kwargs: object) -> FailureSimulator:
    plan = FaultPlan(seed=seed, profiles={"*": profile})
    return FailureSimulator(httpx.AsyncHTTPTransport(), plan, environ={}, **kwargs)  # type: ignore[arg-type]


def fates(sim: FailureSimulator, identities: list[str]) -> list[str | None]:
    return [sim.decide("mastodon", identity)[0] for identity in identities]


def test_the_seed_decides_and_nothing_else() -> None:
    identities = [f"POST /api/v1/statuses key-{i % 37}" for i in range(2000)]
    assert fates(simulator(7), identities) == fates(simulator(7), identities)
    assert fates(simulator(7), identities) != fates(simulator(8), identities)


def test_concurrent_interleaving_does_not_change_any_requests_fate() -> None:
    a = [f"GET /a {i}" for i in range(300)]
    b = [f"GET /b {i}" for i in range(300)]
    alone = fates(simulator(3), a)
    mixed = simulator(3)
    interleaved = [mixed.decide("mastodon", x)[0] for pair in zip(b, a, strict=True) for x in pair]
    assert interleaved[1::2] == alone


def test_rates_are_respected() -> None:
    sim = simulator(11)
    drawn = fates(sim, [f"GET /x {i}" for i in range(20000)])
    for kind, rate in [
        ("error_5xx", 0.1),
        ("error_400", 0.05),
        ("error_429", 0.1),
        ("timeout", 0.05),
        ("drop", 0.1),
    ]:
        assert abs(drawn.count(kind) / len(drawn) - rate) < 0.015, kind
    assert abs(drawn.count(None) / len(drawn) - 0.6) < 0.02


def test_refused_in_production_and_off_by_default() -> None:
    plan = FaultPlan(seed=1, profiles={"*": FaultProfile(error_5xx=0.2)})
    with pytest.raises(SimulatorRefused, match="HERALD_ENV=production"):
        FailureSimulator(httpx.AsyncHTTPTransport(), plan, environ={"HERALD_ENV": "production"})
    with pytest.raises(SimulatorRefused):
        FailureSimulator.from_env(
            httpx.AsyncHTTPTransport(),
            {"HERALD_ENV": "production", "HERALD_SOCIAL_FAULTS": plan.to_json()},
        )
    inner = httpx.AsyncHTTPTransport()
    assert FailureSimulator.from_env(inner, {}) is inner
    assert FailureSimulator.from_env(inner, {"HERALD_ENV": "production"}) is inner
    wrapped = FailureSimulator.from_env(inner, {"HERALD_SOCIAL_FAULTS": plan.to_json()})
    assert isinstance(wrapped, FailureSimulator) and wrapped.plan == plan


def test_plan_parsing_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="HERALD_SOCIAL_FAULTS"):
        FaultPlan.parse("{not json")
    with pytest.raises(ValueError, match="more than 1"):
        FaultPlan.parse(json.dumps({"platforms": {"*": {"error_5xx": 0.7, "drop": 0.6}}}))
    with pytest.raises(ValueError, match="unknown fault settings: flakiness"):
        FaultPlan.parse(json.dumps({"platforms": {"*": {"flakiness": 0.1}}}))
    plan = FaultPlan.parse(
        json.dumps(
            {
                "seed": 5,
                "platforms": {
                    "bluesky": {"error_429": 0.5, "latency": {"kind": "fixed", "value": 0.01}}
                },
            }
        )
    )
    assert plan.profile("bluesky") == FaultProfile(error_429=0.5, latency=Latency("fixed", 0.01))
    assert plan.profile("mastodon") is None
    assert FaultProfile.transient(0.2).error_5xx == pytest.approx(0.05)


def test_latency_distributions() -> None:
    assert Latency("fixed", 0.05).sample(0.3) == 0.05
    assert Latency("uniform", 0.1, 0.3).sample(0.5) == pytest.approx(0.2)
    assert Latency("lognormal", 0.05, 0.5).sample(0.5) == pytest.approx(0.05)
    assert Latency("exponential", 0.1).sample(0.5) == pytest.approx(0.0693, abs=1e-3)
    assert Latency("lognormal", 1.0, 3.0, cap=2.0).sample(0.999) == 2.0
    with pytest.raises(ValueError):
        Latency("gaussian")


async def test_injected_latency_is_slept(sandbox: Sandbox) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    profile = FaultProfile(latency=Latency("uniform", 0.01, 0.02))
    sim = simulator(1, profile, sleep=sleep)
    async with httpx.AsyncClient(transport=sim) as http:
        await adapter_for(sandbox.account("mastodon"), http).verify()
    assert len(slept) == 1 and 0.01 <= slept[0] <= 0.02


@pytest.mark.parametrize(
    ("platform", "fault", "error"),
    [
        (platform, fault, error)
        for platform in ("mastodon", "bluesky", "facebook", "webhook")
        for fault, error in [
            ("error_5xx", TransientError),
            ("error_400", PermanentError),
            ("error_429", RateLimited),
            ("timeout", TransientError),
            ("drop", TransientError),
        ]
    ],
)
async def test_each_fault_is_classified_as_the_real_one_would_be(
    sandbox: Sandbox, platform: str, fault: str, error: type[SocialError]
) -> None:
    account = sandbox.account(platform)
    async with httpx.AsyncClient() as good:
        session = adapter_for(account, good)
        info = await session.verify()  # Bluesky logs in here, without faults
        secrets = {**account.secrets, **session.updated_secrets()}
    options = {"did": info.account_id} if platform == "bluesky" else dict(account.options)
    profile = FaultProfile(**{fault: 1.0}, retry_after=7.0)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=simulator(2, profile)) as http:
        adapter = adapter_for(replace(account, secrets=secrets, options=options), http)
        with pytest.raises(error) as raised:
            await adapter.publish(post(f"{platform} {fault}"), [], key="k")
    assert isinstance(raised.value, error)
    if fault == "error_429":
        # Graph gives its wait in whole minutes.
        low, high = (60.0, 60.0) if platform == "facebook" else (6.0, 8.0)
        assert raised.value.delay is not None and low <= raised.value.delay <= high
    created = len(sandbox.posts(platform))
    if fault == "timeout":
        assert created == 1  # the platform acted; only the answer was lost
    elif fault in ("error_5xx", "error_400", "error_429"):
        assert created == 0
