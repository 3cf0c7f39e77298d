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
from typing import IO, Any, Protocol

import psycopg
from psycopg import sql as pgsql

from herald import sql
from herald.catalog.errors import SourceError
from herald.catalog.source_access import Cancellation, SourceAccess

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
        raise SourceError(f"{origin} has no columns")
    if any(name == "" for name in names):
        raise SourceError(f"{origin} has an empty column name")
    seen: set[str] = set()
    for number, name in enumerate(names, start=1):
        if name in seen:  # named by position: errors never quote what a source holds
            raise SourceError(f"{origin} repeats a column name (column {number})")
        seen.add(name)
    return names


@dataclass(frozen=True)
class CsvSource:
    """A UTF-8 CSV file whose first row names the columns; every value is text."""

    path: Path
    delimiter: str = ","
    access: SourceAccess | None = None  # confines the file to the source directory

    def describe(self) -> str:
        return f"CSV file {self.path.name}"

    @contextmanager
    def open(self) -> Iterator[Records]:
        handle = _open_text(self.path, self.access, self.describe())
        with handle:
            reader = csv.reader(handle, delimiter=self.delimiter)
            try:
                header = next(reader)
            except StopIteration:
                raise SourceError(f"{self.describe()} is empty (no header row)") from None
            except UnicodeDecodeError:
                raise SourceError(f"{self.describe()} is not UTF-8 text") from None
            columns = _check_columns(header, self.describe())
            yield Records(columns, self._rows(reader, len(columns)))

    def _rows(self, reader: Any, width: int) -> Iterator[Row]:
        try:
            for row in reader:
                if len(row) != width:
                    if not row:  # a blank line carries no record
                        continue
                    raise SourceError(
                        f"{self.describe()} line {reader.line_num}: {len(row)} values "
                        f"for {width} columns"
                    )
                yield row
        except UnicodeDecodeError:
            raise SourceError(
                f"{self.describe()} near line {reader.line_num} is not UTF-8 text"
            ) from None
        except csv.Error as exc:
            raise SourceError(f"{self.describe()} line {reader.line_num}: {exc}") from None


def _open_text(path: Path, access: SourceAccess | None, what: str) -> IO[str]:
    if access is not None:
        return access.open_file(access.file(str(path)))
    try:
        return path.open(encoding="utf-8", newline="")
    except OSError as exc:
        raise SourceError(f"cannot read {what}: {exc.strerror}") from None


_SCALARS = (str, int, float, bool, type(None))


@dataclass(frozen=True)
class JsonLinesSource:
    """A UTF-8 file of one flat JSON object per line; the first object fixes the columns.

    A later object may omit a column (it becomes null) but may not add one, and values
    must be scalars: the CSV and XML outputs have no place for nested structures.
    """

    path: Path
    access: SourceAccess | None = None  # confines the file to the source directory

    def describe(self) -> str:
        return f"JSON Lines file {self.path.name}"

    @contextmanager
    def open(self) -> Iterator[Records]:
        handle = _open_text(self.path, self.access, self.describe())
        with handle:
            lines = self._objects(handle)
            first = next(lines, None)
            if first is None:
                raise SourceError(f"{self.describe()} holds no records")
            columns = _check_columns(list(first[1]), self.describe())
            yield Records(columns, self._rows(first, lines, columns))

    def _objects(self, handle: Any) -> Iterator[tuple[int, Mapping[str, object]]]:
        number = 0
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise SourceError(f"{self.describe()} line {number}: {exc.msg}") from None
                if not isinstance(value, dict):
                    raise SourceError(f"{self.describe()} line {number}: not a JSON object")
                yield number, value
        except UnicodeDecodeError:
            raise SourceError(
                f"{self.describe()} near line {number + 1} is not UTF-8 text"
            ) from None

    def _rows(
        self,
        first: tuple[int, Mapping[str, object]],
        rest: Iterator[tuple[int, Mapping[str, object]]],
        columns: list[str],
    ) -> Iterator[Row]:
        known = set(columns)

        def convert(number: int, obj: Mapping[str, object]) -> Row:
            if len(obj) > len(columns) or not known.issuperset(obj):
                extra = len(set(obj) - known)
                raise SourceError(
                    f"{self.describe()} line {number}: {extra} field(s) the first record "
                    "does not have (the first record fixes the columns)"
                )
            row = tuple(obj.get(c) for c in columns)
            for position, value in enumerate(row, start=1):
                if not isinstance(value, _SCALARS):
                    raise SourceError(
                        f"{self.describe()} line {number}: field {position} is a nested "
                        f"{type(value).__name__}; only flat records can be exported"
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
    access: SourceAccess | None = None  # checks the role before anything is read
    cancellation: Cancellation | None = None  # cancels the query on the server

    @classmethod
    def table(
        cls, conninfo: str, table: str, batch_size: int = 5_000, **options: Any
    ) -> PostgresSource:
        query = sql.query_with_identifiers("catalog_source_table", table=table)
        label = f"PostgreSQL table {table}"
        return cls(conninfo, query, batch_size=batch_size, label=label, **options)

    def describe(self) -> str:
        return self.label

    @contextmanager
    def open(self) -> Iterator[Records]:
        try:
            conn = psycopg.connect(self.conninfo, autocommit=False, connect_timeout=30)
        except psycopg.OperationalError as exc:
            raise SourceError(
                f"cannot connect for {self.describe()} ({type(exc).__name__})"
            ) from None
        if self.cancellation is not None:
            self.cancellation.watch(conn)
        try:
            with conn:
                yield from self._stream(conn)
        finally:
            if self.cancellation is not None:
                self.cancellation.forget(conn)

    def _stream(self, conn: psycopg.Connection[Any]) -> Iterator[Records]:
        if self.access is not None:
            self.access.check_role(conn)
            conn.rollback()
        conn.read_only = True  # and default_transaction_read_only in the session
        # A named cursor is a server-side cursor: rows arrive batch by batch.
        cursor = conn.cursor(name="herald_export")
        cursor.itersize = self.batch_size
        try:
            try:
                cursor.execute(self.query, self.params or None)
            except psycopg.Error as exc:
                raise SourceError(f"{self.describe()} failed: {_reason(exc)}") from None
            if cursor.description is None:
                raise SourceError(f"{self.describe()} returns no rows (not a SELECT?)")
            columns = _check_columns([d.name for d in cursor.description], self.describe())
            yield Records(columns, self._rows(cursor))
        finally:
            with contextlib.suppress(psycopg.Error):  # a broken session closes anyway
                cursor.close()
                conn.rollback()  # read-only: nothing to keep

    def _rows(self, cursor: psycopg.ServerCursor[Any]) -> Iterator[Row]:
        try:
            yield from cursor
        except psycopg.Error as exc:
            raise SourceError(f"{self.describe()} failed while streaming: {_reason(exc)}") from None


def _reason(exc: psycopg.Error) -> str:
    """Why a source query failed, without the server's message (it may quote data)."""
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return "cancelled (statement timeout, or its attempt stopped)"
    if isinstance(exc, psycopg.errors.ReadOnlySqlTransaction):
        return "it tried to write, and sources only read"
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return "the source role may not read that"
    return f"{type(exc).__name__} (SQLSTATE {exc.sqlstate})"


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
# Each source type's fields and bounds: a dataset description stays small, and a
# generated source cannot ask for unbounded work.
SOURCE_FIELDS: dict[str, frozenset[str]] = {
    "postgres_query": frozenset({"type", "query", "params"}),
    "postgres_table": frozenset({"type", "table"}),
    "csv": frozenset({"type", "path", "delimiter"}),
    "jsonl": frozenset({"type", "path"}),
    "generated": frozenset({"type", "count"}),
}
MAX_GENERATED = 10_000_000  # records
MAX_QUERY = 20_000  # characters
MAX_PARAMS = 100
MAX_PARAM_TEXT = 1_000
MAX_PATH = 1_000
TABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_$]{0,62}$")


