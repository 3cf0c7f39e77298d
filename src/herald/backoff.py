"""Exponential backoff with jitter: about 1 s, 5 s, 25 s, 125 s, ... capped."""

from __future__ import annotations

import random
from dataclasses import dataclass

from herald.errors import MAX_DELAY


@dataclass(frozen=True)
class Backoff:
    """Delay before retry ``n`` (n = 1 after the first failed attempt).

    The nominal delay is ``base * factor ** (n - 1)`` capped at ``cap``; the actual delay
    is drawn uniformly from ``nominal * (1 - jitter)`` .. ``nominal * (1 + jitter)`` so a
    burst of failures does not retry in lock step.
    """

    base: float = 1.0
    factor: float = 5.0
    cap: float = 3600.0
    jitter: float = 0.2

    def __post_init__(self) -> None:
        if self.base < 0 or self.factor < 1 or self.cap < 0 or not 0 <= self.jitter < 1:
            raise ValueError("backoff needs base >= 0, factor >= 1, cap >= 0, 0 <= jitter < 1")
        # With jitter on top, the longest delay must still be one the database can store.
        if not self.cap * (1 + self.jitter) <= MAX_DELAY:
            raise ValueError(f"backoff cap must leave delays within {MAX_DELAY:.0f} seconds")

    def nominal(self, retry: int) -> float:
        exponent = max(0, retry - 1)
        # Avoid float overflow for absurd retry counts: the cap wins long before.
        if exponent > 64:
            return self.cap
        return float(min(self.cap, self.base * self.factor**exponent))

    def bounds(self, retry: int) -> tuple[float, float]:
        nominal = self.nominal(retry)
        return nominal * (1 - self.jitter), nominal * (1 + self.jitter)

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        low, high = self.bounds(retry)
        return (rng or random).uniform(low, high)
