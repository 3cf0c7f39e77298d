"""The fault suite's SQL, one statement per file, loaded by name (as Herald's own is)."""

from __future__ import annotations

from functools import cache
from importlib import resources


@cache
def query(name: str) -> str:
    return resources.files(__name__).joinpath(f"{name}.sql").read_text()