def _spec_text(spec: Mapping[str, Any], name: str, limit: int) -> str:
    value = spec.get(name)
    if not isinstance(value, str) or not value.strip():
        raise SourceError(f"a {spec.get('type')} source needs a non-empty {name!r}")
    if len(value) > limit or "\x00" in value:
        raise SourceError(
            f"a {spec.get('type')} source's {name!r} must be at most {limit} characters"
        )
    return value


def _check_params(params: object) -> None:
    if not isinstance(params, dict) or len(params) > MAX_PARAMS:
        raise SourceError(f"postgres_query params must be an object of at most {MAX_PARAMS} values")
    for name, value in params.items():
        if not TABLE.match(str(name)):
            raise SourceError("postgres_query parameter names are identifiers (letters, digits, _)")
        scalar = value is None or isinstance(value, bool | int | float)
        if not scalar and not (isinstance(value, str) and len(value) <= MAX_PARAM_TEXT):
            raise SourceError(
                f"postgres_query parameter {name!r} must be a number, boolean, null or text "
                f"of at most {MAX_PARAM_TEXT} characters"
            )


def check_source_spec(spec: Mapping[str, Any]) -> None:
    """Refuse a malformed or unbounded source description before anything is stored."""
    kind = spec.get("type")
    if kind not in SOURCE_TYPES:
        raise SourceError(f"source type must be one of {', '.join(SOURCE_TYPES)}, got {kind!r}")
    unknown = set(spec) - SOURCE_FIELDS[kind]
    if unknown:
        raise SourceError(f"unknown source field(s): {', '.join(sorted(map(str, unknown)))}")
    if kind == "postgres_query":
        _spec_text(spec, "query", MAX_QUERY)
        _check_params(spec.get("params", {}))
    elif kind == "postgres_table":
        if not TABLE.match(_spec_text(spec, "table", 63)):
            raise SourceError("a postgres_table source names one table (letters, digits, _, $)")
    elif kind in ("csv", "jsonl"):
        _spec_text(spec, "path", MAX_PATH)
        delimiter = spec.get("delimiter", ",")
        if kind == "csv" and (not isinstance(delimiter, str) or len(delimiter) != 1):
            raise SourceError("a csv delimiter is one character")
    else:
        count = spec.get("count")
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_GENERATED:
            raise SourceError(
                f"a generated source needs an integer 'count' from 0 to {MAX_GENERATED}"
            )


def source_from_spec(
    spec: Mapping[str, Any], access: SourceAccess, cancellation: Cancellation | None = None
) -> RecordSource:
    """The source a dataset describes: files under the source directory, databases read
    as the source role (see :mod:`herald.catalog.source_access`)."""
    check_source_spec(spec)
    kind = spec["type"]
    options: dict[str, Any] = {"access": access, "cancellation": cancellation}
    if kind == "postgres_query":
        params = dict(spec.get("params", {}))
        return PostgresSource(access.conninfo(), spec["query"], params, **options)
    if kind == "postgres_table":
        return PostgresSource.table(access.conninfo(), spec["table"], **options)
    if kind == "generated":
        count = int(spec["count"])
        label = f"{count} sample records"
        return GeneratedSource(SAMPLE_COLUMNS, lambda: sample_rows(count), label)
    path = access.file(spec["path"])
    if kind == "csv":
        return CsvSource(path, spec.get("delimiter", ","), access=access)
    return JsonLinesSource(path, access=access)
