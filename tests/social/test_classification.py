"""Rate-limit headers and error classification, platform by platform."""

from __future__ import annotations

import json

import pytest

from herald.errors import Permanent, Retry, Snooze
from herald.ops.secrets import Redactor
from herald.social import ratelimit
from herald.social.errors import (
    Disposition,
    PermanentError,
    RateLimited,
    ReauthRequired,
    TransientError,
    classify,
    to_job_outcome,
)

NOW = 1_700_000_000.0


def test_mastodon_headers_give_the_reset_on_the_platforms_clock() -> None:
    headers = {
        "x-ratelimit-limit": "300",
        "x-ratelimit-remaining": "12",
        "x-ratelimit-reset": "2023-11-14T22:18:20.000Z",  # NOW + 300 s
    }
    info = ratelimit.mastodon(headers, NOW)
    assert info is not None
    assert (info.limit, info.remaining) == (300, 12)
    assert info.reset_after == pytest.approx(300.0)
    assert info.slow_down() is not None  # 12 <= 10 % of 300
    assert ratelimit.mastodon({}, NOW) is None


def test_bluesky_and_ietf_reset_are_told_apart() -> None:
    epoch = ratelimit.ietf(
        {
            "ratelimit-limit": "10",
            "ratelimit-remaining": "9",
            "ratelimit-reset": str(int(NOW) + 42),
        },
        NOW,
    )
    delta = ratelimit.ietf(
        {"ratelimit-limit": "10", "ratelimit-remaining": "9", "ratelimit-reset": "42"}, NOW
    )
    assert epoch is not None and delta is not None
    assert epoch.reset_after == delta.reset_after == 42


def test_facebook_usage_headers() -> None:
    headers = {
        "x-app-usage": json.dumps({"call_count": 20, "total_time": 5, "total_cputime": 5}),
        "x-business-use-case-usage": json.dumps(
            {
                "123": [
                    {
                        "type": "pages",
                        "call_count": 96,
                        "total_time": 10,
                        "total_cputime": 10,
                        "estimated_time_to_regain_access": 0,
                    }
                ]
            }
        ),
    }
    info = ratelimit.facebook(headers)
    assert info is not None and info.usage_percent == 96 and info.regain_after is None
    advice = info.slow_down()
    assert advice is not None and advice.seconds == 60
    throttled = ratelimit.facebook(
        {
            "x-business-use-case-usage": json.dumps(
                {"1": [{"call_count": 100, "estimated_time_to_regain_access": 3}]}
            )
        }
    )
    assert throttled is not None and throttled.regain_after == 180


def test_slow_down_spreads_the_remaining_calls_over_the_window() -> None:
    info = ratelimit.RateInfo(limit=100, remaining=4, reset_after=50.0)
    advice = info.slow_down()
    assert advice is not None and advice.seconds == pytest.approx(10.0)
    assert ratelimit.RateInfo(limit=100, remaining=50, reset_after=50.0).slow_down() is None


def test_retry_after_as_seconds_or_date() -> None:
    assert ratelimit.retry_after({"retry-after": "7"}, NOW) == 7
    assert ratelimit.retry_after({"retry-after": "Tue, 14 Nov 2023 22:13:40 GMT"}, NOW) == 20
    assert ratelimit.retry_after({"retry-after": "soon"}, NOW) is None


@pytest.mark.parametrize(
    ("status", "headers", "kind", "delay"),
    [
        (429, {"retry-after": "30"}, RateLimited, 30.0),
        (429, {}, RateLimited, 60.0),
        (503, {"retry-after": "5"}, RateLimited, 5.0),
        (503, {}, TransientError, None),
        (500, {}, TransientError, None),
        (502, {}, TransientError, None),
        (408, {}, TransientError, None),
        (400, {}, PermanentError, None),
        (403, {}, PermanentError, None),
        (422, {}, PermanentError, None),
        (401, {}, ReauthRequired, None),
    ],
)
def test_generic_classification(
    status: int, headers: dict[str, str], kind: type, delay: float | None
) -> None:
    error = classify(
        status,
        headers,
        b'{"error":"nope"}',
        platform="x",
        operation="publish",
        redactor=Redactor(),
        now=NOW,
        detail="nope",
    )
    assert type(error) is kind
    assert error.delay == delay
    assert error.body == '{"error":"nope"}'


def test_429_waits_for_the_platform_reset_when_there_is_no_retry_after() -> None:
    rate = ratelimit.RateInfo(limit=5, remaining=0, reset_after=17.0)
    error = classify(
        429, {}, b"", platform="x", operation="o", redactor=Redactor(), now=NOW, rate=rate
    )
    assert isinstance(error, RateLimited) and error.delay == 17.0


def test_job_outcomes() -> None:
    snooze = to_job_outcome(RateLimited("slow down", delay=12))
    assert isinstance(snooze, Snooze) and snooze.seconds == 12
    assert isinstance(to_job_outcome(TransientError("flaky")), Retry)
    assert isinstance(to_job_outcome(PermanentError("bad")), Permanent)
    reauth = ReauthRequired("token revoked")
    assert reauth.needs_reauthorisation and reauth.disposition is Disposition.REAUTH
    assert isinstance(to_job_outcome(reauth), Permanent)
