"""Herald's HTTP API (FastAPI): ``create_app(herald_app, settings)``."""

from herald.api.app import create_app
from herald.api.auth import SCOPES, NewKey, Principal, create_key, list_keys, revoke_key
from herald.api.state import ApiSettings

__all__ = [
    "SCOPES",
    "ApiSettings",
    "NewKey",
    "Principal",
    "create_app",
    "create_key",
    "list_keys",
    "revoke_key",
]
