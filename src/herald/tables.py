"""Plain-text tables for the CLI: aligned columns, nothing fancy, readable in any log."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any


def cell(value: Any, width: int = 60) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        text = value.strftime("%Y-%m-%d %H:%M:%S")
    elif isinstance(value, dict | list):
        text = json.dumps(value, default=str)
    else:
        text = str(value)
    text = text.replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: Sequence[dict[str, Any]], columns: Sequence[str]) -> str:
    """Render ``rows`` as an aligned table of ``columns``; says so when empty."""
    if not rows:
        return "(none)"
    cells = [[cell(row.get(col)) for col in columns] for row in rows]
    widths = [max(len(col), *(len(r[i]) for r in cells)) for i, col in enumerate(columns)]
    header = "  ".join(col.upper().ljust(w) for col, w in zip(columns, widths, strict=True))
    rule = "  ".join("-" * w for w in widths)
    body = ["  ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join([header, rule, *body])


def record(row: dict[str, Any]) -> str:
    """Render one record as ``field: value`` lines."""
    width = max(len(k) for k in row) if row else 0
    return "\n".join(f"{k.ljust(width)}  {cell(v, 200)}" for k, v in row.items())
