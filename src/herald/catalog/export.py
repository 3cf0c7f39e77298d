"""The export service: one pass over a source writes every requested format.

Rows are read in batches; each batch is encoded per format, hashed with SHA-256,
counted and written to that format's upload, so memory holds one batch whatever the
size of the source. Files are committed only after the last row, together: any error
before that aborts every upload and leaves nothing visible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from herald import tenancy
from herald.catalog.errors import DataError, ExportConflict
from herald.catalog.formats import (
    FORMATS,
    Batch,
    Encoder,
    FileFormat,
    XmlEncoder,
    encoder,
    file_format,
)
from herald.catalog.sources import RecordSource
from herald.catalog.store import ExportStore, Upload, check_segment

Progress = Callable[[int], None]


@dataclass(frozen=True)
class ExportedFile:
    """One committed file, with what the catalog needs to describe it."""

    key: str
    name: str
    format: FileFormat
    byte_size: int
    record_count: int
    sha256: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly form, e.g. for a job checkpoint."""
        return {
            "key": self.key,
            "name": self.name,
            "format": self.format.name,
            "byte_size": self.byte_size,
            "record_count": self.record_count,
            "sha256": self.sha256,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ExportedFile:
        return cls(
            key=str(data["key"]),
            name=str(data["name"]),
            format=file_format(str(data["format"])),
            byte_size=int(data["byte_size"]),
            record_count=int(data["record_count"]),
            sha256=str(data["sha256"]),
        )


@dataclass(frozen=True)
class ExportResult:
    columns: list[str]
    record_count: int
    files: list[ExportedFile]
    xml_names: list[str] | None = None  # the columns' names in the XML file, if written

    def column_names(self) -> list[dict[str, str]]:
        """Each column's name, with its XML name where the XML file names it otherwise."""
        names = self.xml_names or self.columns
        return [
            {"name": c} if x == c else {"name": c, "xml_name": x}
            for c, x in zip(self.columns, names, strict=True)
        ]


def version_prefix(dataset_id: str, version: int) -> str:
    """The immutable folder of one dataset version in the export store: under the
    acting tenant's own folder (``tenants/<tenant>/``), except for the default tenant,
    whose files stay where a single-tenant install always put them."""
    if version < 1:
        raise ValueError(f"version must be a positive integer, got {version}")
    folder = f"{check_segment(dataset_id, 'dataset id')}/v{version}"
    tenant = tenancy.current()
    if tenant in (tenancy.DEFAULT, tenancy.PLATFORM):
        return folder
    return f"tenants/{tenant}/{folder}"


class _Sink:
    """One format's encoder, upload, running hash and byte count."""

    def __init__(self, fmt: FileFormat, enc: Encoder, upload: Upload, name: str) -> None:
        self.format = fmt
        self.encoder = enc
        self.upload = upload
        self.name = name
        self.hash = hashlib.sha256()
        self.size = 0

    def emit(self, text: str) -> None:
        if text:
            data = text.encode("utf-8")
            self.hash.update(data)
            self.size += len(data)
            self.upload.write(data)


def export_records(
    source: RecordSource,
    store: ExportStore,
    prefix: str,
    basename: str,
    formats: Sequence[str] = tuple(FORMATS),
    progress: Progress | None = None,
    batch_size: int = 2_000,
    progress_every: int = 20_000,
) -> ExportResult:
    """Export every row of ``source`` to ``<prefix>/<basename>.<ext>`` per format.

    ``progress(records_done)`` is called about every ``progress_every`` records and once
    at the end; a pipeline uses it to heartbeat its lease. If it raises, the export is
    aborted and nothing becomes visible.
    """
    check_segment(basename, "file base name")
    chosen = [file_format(name) for name in dict.fromkeys(formats)]
    if not chosen:
        raise ValueError("at least one export format is required")
    keys = {fmt.name: f"{prefix}/{basename}.{fmt.extension}" for fmt in chosen}
    for key in keys.values():
        if store.exists(key):
            raise ExportConflict(f"{key} already exists and is immutable")

    try:
        return _export(source, store, keys, chosen, progress, batch_size, progress_every)
    except DataError as exc:
        raise exc.within(source.describe()) from None


def _export(
    source: RecordSource,
    store: ExportStore,
    keys: dict[str, str],
    chosen: list[FileFormat],
    progress: Progress | None,
    batch_size: int,
    progress_every: int,
) -> ExportResult:
    with source.open() as records:
        encoders = [(fmt, encoder(fmt, records.columns)) for fmt in chosen]
        sinks: list[_Sink] = []
        committed: list[str] = []
        try:
            for fmt, enc in encoders:
                key = keys[fmt.name]
                sinks.append(_Sink(fmt, enc, store.begin(key), key.rsplit("/", 1)[-1]))
            count = _pump(
                records.rows, records.columns, sinks, progress, batch_size, progress_every
            )
            for sink in sinks:
                sink.emit(sink.encoder.footer())
            for sink in sinks:
                sink.upload.commit()
                committed.append(sink.upload.key)
        except BaseException:
            for sink in sinks:
                sink.upload.abort()
            for key in committed:  # all or nothing, even if a later commit failed
                store.delete(key)
            raise
    files = [
        ExportedFile(
            key=sink.upload.key,
            name=sink.name,
            format=sink.format,
            byte_size=sink.size,
            record_count=count,
            sha256=sink.hash.hexdigest(),
        )
        for sink in sinks
    ]
    xml = next((enc for _fmt, enc in encoders if isinstance(enc, XmlEncoder)), None)
    return ExportResult(
        columns=list(records.columns),
        record_count=count,
        files=files,
        xml_names=xml.names if xml is not None else None,
    )


def _pump(
    rows: Any,
    columns: list[str],
    sinks: list[_Sink],
    progress: Progress | None,
    batch_size: int,
    progress_every: int,
) -> int:
    for sink in sinks:
        sink.emit(sink.encoder.header())
    count = 0
    next_report = progress_every
    iterator = iter(rows)
    width = len(columns)
    while rows := list(islice(iterator, batch_size)):
        batch = Batch(rows, width, first=count + 1)
        for sink in sinks:
            try:
                sink.emit(sink.encoder.batch(batch))
            except UnicodeEncodeError:
                raise batch.unencodable() from None
        count += batch.size
        if progress is not None and count >= next_report:
            progress(count)
            next_report = count + progress_every
    if progress is not None:
        progress(count)
    return count
