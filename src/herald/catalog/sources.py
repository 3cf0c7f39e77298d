"""Sources of records: a PostgreSQL query or table, a CSV file, a JSON Lines file.

A source is opened as a context manager yielding :class:`Records`: the column names
(known before the first row, so writers can emit headers) and an iterator of rows, each
a tuple aligned with the columns. Every source streams: nothing holds more than one
fetch batch in memory, whatever the number of rows.
"""

from __future__ import annotations

import contextlib
import csv
import datetime
import json
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psycopg
from psycopg import sql as pgsql

from herald import sql
from herald.catalog.errors import DataError, SourceError

Row = Sequence[object]


@dataclass
class Records:
    """An open stream of rows with their column names."""

    columns: list[str]
    rows: Iterator[Row]


class RecordSource(Protocol):
    """Anything that can be opened into a stream of :class:`Records`."""

    def open(self) -> AbstractContextManager[Records]: ...

    def describe(self) -> str:
        """A short human description (shown in errors and progress)."""
        ...


def _check_columns(columns: Sequence[str], origin: str) -> list[str]:
    names = [str(c) for c in columns]
    if not names:
        raise DataError("names no columns", origin=origin)
    seen: set[str] = set()
    for number, name in enumerate(names, start=1):
        if name == "":
            raise DataError(f"column {number} has an empty name", origin=origin)
        if _SURROGATE.search(name):
            raise DataError(
                f"the name of column {number} holds a lone surrogate, which UTF-8 cannot encode",
                origin=origin,
            )
        if name in seen:
            raise DataError(f"has the column {name!r} twice", origin=origin)
        seen.add(name)
    return names


_SURROGATE = re.compile("[\\ud800-\\udfff]")


@dataclass(frozen=True)
class CsvSource:
    """A UTF-8 CSV file whose first row names the columns; every value is text. A
    byte-order mark (as spreadsheets write "CSV UTF-8") is skipped."""

    path: Path
    delimiter: str = ","

    def describe(self) -> str:
        return f"CSV file {self.path.name}"

    @contextmanager
    def open(self) -> Iterator[Records]:
        origin = self.describe()
        try:
            handle = self.path.open(encoding="utf-8-sig", newline="")
        except OSError as exc:
            raise SourceError(f"cannot read {origin}: {exc.strerror}") from None
        with handle:
            reader = csv.reader(handle, delimiter=self.delimiter)
            try:
                header = next(reader)
            except StopIteration:
                raise DataError("is empty (no header row)", origin=origin) from None
            except UnicodeDecodeError:
                raise DataError("is not UTF-8 text", line=1, origin=origin) from None
            except csv.Error as exc:
                raise DataError(str(exc), line=reader.line_num, origin=origin) from None
            columns = _check_columns(header, origin)
            yield Records(columns, self._rows(reader, columns))

    def _rows(self, reader: Any, columns: list[str]) -> Iterator[Row]:
        origin, width, record = self.describe(), len(columns), 0
        try:
            for row in reader:
                if not row:  # a blank line carries no record
                    continue
                record += 1
                if len(row) != width:
                    raise DataError(
                        f"{len(row)} values for {width} columns",
                        record=record,
                        line=reader.line_num,
                        origin=origin,
                    )
                yield row
        except UnicodeDecodeError:
            raise DataError(
                "is not UTF-8 text", record=record + 1, line=reader.line_num + 1, origin=origin
            ) from None
        except csv.Error as exc:
            raise DataError(
                str(exc), record=record + 1, line=reader.line_num, origin=origin
            ) from None


_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class JsonLinesSource:
    """A UTF-8 file of one flat JSON object per line; the first object fixes the columns.

    A later object may omit a column (it becomes null) but may not add one, and values
    must be scalars: the CSV and XML outputs have no place for nested structures.
    """

    path: Path

    def describe(self) -> str:
        return f"JSON Lines file {self.path.name}"

    @contextmanager
    def open(self) -> Iterator[Records]:
        try:
            handle = self.path.open(encoding="utf-8-sig")
        except OSError as exc:
            raise SourceError(f"cannot read {self.describe()}: {exc.strerror}") from None
        with handle:
            lines = self._objects(handle)
            first = next(lines, None)
            if first is None:
                raise DataError("holds no records", origin=self.describe())
            columns = _check_columns(list(first[1]), self.describe())
            yield Records(columns, self._rows(first, lines, columns))

    def _objects(self, handle: Any) -> Iterator[tuple[int, Mapping[str, object]]]:
        number, origin = 0, self.describe()
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DataError(exc.msg, line=number, origin=origin) from None
                if not isinstance(value, dict):
                    raise DataError("not a JSON object", line=number, origin=origin)
                yield number, value
        except UnicodeDecodeError:
            raise DataError("is not UTF-8 text", line=number + 1, origin=origin) from None

    def _rows(
        self,
        first: tuple[int, Mapping[str, object]],
        rest: Iterator[tuple[int, Mapping[str, object]]],
        columns: list[str],
    ) -> Iterator[Row]:
        known = set(columns)

        origin = self.describe()

        def convert(number: int, obj: Mapping[str, object]) -> Row:
            if len(obj) > len(columns) or not known.issuperset(obj):
                extra = sorted(set(obj) - known)
                raise DataError(
                    f"unknown field(s) {extra} (the first record fixes the columns)",
                    line=number,
                    origin=origin,
                )
            row = tuple(obj.get(c) for c in columns)
            for column, value in zip(columns, row, strict=True):
                if not isinstance(value, _SCALARS):
                    raise DataError(
                        f"a nested {type(value).__name__}; only flat records can be exported",
                        line=number,
                        column=column,
                        origin=origin,
                    )
            return row

        yield convert(*first)
        for number, obj in rest:
            yield convert(number, obj)


