"""The application ingestion worker subprocesses run: ``--app tests.ingest.apps:app``.

Built on first use from the process's ``HERALD_*`` and ``HERALD_INGEST_*`` variables.
"""

from __future__ import annotations

from typing import Any

from herald.config import Settings
from herald.ingest.jobs import IngestConfig, register_ingest
from herald.registry import Herald

_app: Herald | None = None


def __getattr__(name: str) -> Any:
    global _app
    if name != "app":
        raise AttributeError(name)
    if _app is None:
        _app = Herald()
        register_ingest(_app, Settings.from_env(), IngestConfig.from_env())
    return _app
