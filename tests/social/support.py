"""Helpers shared by the social tests."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from herald.social.adapters.base import Account, Post
from herald.social.errors import SocialError


def post(text: str = "Hello from Herald", **kwargs: Any) -> Post:
    return Post(text=text, created_at=datetime.now(UTC), **kwargs)


def leaks(error: BaseException, account: Account, *extra: str) -> list[str]:
    """Every credential of ``account`` (and ``extra`` values) visible anywhere in ``error``."""
    texts = [str(error), repr(error), repr(error.args)]
    if isinstance(error, SocialError):
        texts += [json.dumps(error.report()), str(error.body)]
    cause = error.__cause__ or error.__context__
    if cause is not None and cause is not error:
        texts += [str(cause), repr(cause)]
    values = [s.reveal() for s in account.secrets.values()] + list(extra)
    return [v for v in values if any(v in text for text in texts)]
