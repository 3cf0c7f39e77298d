"""Errors of operator actions; the HTTP layer maps them to 404, 409 and 422."""

from __future__ import annotations

from herald.errors import HeraldError


class NotFound(HeraldError, LookupError):
    """The job or dead letter named does not exist (HTTP 404)."""

    def __init__(self, what: str, ident: int | str) -> None:
        super().__init__(f"{what} {ident} not found")
        self.what = what
        self.ident = ident


class Conflict(HeraldError):
    """The action does not apply to the target in its current state (HTTP 409)."""


class ActiveJobExists(Conflict):
    """A replay met an active job of the same object: that job is already in progress."""

    def __init__(self, kind: str, key: str | None, job_id: int, version: int) -> None:
        super().__init__(
            f"{kind}/{key} already has an active job {job_id} (version {version}); "
            "replay it after that job has finished"
        )
        self.job_id = job_id
        self.version = version


class AuditInfoMissing(HeraldError, ValueError):
    """A manual action was asked for without an actor or a reason (HTTP 422)."""
