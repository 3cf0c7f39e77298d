"""Errors of the ingestion application: each says what was wrong and where.

Place in the pipeline: the fetch job will map these to outcomes. A
:class:`DocumentError` fails the run (never retried as a transport error), a
:class:`TransportError` is retried within the fetch's policy, :class:`PartialFetch` fails
the run with the rows it staged left unprocessable, :class:`InvalidRecord` only ever
quarantines one record.
"""

from __future__ import annotations

from herald.errors import HeraldError


class IngestError(HeraldError):
    """Base of every error the ingestion application raises on purpose."""


class InvalidRecord(IngestError, ValueError):
    """One record cannot be mapped: the reason names the element and attribute at fault."""


class DocumentError(IngestError, ValueError):
    """The document as a whole is broken or refused (not XML, truncated, hostile).

    ``offset`` is the byte offset in the document where the problem was seen, when known.
    """

    def __init__(self, message: str, offset: int | None = None) -> None:
        super().__init__(message)
        self.offset = offset


class FetchError(IngestError):
    """A snapshot could not be fetched whole.

    ``attempts`` is how many HTTP requests were made. ``retry_after`` is set when the
    provider asked to be called again later (seconds): the job may snooze that long.
    """

    def __init__(self, message: str, *, attempts: int, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.retry_after = retry_after


class TransportError(FetchError):
    """Connection, timeout or a retryable status (5xx, 429), after every allowed attempt."""


class HttpStatusError(FetchError):
    """The provider answered with a status that retrying cannot fix (4xx but 429)."""

    def __init__(self, message: str, *, status: int, attempts: int) -> None:
        super().__init__(message, attempts=attempts)
        self.status = status


class PartialFetch(FetchError):
    """The body broke off after records were handed to the sink: the run must fail.

    Records already delivered belong to this failed attempt; they must never become
    processable data.
    """

    def __init__(self, message: str, *, attempts: int, records: int, rejected: int) -> None:
        super().__init__(message, attempts=attempts)
        self.records = records
        self.rejected = rejected


class DeadlineExceeded(FetchError):
    """The fetch's total deadline passed (while waiting, connecting or reading)."""


class SnapshotRefused(FetchError):
    """The body arrived but the document is broken or hostile (wraps a DocumentError).

    Not a transport error: fetching the same document again would fail the same way.
    """

    def __init__(
        self, message: str, *, attempts: int, records: int, rejected: int, offset: int | None
    ) -> None:
        super().__init__(message, attempts=attempts)
        self.records = records
        self.rejected = rejected
        self.offset = offset
