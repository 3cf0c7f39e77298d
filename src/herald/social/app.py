"""The social publishing application: ``herald --app herald.social.app:app worker``.

Built on first use from the environment (``HERALD_*``, ``HERALD_SOCIAL_*``,
``HERALD_TOKEN_KEYS``), so importing this module reads no settings.
"""

from __future__ import annotations

from typing import Any

from herald.config import Settings
from herald.registry import Herald
from herald.social.pipeline import register_social


def create_app(settings: Settings | None = None) -> Herald:
    app = Herald()
    register_social(app, settings or Settings.from_env())
    return app


_default_app: Herald | None = None


def __getattr__(name: str) -> Any:
    global _default_app
    if name == "app":
        if _default_app is None:
            _default_app = create_app()
        return _default_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
