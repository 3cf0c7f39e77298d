"""Secrets never show, redaction catches credentials, tokens are encrypted with rotation."""

from __future__ import annotations

import json
import pickle

import pytest

from herald.ops.crypto import CipherError, TokenCipher
from herald.ops.secrets import REDACTED, Redactor, Secret, redact


def test_a_secret_never_shows_its_value() -> None:
    secret = Secret("s3cr3t-value")
    for shown in (str(secret), repr(secret), f"{secret}", f"{secret!r}", f"{secret:>20}"):
        assert "s3cr3t-value" not in shown
    assert secret.reveal() == "s3cr3t-value"
    assert secret == Secret("s3cr3t-value") and secret != Secret("other-value")
    with pytest.raises(TypeError):
        pickle.dumps(secret)
    with pytest.raises(TypeError):
        json.dumps({"token": secret})
    with pytest.raises(AttributeError):
        secret._value = "x"
    with pytest.raises(ValueError):
        Secret("")


def test_redactor_removes_known_values_and_credential_shapes() -> None:
    redactor = Redactor([Secret("known-token-123")])
    text = (
        "known-token-123 and Authorization: Bearer abcdef123456 and "
        "?access_token=EAAB1234&x=1 and eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl and "
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw and EAAG0123456789abcdefghijklmno"
    )
    cleaned = redactor.text(text)
    for value in (
        "known-token-123",
        "abcdef123456",
        "EAAB1234",
        "eyJzdWIiOi",
        "whsec_Mf",
        "EAAG0123",
    ):
        assert value not in cleaned
    assert "Bearer [redacted]" in cleaned and "access_token=[redacted]" in cleaned
    assert redact("a Bearer zzzzzzzzzz b") == f"a Bearer {REDACTED} b"


def test_redactor_blanks_secret_fields_in_json_bodies() -> None:
    redactor = Redactor()
    body = json.dumps({"accessJwt": "short", "nested": [{"password": "pw"}], "message": "fine"})
    kept = json.loads(redactor.body(body))
    assert kept == {"accessJwt": REDACTED, "nested": [{"password": REDACTED}], "message": "fine"}
    assert redactor.body("x" * 5000, limit=100).endswith("[4900 more characters]")


def test_tokens_round_trip_and_are_bound_to_their_context() -> None:
    cipher = TokenCipher([TokenCipher.generate_key()])
    stored = cipher.encrypt(Secret("page-token"), context="account:1")
    assert "page-token" not in stored
    assert cipher.decrypt(stored, context="account:1").reveal() == "page-token"
    with pytest.raises(CipherError, match="another owner"):
        cipher.decrypt(stored, context="account:2")
    with pytest.raises(CipherError, match="cannot decrypt"):
        cipher.decrypt(stored[:-4] + "AAAA", context="account:1")


def test_key_rotation_newest_encrypts_every_key_decrypts() -> None:
    old, new = TokenCipher.generate_key(), TokenCipher.generate_key()
    before = TokenCipher([old])
    stored = before.encrypt(Secret("token"), context="a")
    after = TokenCipher([new, old])
    assert after.decrypt(stored, context="a").reveal() == "token"
    assert after.needs_rotation(stored)
    rotated = after.rotate(stored, context="a")
    assert after.key_index(rotated) == 0 and not after.needs_rotation(rotated)
    assert TokenCipher([new]).decrypt(rotated, context="a").reveal() == "token"
    with pytest.raises(CipherError):
        before.decrypt(rotated, context="a")  # the old key alone cannot read the new value
    fresh = after.encrypt(Secret("other"), context="a")
    assert after.key_index(fresh) == 0


def test_keys_come_from_the_environment_with_clear_errors() -> None:
    key1, key2 = TokenCipher.generate_key(), TokenCipher.generate_key()
    cipher = TokenCipher.from_env({"HERALD_TOKEN_KEYS": f" {key1}, {key2}\n"})
    assert cipher.key_count == 2
    with pytest.raises(CipherError, match="HERALD_TOKEN_KEYS"):
        TokenCipher.from_env({})
    broken = key1[:-3] + "!!="
    with pytest.raises(CipherError, match="key 2 of 2") as info:
        TokenCipher.from_env({"HERALD_TOKEN_KEYS": f"{key2},{broken}"})
    assert broken not in str(info.value) and key2 not in str(info.value)
