"""Rate-limit headers of each platform, read into one shape, and "slow down" advice.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): every
platform response passes through here; a 429 becomes a snooze until the platform's
reset time (no attempt used), and a response whose remaining quota runs low yields a
:class:`SlowDown` the worker applies to that account's next calls.

Reset times are turned into "seconds from now" on the platform's own clock (its
``Date`` header) so a skewed local clock cannot shorten or stretch a snooze.

Headers understood:

* Mastodon: ``X-RateLimit-Limit``, ``X-RateLimit-Remaining``, ``X-RateLimit-Reset``
  (an ISO 8601 timestamp);
* Bluesky (and the IETF draft): ``RateLimit-Limit``, ``RateLimit-Remaining``,
  ``RateLimit-Reset`` (Bluesky sends epoch seconds, the draft a delay; told apart by
  size), ``RateLimit-Policy``;
* Facebook: ``X-App-Usage`` and ``X-Page-Usage`` (percentages of the quota used) and
  ``X-Business-Use-Case-Usage`` (per business object, with
  ``estimated_time_to_regain_access`` in minutes);
* everyone: ``Retry-After`` (seconds or an HTTP date).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from email.utils import parsedate_to_datetime

Headers = Mapping[str, str]  # case-insensitive in practice (httpx.Headers)

# No snooze shorter than this (a reset "now" still needs the window to roll over) and
# none longer than a day (a broken header must not park a job for years).
MIN_DELAY = 1.0
MAX_DELAY = 24 * 3600.0
# Epoch seconds are larger than any delay a platform would send.
_EPOCH_THRESHOLD = 1_000_000_000


def clamp_delay(seconds: float) -> float:
    return min(MAX_DELAY, max(MIN_DELAY, seconds))


@dataclass(frozen=True)
class SlowDown:
    """Advice: wait ``seconds`` before the next call to this account."""

    seconds: float
    reason: str


@dataclass(frozen=True)
class RateInfo:
    """What a response said about the caller's remaining quota."""

    limit: int | None = None
    remaining: int | None = None
    # Seconds from the response until the window resets, on the platform's clock.
    reset_after: float | None = None
    # Facebook: the highest percentage of any quota used (0-100).
    usage_percent: float | None = None
    # Facebook: minutes until a throttled caller regains access, as seconds.
    regain_after: float | None = None

    def slow_down(self, low_water: float = 0.1) -> SlowDown | None:
        """Pace the calls left over the rest of the window once they run low.

        With ``remaining`` at or under ``low_water`` of ``limit`` the rest of the window
        is divided evenly between the calls left, so the quota lasts until the reset
        instead of running out and drawing 429s.
        """
        if self.regain_after is not None and self.regain_after > 0:
            return SlowDown(self.regain_after, "the platform says access is throttled")
        if (
            self.limit
            and self.remaining is not None
            and self.reset_after is not None
            and self.remaining <= max(1.0, self.limit * low_water)
        ):
            pause = max(0.0, self.reset_after) / (self.remaining + 1)
            return SlowDown(pause, f"{self.remaining} of {self.limit} calls left in this window")
        if self.usage_percent is not None and self.usage_percent >= 75:
            # Facebook gives no reset time: its windows roll over an hour; back off harder
            # as usage approaches 100 %.
            pause = 60.0 if self.usage_percent >= 90 else 10.0
            return SlowDown(pause, f"{self.usage_percent:.0f} % of the quota used")
        return None


def platform_now(headers: Headers, clock: Callable[[], float] = time.time) -> float:
    """The platform's time of the response (its ``Date`` header), else our clock."""
    raw = headers.get("date")
    if raw:
        try:
            return parsedate_to_datetime(raw).timestamp()
        except (TypeError, ValueError):
            pass
    return clock()


def retry_after(headers: Headers, now: float) -> float | None:
    """Seconds the ``Retry-After`` header asks for, if any."""
    raw = (headers.get("retry-after") or "").strip()
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(raw).timestamp() - now)
    except (TypeError, ValueError):
        return None


def _int(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        return int(float(raw.strip()))
    except ValueError:
        return None


def mastodon(headers: Headers, now: float) -> RateInfo | None:
    limit = _int(headers.get("x-ratelimit-limit"))
    remaining = _int(headers.get("x-ratelimit-remaining"))
    reset_raw = headers.get("x-ratelimit-reset")
    if limit is None and remaining is None and reset_raw is None:
        return None
    reset_after = None
    if reset_raw:
        try:
            reset = datetime.fromisoformat(reset_raw.strip().replace("Z", "+00:00"))
            reset_after = reset.timestamp() - now
        except ValueError:
            reset_after = None
    return RateInfo(limit=limit, remaining=remaining, reset_after=reset_after)


def ietf(headers: Headers, now: float) -> RateInfo | None:
    """``RateLimit-*``: Bluesky's (reset in epoch seconds) and the IETF draft's (delay)."""
    limit = _int(headers.get("ratelimit-limit"))
    remaining = _int(headers.get("ratelimit-remaining"))
    reset = _int(headers.get("ratelimit-reset"))
    if limit is None and remaining is None and reset is None:
        return None
    reset_after = None
    if reset is not None:
        reset_after = float(reset - now if reset > _EPOCH_THRESHOLD else reset)
    return RateInfo(limit=limit, remaining=remaining, reset_after=reset_after)


def facebook(headers: Headers) -> RateInfo | None:
    usage: list[float] = []
    regain: list[float] = []
    for name in ("x-app-usage", "x-page-usage", "x-ad-account-usage"):
        data = _json_object(headers.get(name))
        if data is not None:
            usage.extend(_percentages(data))
    buc = _json_object(headers.get("x-business-use-case-usage"))
    if buc is not None:
        for entries in buc.values():
            for entry in entries if isinstance(entries, list) else []:
                if isinstance(entry, dict):
                    usage.extend(_percentages(entry))
                    minutes = entry.get("estimated_time_to_regain_access")
                    if isinstance(minutes, int | float) and minutes > 0:
                        regain.append(float(minutes) * 60)
    if not usage and not regain:
        return None
    return RateInfo(
        usage_percent=max(usage) if usage else None,
        regain_after=max(regain) if regain else None,
    )


def _json_object(raw: str | None) -> dict[str, object] | None:
    if not raw:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _percentages(data: Mapping[str, object]) -> list[float]:
    keys = ("call_count", "total_cputime", "total_time", "acc_id_util_pct")
    return [float(v) for k, v in data.items() if k in keys and isinstance(v, int | float)]