@dataclass(frozen=True)
class PostgresSource:
    """Rows of a query, streamed through a server-side cursor in its own transaction.

    ``query`` comes from the dataset's configuration, not from Herald's own SQL; use
    :meth:`table` to stream a whole table by name.
    """

    conninfo: str
    query: str | pgsql.SQL | pgsql.Composed
    params: Mapping[str, Any] = field(default_factory=dict)
    batch_size: int = 5_000
    label: str = "PostgreSQL query"

    @classmethod
    def table(cls, conninfo: str, table: str, batch_size: int = 5_000) -> PostgresSource:
        query = sql.query_with_identifiers("catalog_source_table", table=table)
        return cls(conninfo, query, batch_size=batch_size, label=f"PostgreSQL table {table}")

    def describe(self) -> str:
        return self.label

    @contextmanager
    def open(self) -> Iterator[Records]:
        try:
            conn = psycopg.connect(self.conninfo, autocommit=False)
        except psycopg.OperationalError as exc:
            raise SourceError(f"cannot connect for {self.describe()}: {exc}") from None
        with conn:
            # A named cursor is a server-side cursor: rows arrive batch by batch.
            cursor = conn.cursor(name="herald_export")
            cursor.itersize = self.batch_size
            try:
                cursor.execute(self.query, self.params or None)
            except psycopg.Error as exc:
                raise SourceError(f"{self.describe()} failed: {exc}") from None
            if cursor.description is None:
                raise SourceError(f"{self.describe()} returns no rows (not a SELECT?)")
            columns = _check_columns([d.name for d in cursor.description], self.describe())
            try:
                yield Records(columns, self._rows(cursor))
            finally:
                with contextlib.suppress(psycopg.Error):  # a broken session closes anyway
                    cursor.close()
                    conn.rollback()  # read-only: nothing to keep

    def _rows(self, cursor: psycopg.ServerCursor[Any]) -> Iterator[Row]:
        try:
            yield from cursor
        except psycopg.Error as exc:
            raise SourceError(f"{self.describe()} failed while streaming: {exc}") from None


@dataclass(frozen=True)
class GeneratedSource:
    """Rows produced by a function, e.g. generated sample data; ``rows()`` must stream."""

    columns: Sequence[str]
    rows: Callable[[], Iterable[Row]]
    label: str = "generated records"

    def describe(self) -> str:
        return self.label

    @contextmanager
    def open(self) -> Iterator[Records]:
        yield Records(_check_columns(self.columns, self.describe()), iter(self.rows()))


def sample_rows(count: int, start: int = 1) -> Iterator[Row]:
    """Deterministic sample records (id, name, city, amount, active, recorded_on)."""
    cities = ("Brussels", "Lisbon", "Tallinn", "Vienna", "Dublin", "Ljubljana", "Québec & Co")
    first = datetime.date(2024, 1, 1)
    days = [first + datetime.timedelta(days=d) for d in range(700)]
    for i in range(start, start + count):
        yield (i, f"record {i}", cities[i % 7], i * 37 % 100_000 / 100, i % 3 != 0, days[i % 700])


SAMPLE_COLUMNS = ("id", "name", "city", "amount", "active", "recorded_on")


SOURCE_TYPES = ("postgres_query", "postgres_table", "csv", "jsonl", "generated")


def _spec_text(spec: Mapping[str, Any], name: str) -> str:
    value = spec.get(name)
    if not isinstance(value, str) or not value.strip():
        raise SourceError(f"a {spec.get('type')} source needs a non-empty {name!r}")
    return value


def check_source_spec(spec: Mapping[str, Any]) -> None:
    """Refuse a malformed source description before anything is stored."""
    kind = spec.get("type")
    if kind not in SOURCE_TYPES:
        raise SourceError(f"source type must be one of {', '.join(SOURCE_TYPES)}, got {kind!r}")
    if kind == "postgres_query":
        _spec_text(spec, "query")
        if not isinstance(spec.get("params", {}), dict):
            raise SourceError("postgres_query params must be an object of named parameters")
    elif kind == "postgres_table":
        _spec_text(spec, "table")
    elif kind in ("csv", "jsonl"):
        _spec_text(spec, "path")
        delimiter = spec.get("delimiter", ",")
        if kind == "csv" and (not isinstance(delimiter, str) or len(delimiter) != 1):
            raise SourceError("a csv delimiter is one character")
    else:
        count = spec.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise SourceError("a generated source needs a non-negative integer 'count'")
    unknown = set(spec) - {"type", "query", "params", "table", "path", "delimiter", "count"}
    if unknown:
        raise SourceError(f"unknown source field(s): {', '.join(sorted(unknown))}")


def source_from_spec(spec: Mapping[str, Any], conninfo: str, base_dir: Path) -> RecordSource:
    """The source a dataset describes; PostgreSQL sources read Herald's database
    (``conninfo``), file paths are relative to ``base_dir`` unless absolute."""
    check_source_spec(spec)
    kind = spec["type"]
    if kind == "postgres_query":
        return PostgresSource(conninfo, spec["query"], dict(spec.get("params", {})))
    if kind == "postgres_table":
        return PostgresSource.table(conninfo, spec["table"])
    if kind == "generated":
        count = int(spec["count"])
        label = f"{count} sample records"
        return GeneratedSource(SAMPLE_COLUMNS, lambda: sample_rows(count), label)
    path = base_dir / Path(spec["path"])
    if kind == "csv":
        return CsvSource(path, spec.get("delimiter", ","))
    return JsonLinesSource(path)
