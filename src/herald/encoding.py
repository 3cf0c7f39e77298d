"""The one encoder of what handlers return and write: a result is stored the same way
whether the handler returns it or commits it with ``ctx.transaction(result)``."""

from __future__ import annotations

import json
import re
from typing import Any

# A NUL character as json.dumps escapes it (its backslash not itself escaped). PostgreSQL's
# jsonb refuses it, and one refused outcome would fail its whole batch again and again.
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def dump_result(result: Any) -> str | None:
    """JSON text for a job's result: values JSON cannot hold (datetimes, decimals...)
    become their string form, anything else its repr; never an error that could cost
    the job its recorded success."""
    if result is None:
        return None
    try:
        return storable(json.dumps(result, allow_nan=False, default=str))
    except (TypeError, ValueError):
        return storable(json.dumps(repr(result)))


def storable(text: str) -> str:
    """JSON text jsonb accepts: NUL characters become U+FFFD."""
    if "\\u0000" not in text:
        return text
    return _ESCAPED_NUL.sub(r"\1\\ufffd", text)


__all__ = ["dump_result", "storable"]
