"""What went wrong with a platform call, as a typed outcome the job can act on.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): each
step lets a :class:`SocialError` escape; :func:`to_job_outcome` turns it into the
engine's outcome, so the job snoozes (no attempt used), retries with backoff, or goes
to the dead letters at once, and a 401 also marks the account for re-authorisation.

=========================================  ==================  ======================
response                                   error               job outcome
=========================================  ==================  ======================
429; 503 with Retry-After or a reset time  :class:`RateLimited` snooze for ``delay``
media still being processed                :class:`NotReady`    snooze for ``delay``
5xx, 408, timeout, dropped connection      :class:`TransientError` retry (backoff)
400, 403, 404, 409, 410, 413, 422, ...     :class:`PermanentError` dead letter
401 (token invalid, expired or revoked)    :class:`ReauthRequired` dead letter,
                                                                   account flagged
=========================================  ==================  ======================

Adapters refine this by the platform's own error codes (Facebook answers 400 for an
expired token and for throttling; Bluesky answers 400 ``ExpiredToken``). Every error
keeps the platform's last error body, redacted, for the operator (:meth:`report`).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any, ClassVar

from herald.errors import HeraldError, JobOutcome, Permanent, Retry, Snooze
from herald.ops.secrets import Redactor
from herald.social import ratelimit
from herald.social.ratelimit import Headers, RateInfo

DEFAULT_RATE_LIMIT_SNOOZE = 60.0


class Disposition(enum.StrEnum):
    SNOOZE = "snooze"
    RETRY = "retry"
    PERMANENT = "permanent"
    REAUTH = "reauth"


class SocialError(HeraldError):
    """A failed platform call (or media fetch); ``str()`` is already redacted."""

    disposition: ClassVar[Disposition] = Disposition.RETRY

    def __init__(
        self,
        message: str,
        *,
        platform: str = "",
        operation: str = "",
        status: int | None = None,
        code: str | None = None,
        body: str | None = None,
        delay: float | None = None,
        rate: RateInfo | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.platform = platform
        self.operation = operation
        self.status = status
        # The platform's own error name or number (Bluesky "ExpiredToken", Graph "190").
        self.code = code
        # The platform's error body, redacted and truncated.
        self.body = body
        self.delay = None if delay is None else ratelimit.clamp_delay(delay)
        self.rate = rate

    @property
    def needs_reauthorisation(self) -> bool:
        return self.disposition is Disposition.REAUTH

    def report(self) -> dict[str, Any]:
        """A JSON-able record for the job's last error and the dead letter."""
        return {
            "error": type(self).__name__,
            "disposition": self.disposition.value,
            "platform": self.platform,
            "operation": self.operation,
            "status": self.status,
            "code": self.code,
            "message": self.message,
            "body": self.body,
            "delay": self.delay,
        }

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, status={self.status!r})"


class RateLimited(SocialError):
    """The platform asked us to wait: snooze until ``delay`` has passed."""

    disposition = Disposition.SNOOZE


class NotReady(SocialError):
    """Something the call needs is not ready yet (media still processing): snooze."""

    disposition = Disposition.SNOOZE


class TransientError(SocialError):
    """Worth another attempt after backoff: server errors, timeouts, dropped connections."""

    disposition = Disposition.RETRY


class PermanentError(SocialError):
    """Retrying cannot help: the request, the account or the media is wrong."""

    disposition = Disposition.PERMANENT


class ReauthRequired(PermanentError):
    """The credentials no longer work: the account must be authorised again."""

    disposition = Disposition.REAUTH


class InvalidPost(PermanentError):
    """Refused before any call: the post breaks a documented limit of the platform."""


def to_job_outcome(error: SocialError) -> JobOutcome:
    """The engine outcome for ``error`` (raise it from the step)."""
    text = str(error)
    if error.disposition is Disposition.SNOOZE:
        return Snooze(error.delay or DEFAULT_RATE_LIMIT_SNOOZE, text)
    if error.disposition is Disposition.RETRY:
        return Retry(text, delay=error.delay)
    return Permanent(text)


def classify(
    status: int,
    headers: Headers,
    body: bytes | str,
    *,
    platform: str,
    operation: str,
    redactor: Redactor,
    now: float,
    rate: RateInfo | None = None,
    detail: str | None = None,
    code: str | None = None,
    default_snooze: float = DEFAULT_RATE_LIMIT_SNOOZE,
) -> SocialError:
    """The generic classification of an HTTP error response.

    ``detail`` is the platform's own message (from its error body), ``rate`` what its
    rate-limit headers said; ``now`` is the platform's time of the response.
    """
    kept = redactor.body(body) if body else None
    message = f"{platform} {operation}: HTTP {status}"
    if detail:
        message += f" - {redactor.text(detail)[:300]}"
    kwargs: dict[str, Any] = {
        "platform": platform,
        "operation": operation,
        "status": status,
        "code": code,
        "body": kept,
        "rate": rate,
    }
    wait = rate_limit_delay(headers, now, rate)
    if status == 429:
        return RateLimited(message, delay=wait or default_snooze, **kwargs)
    if status == 503 and wait is not None:
        return RateLimited(message, delay=wait, **kwargs)
    if status == 401:
        return ReauthRequired(message, **kwargs)
    if status >= 500 or status == 408:
        return TransientError(message, **kwargs)
    return PermanentError(message, **kwargs)


def rate_limit_delay(headers: Headers, now: float, rate: RateInfo | None) -> float | None:
    """Seconds to wait: ``Retry-After`` first, else the platform's reset time."""
    wait = ratelimit.retry_after(headers, now)
    if wait is not None:
        return wait
    if rate is not None:
        if rate.regain_after:
            return rate.regain_after
        if rate.reset_after is not None:
            return max(0.0, rate.reset_after)
    return None


def error_text(body: Mapping[str, Any] | None, *keys: str) -> str | None:
    """The first string among ``keys`` of a JSON error body."""
    if not body:
        return None
    for key in keys:
        value = body.get(key)
        if isinstance(value, str) and value:
            return value
    return None
