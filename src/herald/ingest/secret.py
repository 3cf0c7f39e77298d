"""A secret value that never shows itself: for a provider's auth header.

Place in the pipeline: the provider registry will hold the auth value and hand it to
the fetcher as a :class:`Secret`; only the HTTP request ever reads it
(:meth:`Secret.reveal`). Its ``repr``/``str``/format are a mask, so it cannot leak into
an exception message, a log line, a job payload dump or a traceback's locals.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass, field
from typing import NoReturn

MASK = "********"


class Secret:
    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError("a secret must be a non-empty string")
        if any(c in value for c in "\r\n\x00"):
            raise ValueError("a secret header value cannot hold line breaks or NUL")
        self._value = value

    def reveal(self) -> str:
        """The value itself: call it only where it is sent, never where it is shown."""
        return self._value

    def __repr__(self) -> str:
        return f"Secret({MASK!r})"

    def __str__(self) -> str:
        return MASK

    def __format__(self, spec: str) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(Secret)

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret is not serialised; store it where secrets are stored")


@dataclass(frozen=True)
class AuthHeader:
    """The header a provider authenticates us by (``Authorization: Bearer ...`` by default)."""

    value: Secret
    name: str = field(default="Authorization")

    def __post_init__(self) -> None:
        if not self.name or not all(33 <= ord(c) < 127 and c != ":" for c in self.name):
            raise ValueError(f"{self.name!r} is not a valid header name")
