"""What the API shows of stored errors and values: never a traceback or a server path.

Handlers' errors are stored with their traceback (for operators reading the database
and the logs); through the API a caller sees each error's kind, type and message only,
with absolute file-system paths cut to their last component. Stored values nested too
deep to encode (stored before admission bounded depth) are replaced by a note, so
reading a job never fails on what it holds.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from herald.payloads import MAX_DEPTH, too_deep

ERROR_FIELDS = ("at", "attempt", "kind", "type", "message")
# An absolute POSIX path of two or more segments not inside a URL ("https://h/a/b").
_PATH = re.compile(r"(?<![\w.~:/-])/(?:[^\s'\"/<>]+/)+([^\s'\"/<>,;:)\]]*)")
SHOWN_DEPTH = 2 * MAX_DEPTH  # deeper stored values are replaced (pydantic stops near 255)


def redact(text: str | None) -> str | None:
    """``text`` with absolute paths cut to ``…/name``."""
    if text is None:
        return None
    return _PATH.sub(lambda m: f"…/{m.group(1)}", text)


def public_errors(errors: Iterable[Any] | None) -> list[dict[str, Any]]:
    shown = []
    for error in errors or ():
        if not isinstance(error, Mapping):
            continue
        item = {name: error.get(name) for name in ERROR_FIELDS if name in error}
        if isinstance(item.get("message"), str):
            item["message"] = redact(item["message"])
        shown.append(item)
    return shown


def shown_value(value: Any) -> Any:
    if too_deep(value, SHOWN_DEPTH):
        return {"_omitted": f"nested deeper than {SHOWN_DEPTH} levels"}
    return value


def public_row(row: dict[str, Any], values: Iterable[str] = ()) -> dict[str, Any]:
    """A stored row as the API shows it: errors without tracebacks, paths cut."""
    shown = dict(row)
    if "errors" in shown:
        shown["errors"] = public_errors(shown["errors"])
    for name in ("last_error", "cleanup_last_error", "error"):
        if isinstance(shown.get(name), str):
            shown[name] = redact(shown[name])
    for name in values:
        if name in shown:
            shown[name] = shown_value(shown[name])
    return shown
