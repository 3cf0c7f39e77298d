"""Secrets that cannot leak by accident, and redaction of text and data shown to people.

Shared by the applications that talk to outside services: every credential a client
holds is a :class:`Secret`; every error body, log line or dead letter that leaves it goes
through a :class:`Redactor` first, so no access token, refresh token, password or
signing secret is ever written anywhere readable.

A :class:`Secret` shows ``'***'`` in ``str``, ``repr`` and f-strings, refuses pickling
and JSON encoding, and compares in constant time. The only way to the value is the
explicit :meth:`Secret.reveal`, used where the value goes on the wire.
"""

from __future__ import annotations

import hmac
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

MASK = "***"
REDACTED = "[redacted]"

# Keys whose values are credentials in the JSON of every platform we speak to (and ours).
SECRET_KEYS = frozenset(
    {
        "access_token",
        "accessjwt",
        "refresh_token",
        "refreshjwt",
        "password",
        "client_secret",
        "token",
        "secret",
        "signing_secret",
        "app_password",
        "authorization",
        "user_access_token",
        "page_access_token",
        "input_token",
    }
)

# Credentials recognisable by their shape, whatever surrounds them.
_PATTERNS = (
    # Authorization header values: "Bearer abc", "OAuth abc".
    re.compile(r"(?i)\b(bearer|oauth)\s+[A-Za-z0-9._~+/=-]{6,}"),
    # access_token=... in a query string or form body.
    re.compile(r"(?i)\b(access_token|refresh_token|client_secret|password|token)=[^&\s\"']+"),
    # JSON Web Tokens (Bluesky session tokens): three base64url parts starting "eyJ".
    re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
    # Standard Webhooks signing secrets.
    re.compile(r"\bwhsec_[A-Za-z0-9+/=]{8,}"),
    # Facebook access tokens start with EAA and are long.
    re.compile(r"\bEAA[A-Za-z0-9]{20,}"),
)


class Secret:
    """A credential: never shown, never serialised, compared in constant time."""

    __slots__ = ("_value",)
    _value: str

    def __init__(self, value: str) -> None:
        if not isinstance(value, str):
            raise TypeError("a Secret holds a str")
        if value == "":
            raise ValueError("a Secret must not be empty")
        object.__setattr__(self, "_value", value)

    def reveal(self) -> str:
        """The value itself: call it only where it goes on the wire."""
        return self._value

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError("a Secret is immutable")

    def __repr__(self) -> str:
        return f"Secret('{MASK}')"

    def __str__(self) -> str:
        return MASK

    def __format__(self, spec: str) -> str:
        return MASK

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash((Secret, self._value))

    def __reduce__(self) -> NoReturn:
        raise TypeError("a Secret cannot be pickled; encrypt it with TokenCipher instead")

    def __bool__(self) -> bool:
        return True


class Redactor:
    """Removes known secret values and anything shaped like a credential.

    ``secrets`` are the exact values to remove (an adapter passes its account's
    credentials and session tokens); the patterns above catch the rest, e.g. a token a
    platform echoes in an error message that we never held.
    """

    def __init__(self, secrets: Iterable[Secret | str] = ()) -> None:
        self._values: set[str] = set()
        for secret in secrets:
            self.add(secret)

    def add(self, secret: Secret | str) -> None:
        value = secret.reveal() if isinstance(secret, Secret) else secret
        # Very short values would blank out ordinary words; no real credential is that short.
        if len(value) >= 4:
            self._values.add(value)

    def text(self, value: str) -> str:
        # Longest first, so a secret containing another is removed whole.
        for secret in sorted(self._values, key=len, reverse=True):
            value = value.replace(secret, REDACTED)
        for pattern in _PATTERNS:
            value = pattern.sub(_keep_label, value)
        return value

    def data(self, value: Any) -> Any:
        """A copy of JSON-like data with secret-named keys blanked and strings scrubbed."""
        if isinstance(value, Mapping):
            return {
                str(k): (REDACTED if str(k).lower() in SECRET_KEYS else self.data(v))
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self.data(v) for v in value]
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Secret):
            return REDACTED
        return value

    def body(self, raw: bytes | str, limit: int = 4096) -> str:
        """A response body fit to keep for an operator: redacted and at most ``limit`` chars.

        JSON is redacted structurally (so a ``"password"`` field is blanked even when its
        value looks harmless) and re-serialised compactly.
        """
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        try:
            parsed = json.loads(text)
        except ValueError:
            cleaned = self.text(text)
        else:
            cleaned = json.dumps(self.data(parsed), ensure_ascii=False, separators=(",", ":"))
        if len(cleaned) > limit:
            cleaned = cleaned[:limit] + f"... [{len(cleaned) - limit} more characters]"
        return cleaned


def _keep_label(match: re.Match[str]) -> str:
    # Keep "Bearer" / "access_token=" so the reader sees what was removed.
    label = match.group(1) if match.groups() else None
    if label is None:
        return REDACTED
    separator = "=" if "=" in match.group(0) else " "
    return f"{label}{separator}{REDACTED}"


def redact(value: str, secrets: Iterable[Secret | str] = ()) -> str:
    """Scrub one string (see :class:`Redactor`)."""
    return Redactor(secrets).text(value)
