"""Snapshot ingestion: provider snapshots streamed into canonical plan records.

The parts that need no database (the staging, processing and search parts build on them):

- :mod:`~herald.ingest.xmlstream`: the hardened incremental XML parser (no DTD, bounded
  depth and sizes, malformed records skipped and reported with their raw bytes).
- :mod:`~herald.ingest.records`: the canonical :class:`Plan` and :class:`Zone`.
- :mod:`~herald.ingest.mapping`, :mod:`~herald.ingest.eventplans`,
  :mod:`~herald.ingest.formats`: provider formats, the shipped ``event-plans`` one, and
  the registry a new format is added to.
- :mod:`~herald.ingest.fetch`: the HTTP fetch that streams a body into the parser and
  hands batches to a sink, with bounded retries and a secret auth header
  (:mod:`~herald.ingest.secret`).
- :mod:`~herald.ingest.sandbox`: a provider on loopback for tests, demos and benchmarks.
"""

from herald.ingest.errors import (
    DeadlineExceeded,
    DocumentError,
    FetchError,
    HttpStatusError,
    IngestError,
    InvalidRecord,
    PartialFetch,
    SnapshotRefused,
    TransportError,
)
from herald.ingest.fetch import Batch, FetchPolicy, FetchResult, fetch_snapshot
from herald.ingest.formats import format_names, new_parser, register_format, snapshot_format
from herald.ingest.mapping import MappingContext, SnapshotFormat
from herald.ingest.records import Plan, Zone
from herald.ingest.secret import AuthHeader, Secret
from herald.ingest.xmlstream import ParseLimits, RawElement, RecordLayout, Rejected, StreamParser

__all__ = [
    "AuthHeader",
    "Batch",
    "DeadlineExceeded",
    "DocumentError",
    "FetchError",
    "FetchPolicy",
    "FetchResult",
    "HttpStatusError",
    "IngestError",
    "InvalidRecord",
    "MappingContext",
    "ParseLimits",
    "PartialFetch",
    "Plan",
    "RawElement",
    "RecordLayout",
    "Rejected",
    "Secret",
    "SnapshotFormat",
    "SnapshotRefused",
    "StreamParser",
    "TransportError",
    "Zone",
    "fetch_snapshot",
    "format_names",
    "new_parser",
    "register_format",
    "snapshot_format",
]
