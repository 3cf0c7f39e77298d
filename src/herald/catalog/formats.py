"""The three export formats: JSON (one array of objects), XML and CSV.

Each encoder turns a batch of rows into text; the exporter encodes, hashes and writes
that text, so an encoder never sees more than one batch. Values are carried the same
way in every format: text, numbers and booleans as themselves, null as JSON ``null`` /
an empty CSV field / an absent XML attribute, dates and times in ISO 8601, decimals
and UUIDs as their text. Non-finite floats and XML-forbidden characters are refused.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import math
import re
import uuid
from base64 import b64encode
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol
from xml.sax.saxutils import escape

from herald.catalog.errors import SourceError

Row = Sequence[object]


@dataclass(frozen=True)
class FileFormat:
    """What a format is called, how its files end, and how the catalog names it."""

    name: str
    extension: str
    media_type: str  # IANA media type
    eu_file_type: str  # code in the EU file-type authority table

    @property
    def media_type_uri(self) -> str:
        return f"http://www.iana.org/assignments/media-types/{self.media_type}"

    @property
    def file_type_uri(self) -> str:
        return f"http://publications.europa.eu/resource/authority/file-type/{self.eu_file_type}"


JSON = FileFormat("json", "json", "application/json", "JSON")
XML = FileFormat("xml", "xml", "application/xml", "XML")
CSV = FileFormat("csv", "csv", "text/csv", "CSV")
FORMATS: dict[str, FileFormat] = {f.name: f for f in (JSON, XML, CSV)}


def file_format(name: str) -> FileFormat:
    try:
        return FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown export format {name!r} (known: {', '.join(FORMATS)})") from None


def _not_exportable(value: object) -> SourceError:
    return SourceError(f"a value of type {type(value).__name__} cannot be exported: {value!r}")


def _text(value: object) -> str:
    """The text form of a value that is not str or int (shared by XML and CSV)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise SourceError(f"the number {value} is not finite and cannot be exported")
        return repr(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise SourceError(f"the number {value} is not finite and cannot be exported")
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return b64encode(bytes(value)).decode("ascii")
    raise _not_exportable(value)


def _json_default(value: object) -> object:
    # Only called for what json cannot encode itself: dates, decimals, UUIDs, bytes.
    return _text(value)


class Encoder(Protocol):
    def header(self) -> str: ...

    def batch(self, rows: Sequence[Row]) -> str: ...

    def footer(self) -> str: ...


def _text_column(column: Sequence[object]) -> Sequence[str | None]:
    """One column of a batch as text (None stays None), converted in C where possible."""
    kinds = set(map(type, column))
    if kinds <= _STR_OR_NONE:
        return column  # type: ignore[return-value]
    if kinds == _INT:
        return list(map(str, column))
    if kinds == _FLOAT:
        _check_finite(column)  # type: ignore[arg-type]
        return list(map(repr, column))
    if kinds == _DATE:
        return list(map(dt.date.isoformat, column))  # type: ignore[arg-type]
    return [v if v is None or type(v) is str else _text(v) for v in column]


def _check_finite(numbers: Sequence[float]) -> None:
    if not all(map(math.isfinite, numbers)):
        raise SourceError("a number is not finite (NaN or infinity) and cannot be exported")


_STR_OR_NONE = frozenset({str, type(None)})
_INT = frozenset({int})
_FLOAT = frozenset({float})
_DATE = frozenset({dt.date})
_JSON_NATIVE = frozenset({str, int, float, bool, type(None)})


class JsonEncoder:
    """``[`` then compact objects, one per line, then ``]``."""

    def __init__(self, columns: Sequence[str]) -> None:
        self._columns = list(columns)
        self._dumps: Callable[[object], str] = json.JSONEncoder(
            ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=_json_default
        ).encode
        self._first = True

    def header(self) -> str:
        return "["

    def batch(self, rows: Sequence[Row]) -> str:
        if not rows:
            return ""
        # Columns json cannot encode natively (dates...) are converted in bulk first:
        # far cheaper than one `default` callback per value.
        columns = list(zip(*rows, strict=True))
        for i, column in enumerate(columns):
            kinds = set(map(type, column))
            if not kinds <= _JSON_NATIVE:
                columns[i] = tuple(_text_column(column))
            elif float in kinds:
                _check_finite([v for v in column if type(v) is float])
        names = [self._columns] * len(rows)
        objects = list(map(dict, map(zip, names, zip(*columns, strict=True))))
        try:
            # One call encodes the whole batch; its brackets are dropped.
            body = self._dumps(objects)[1:-1]
        except ValueError as exc:
            raise SourceError(f"a value cannot be written as JSON: {exc}") from None
        lead = "\n" if self._first else ",\n"
        self._first = False
        return lead + body

    def footer(self) -> str:
        return "]\n" if self._first else "\n]\n"


_NAME_START = r"A-Z_a-z\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u02FF\u0370-\u037D\u037F-\u1FFF"
_NAME_START += r"\u200C-\u200D\u2070-\u218F\u2C00-\u2FEF\u3001-\uD7FF\uF900-\uFDCF\uFDF0-\uFFFD"
_XML_NAME = re.compile(rf"[{_NAME_START}][{_NAME_START}\-.0-9\u00B7\u0300-\u036F\u203F-\u2040]*")
# Characters XML 1.0 cannot carry even escaped.
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_XML_ATTRIBUTE_SPECIAL = re.compile('[&<>"\n\r\t]')
# Escaped so that attribute-value normalisation keeps line breaks and tabs intact.
_ATTRIBUTE_ENTITIES = {'"': "&quot;", "\n": "&#10;", "\r": "&#13;", "\t": "&#9;"}


def xml_column_problem(column: str) -> str | None:
    """Why ``column`` cannot be an XML element name, or None if it can."""
    if not _XML_NAME.fullmatch(column):
        return f"column {column!r} is not a valid XML element name"
    if column.lower().startswith("xml"):
        return f"column {column!r} starts with 'xml', which XML reserves"
    return None


class XmlEncoder:
    """``<records>`` of empty ``<record>`` elements, one attribute per non-null column.

    Attributes rather than child elements keep files small and parsing cheap (one
    element per record). A batch is encoded column by column (escape, wrap as an
    attribute) and zipped back into records, so per-value work runs in C.
    """

    def __init__(self, columns: Sequence[str]) -> None:
        for column in columns:
            problem = xml_column_problem(column)
            if problem:
                raise SourceError(problem)
        self._columns = list(columns)
        self._attribute = [f' {c}="{{}}"'.format for c in columns]
        self._record = "<record" + "%s" * len(self._columns) + "/>\n"

    def header(self) -> str:
        return '<?xml version="1.0" encoding="UTF-8"?>\n<records>\n'

    def batch(self, rows: Sequence[Row]) -> str:
        if not rows:
            return ""
        columns = [self._column(i, col) for i, col in enumerate(zip(*rows, strict=True))]
        return "".join(map(self._record.__mod__, zip(*columns, strict=True)))

    def _column(self, index: int, column: Sequence[object]) -> list[str]:
        texts = _text_column(column)
        attribute = self._attribute[index]
        present = [t for t in texts if t is not None]
        joined = " ".join(present)  # a space is neither forbidden nor special
        if _XML_FORBIDDEN.search(joined):
            raise SourceError(
                f"column {self._columns[index]!r} holds a control character XML cannot carry"
            )
        if _XML_ATTRIBUTE_SPECIAL.search(joined):
            texts = [t if t is None else escape(t, _ATTRIBUTE_ENTITIES) for t in texts]
        if len(present) == len(texts):
            return list(map(attribute, texts))
        return ["" if t is None else attribute(t) for t in texts]  # null: no attribute

    def footer(self) -> str:
        return "</records>\n"


class CsvEncoder:
    """RFC 4180 CSV with a header row, CRLF line ends, minimal quoting."""

    def __init__(self, columns: Sequence[str]) -> None:
        self._columns = list(columns)
        self._buffer = io.StringIO()
        self._writer = csv.writer(self._buffer, lineterminator="\r\n")

    def _flush(self) -> str:
        text = self._buffer.getvalue()
        self._buffer.seek(0)
        self._buffer.truncate()
        return text

    def header(self) -> str:
        self._writer.writerow(self._columns)
        return self._flush()

    def batch(self, rows: Sequence[Row]) -> str:
        if not rows:
            return ""
        columns = [_text_column(col) for col in zip(*rows, strict=True)]
        self._writer.writerows(zip(*columns, strict=True))  # None is written as ""
        return self._flush()

    def footer(self) -> str:
        return ""


def encoder(fmt: FileFormat, columns: Sequence[str]) -> Encoder:
    if fmt is JSON:
        return JsonEncoder(columns)
    if fmt is XML:
        return XmlEncoder(columns)
    if fmt is CSV:
        return CsvEncoder(columns)
    raise ValueError(f"no encoder for {fmt.name}")
