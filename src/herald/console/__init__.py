"""Herald's operator console: server-rendered HTML under ``/ui`` of the HTTP API.

Sign in with an API key; what a key sees and may do follows its scopes. Applications add
pages through :class:`ConsoleExtension` (see :mod:`herald.console.registry`); their
routes take the caller with :data:`Signed` and answer with :func:`render`.
"""

from herald.console.app import create_console, install
from herald.console.registry import (
    Action,
    ConsoleError,
    ConsoleExtension,
    Done,
    NavEntry,
    Option,
    Review,
    application_extension,
)
from herald.console.render import render
from herald.console.sessions import Caller, ConsoleSettings, Forbidden
from herald.console.web import Invalid, Missing, Signed

__all__ = [
    "Action",
    "Caller",
    "ConsoleError",
    "ConsoleExtension",
    "ConsoleSettings",
    "Done",
    "Forbidden",
    "Invalid",
    "Missing",
    "NavEntry",
    "Option",
    "Review",
    "Signed",
    "application_extension",
    "create_console",
    "install",
    "render",
]
