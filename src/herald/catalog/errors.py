"""Errors of the catalog layer: each says what was wrong and where."""

from __future__ import annotations

from herald.errors import HeraldError


class CatalogError(HeraldError):
    """Base of every error the catalog layer raises on purpose."""


class SourceError(CatalogError, ValueError):
    """The source of records is missing, malformed or holds a value no format can carry."""


class DataError(SourceError):
    """The records themselves are wrong: a malformed record, a value no format can carry,
    a header that names no usable columns. The same data fails the same way every time,
    so a publication meeting one fails at once instead of being retried. The message
    names the record (counted from 1, the header not counted) and the column (by its
    position from 1: errors never quote what a source holds, names included)."""

    def __init__(
        self,
        problem: str,
        *,
        record: int | None = None,
        column: int | None = None,
        line: int | None = None,
        origin: str | None = None,
    ) -> None:
        self.problem = problem
        self.record = record
        self.column = column
        self.line = line
        self.origin = origin
        where = []
        if record is not None:
            where.append(f"record {record}" + (f" (line {line})" if line is not None else ""))
        elif line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column {column}")
        place = ", ".join(where)
        head = ": ".join(part for part in (origin, place) if part)
        super().__init__(f"{head}: {problem}" if head else problem)

    def within(self, origin: str) -> DataError:
        """The same error, naming the source it was found in."""
        if self.origin is not None:
            return self
        return DataError(
            self.problem, record=self.record, column=self.column, line=self.line, origin=origin
        )


class ExportConflict(CatalogError):
    """A file already exists at an immutable export path."""


class MetadataError(CatalogError, ValueError):
    """The dataset description cannot be rendered (bad URI, empty required text...)."""


class TripleStoreError(CatalogError):
    """The triple store refused or failed a request."""
