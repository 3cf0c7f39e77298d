"""Encryption of stored credentials, with keys from the environment and key rotation.

Shared by the applications that hold credentials (a social account's access token, an
ingestion provider's auth header): a credential is stored only as the output of
:meth:`TokenCipher.encrypt`; the step that needs it decrypts it into a
:class:`~herald.ops.secrets.Secret` and never writes the plain value anywhere.

Keys are Fernet keys (AES-128-CBC with HMAC-SHA256, authenticated, timestamped), listed
newest first in ``HERALD_TOKEN_KEYS`` separated by commas or whitespace. The newest key
encrypts; every listed key decrypts. To rotate: put a new key first, re-encrypt stored
tokens with :meth:`TokenCipher.rotate` (``needs_rotation`` tells which), then drop the
old key.

``context`` binds a ciphertext to what it belongs to (e.g. ``"account:42:access_token"``):
a ciphertext copied onto another account row does not decrypt there.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

from herald.ops.secrets import Secret

KEYS_VARIABLE = "HERALD_TOKEN_KEYS"
_MAGIC = b"herald-secret-v1\x00"


class CipherError(ValueError):
    """Keys are missing or unusable, or a ciphertext cannot be decrypted."""


class TokenCipher:
    """Encrypts with the newest key, decrypts with any configured key."""

    def __init__(self, keys: Sequence[str | bytes]) -> None:
        if not keys:
            raise CipherError(
                f"no encryption key configured: set {KEYS_VARIABLE} to one or more Fernet "
                "keys, newest first (make one with TokenCipher.generate_key())"
            )
        fernets = []
        for position, key in enumerate(keys, start=1):
            try:
                fernets.append(Fernet(key))
            except (ValueError, TypeError):
                # Never echo the key itself: it may be a real key with a typo.
                raise CipherError(
                    f"encryption key {position} of {len(keys)} is not a Fernet key "
                    "(32 bytes, url-safe base64 encoded, 44 characters)"
                ) from None
        self._fernets = fernets
        self._multi = MultiFernet(fernets)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> TokenCipher:
        env = os.environ if environ is None else environ
        raw = env.get(KEYS_VARIABLE, "")
        return cls([k for k in re.split(r"[\s,]+", raw) if k])

    @staticmethod
    def generate_key() -> str:
        return Fernet.generate_key().decode("ascii")

    @property
    def key_count(self) -> int:
        return len(self._fernets)

    def encrypt(self, secret: Secret, *, context: str = "") -> str:
        plain = _MAGIC + _context(context) + b"\x00" + secret.reveal().encode("utf-8")
        return self._multi.encrypt(plain).decode("ascii")

    def decrypt(self, ciphertext: str, *, context: str = "") -> Secret:
        try:
            plain = self._multi.decrypt(ciphertext.encode("ascii"))
        except (InvalidToken, UnicodeEncodeError):
            raise CipherError(
                "cannot decrypt the stored credential with any configured key (was its key "
                f"removed from {KEYS_VARIABLE}, or the value altered?)"
            ) from None
        return Secret(_unwrap(plain, context))

    def key_index(self, ciphertext: str) -> int:
        """Which configured key (0 = newest) decrypts ``ciphertext``."""
        token = ciphertext.encode("ascii")
        for index, fernet in enumerate(self._fernets):
            try:
                fernet.decrypt(token)
            except InvalidToken:
                continue
            return index
        raise CipherError("no configured key decrypts this credential")

    def needs_rotation(self, ciphertext: str) -> bool:
        return self.key_index(ciphertext) != 0

    def rotate(self, ciphertext: str, *, context: str = "") -> str:
        """The same secret, encrypted under the newest key (checks the context too)."""
        return self.encrypt(self.decrypt(ciphertext, context=context), context=context)


def _context(context: str) -> bytes:
    if "\x00" in context:
        raise CipherError("an encryption context must not contain NUL")
    return context.encode("utf-8")


def _unwrap(plain: bytes, context: str) -> str:
    if not plain.startswith(_MAGIC):
        raise CipherError("the decrypted value is not a Herald credential")
    bound, sep, value = plain[len(_MAGIC) :].partition(b"\x00")
    if not sep:
        raise CipherError("the decrypted value is not a Herald credential")
    if bound != _context(context):
        raise CipherError(
            "this credential was encrypted for another owner (context mismatch): it may "
            "have been copied from another row"
        )
    return value.decode("utf-8")
