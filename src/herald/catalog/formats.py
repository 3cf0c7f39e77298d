"""The three export formats: JSON (one array of objects), XML and CSV.

Each encoder turns a batch of rows into text; the exporter encodes, hashes and writes
that text, so an encoder never sees more than one batch. Values are carried the same
way in every format: text, numbers and booleans as themselves, null as JSON ``null`` /
an empty CSV field / an absent XML attribute, dates and times in ISO 8601, decimals
and UUIDs as their text, bytes in base64. Non-finite floats, lone surrogates and
XML-forbidden characters are refused with a :class:`DataError` naming the record and
the column. JSON and CSV keep the column names as they are; XML names are mapped by
:func:`xml_names` (every name a valid XML name, the mapping deterministic).
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import re
import unicodedata
import uuid
from base64 import b64encode
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import cache
from json.encoder import encode_basestring
from typing import Protocol, TypeVar
from xml.parsers import expat

from herald.catalog.errors import DataError

Row = Sequence[object]
_T = TypeVar("_T")


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


def _not_exportable(value: object) -> DataError:
    return DataError(f"a value of type {type(value).__name__} cannot be exported")


def _text(value: object) -> str:
    """The text form of a value that is not str or int (shared by XML and CSV)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise DataError("a number is not finite (NaN or infinity) and cannot be exported")
        return repr(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, Decimal):
        if not value.is_finite():
            raise DataError("a number is not finite (NaN or infinity) and cannot be exported")
        return str(value)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return b64encode(bytes(value)).decode("ascii")
    raise _not_exportable(value)


class Batch:
    """Rows read together, held column by column and shared by every encoder.

    The text form of a column (used by XML and CSV alike) is computed once. ``first``
    is the number of the batch's first record (from 1), so an error names its record.
    """

    def __init__(self, rows: Sequence[Row], width: int, first: int = 1) -> None:
        self.size = len(rows)
        self.first = first
        for at, row in enumerate(rows):
            if len(row) != width:
                raise DataError(f"{len(row)} values for {width} columns", record=first + at)
        self.columns: list[Sequence[object]] = list(zip(*rows, strict=True)) if rows else []
        self._texts: dict[int, Sequence[str | None]] = {}

    def text(self, index: int) -> Sequence[str | None]:
        found = self._texts.get(index)
        if found is None:
            found = self._texts[index] = self.checked(index, _text_column, _text_or_none)
        return found

    def checked(
        self,
        index: int,
        convert: Callable[[Sequence[object]], _T],
        one: Callable[[object], object],
    ) -> _T:
        """``convert(column)``; a refused value is found again with ``one`` (the same
        conversion, one value at a time) so that the error names its record."""
        try:
            return convert(self.columns[index])
        except DataError as exc:
            raise self.locate(index, one, exc) from None

    def locate(self, index: int, one: Callable[[object], object], exc: DataError) -> DataError:
        for at, value in enumerate(self.columns[index]):
            try:
                one(value)
            except DataError as found:
                return DataError(found.problem, record=self.first + at, column=index + 1)
        return DataError(exc.problem, column=index + 1)

    def unencodable(self) -> DataError:
        """The first text of the batch UTF-8 cannot encode (a lone surrogate, which a
        JSON source can carry as an escape), by record and column."""
        for index, column in enumerate(self.columns):
            for at, value in enumerate(column):
                if isinstance(value, str) and _SURROGATE.search(value):
                    return DataError(
                        f"holds a lone surrogate ({_codepoint(value, _SURROGATE)}), "
                        "which UTF-8 cannot encode",
                        record=self.first + at,
                        column=index + 1,
                    )
        return DataError("holds text UTF-8 cannot encode", record=self.first)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _codepoint(text: str, pattern: re.Pattern[str]) -> str:
    found = pattern.search(text)
    return f"U+{ord(found.group()):04X}" if found else "?"


def _text_or_none(value: object) -> str | None:
    return None if value is None or type(value) is str else _text(value)


class Encoder(Protocol):
    def header(self) -> str: ...

    def batch(self, batch: Batch) -> str: ...

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
    if kinds == _BOOL:
        return list(map(_JSON_BOOL, column))  # type: ignore[arg-type]
    return [v if v is None or type(v) is str else _text(v) for v in column]


def _check_finite(numbers: Sequence[float]) -> None:
    if not all(map(math.isfinite, numbers)):
        raise DataError("a number is not finite (NaN or infinity) and cannot be exported")


_STR_OR_NONE = frozenset({str, type(None)})
_STR = frozenset({str})
_BOOL = frozenset({bool})
_INT = frozenset({int})
_FLOAT = frozenset({float})
_DATE = frozenset({dt.date})


_JSON_BOOL = {True: "true", False: "false"}.__getitem__


def _json_value(value: object) -> str:
    if value is None:
        return "null"
    if type(value) is str:
        return encode_basestring(value)
    if isinstance(value, bool):
        return _JSON_BOOL(value)
    if isinstance(value, int):
        return int.__repr__(value)
    if isinstance(value, float):
        _check_finite([value])
        return float.__repr__(value)
    return encode_basestring(_text(value))


def _json_column(column: Sequence[object]) -> list[str]:
    """One column of a batch as JSON value texts, converted in C where possible."""
    kinds = set(map(type, column))
    if kinds == _STR:
        return list(map(encode_basestring, column))  # type: ignore[arg-type]
    if kinds == _INT:
        return list(map(str, column))
    if kinds == _FLOAT:
        _check_finite(column)  # type: ignore[arg-type]
        return list(map(repr, column))
    if kinds == _BOOL:
        return list(map(_JSON_BOOL, column))  # type: ignore[arg-type]
    return list(map(_json_value, column))


class JsonEncoder:
    """``[`` then one compact object per line, comma-separated, then ``]``.

    A batch is encoded column by column (each value to its JSON text) and the columns
    are then poured into a per-record template holding the already-encoded keys.
    """

    def __init__(self, columns: Sequence[str]) -> None:
        self._columns = list(columns)
        # Keys are JSON-encoded once; a "%" in a name is escaped for the %-template.
        keys = [encode_basestring(c).replace("%", "%%") for c in columns]
        self._record = "{" + ",".join(f"{key}:%s" for key in keys) + "}"
        self._first = True

    def header(self) -> str:
        return "["

    def batch(self, batch: Batch) -> str:
        if not batch.size:
            return ""
        columns = [batch.checked(i, _json_column, _json_value) for i in range(len(batch.columns))]
        body = ",\n".join(map(self._record.__mod__, zip(*columns, strict=True)))
        lead = "\n" if self._first else ",\n"
        self._first = False
        return lead + body

    def footer(self) -> str:
        return "]\n" if self._first else "\n]\n"


# Characters XML 1.0 cannot carry even escaped.
_XML_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")
_XML_ATTRIBUTE_SPECIAL = re.compile('[&<>"\n\r\t]')
# Escaped so that attribute-value normalisation keeps line breaks and tabs intact.
_ATTRIBUTE_ESCAPES = (
    ("&", "&amp;"),  # first, so the entities below are not escaped again
    ("<", "&lt;"),
    (">", "&gt;"),
    ('"', "&quot;"),
    ("\n", "&#10;"),
    ("\r", "&#13;"),
    ("\t", "&#9;"),
)


@cache
def _name_char(char: str, first: bool) -> bool:
    """Whether every XML 1.0 parser takes ``char`` in a name (first: at its start).

    The 5th edition of XML 1.0 allows nearly every character in names, but parsers
    that follow the earlier editions (expat: Python's, Ruby's, PHP's...) take only the
    letters and digits of Unicode 2.0, and refuse a file with any other. So the test is
    one of those parsers: a name character it takes, every parser takes.
    """
    if char in _NAME_SYNTAX:
        return False
    name = f"{char}n" if first else f"n{char}n"
    parser = expat.ParserCreate()
    try:
        parser.Parse(f"<{name}/>".encode(), True)
    except (expat.ExpatError, UnicodeEncodeError):
        return False
    return True


# Never part of a name here: ':' (namespaces), markup, and what would change the probe.
_NAME_SYNTAX = frozenset(":<>/=\"'&")


def _xml_name(column: str) -> str:
    """The name a column gets in XML before de-duplication (see :func:`xml_names`)."""
    text = unicodedata.normalize("NFC", column)
    out: list[str] = []
    for char in text:
        if _name_char(char, first=False) or (not out and _name_char(char, first=True)):
            out.append(char)
        elif not out or out[-1] != "_":
            out.append("_")  # a run of refused characters becomes one underscore
    name = "".join(out)
    if len(name) > 1 and name.endswith("_") and not _name_char(text[-1], first=False):
        name = name[:-1]  # "amount (EUR)" -> "amount_EUR", not "amount_EUR_"
    if not _name_char(name[0], first=True):
        name = "_" + name  # "1st" -> "_1st"
    if name[:3].lower() == "xml":
        name = "_" + name  # XML reserves names starting with "xml"
    return name


def xml_names(columns: Sequence[str]) -> list[str]:
    """Distinct XML names for ``columns``, in order; deterministic.

    A name every XML parser takes (see :func:`_name_char`), without ':' and not
    starting with "xml", is kept as it is. Any other is mapped: normalised to NFC, each
    run of characters a name cannot hold becomes one "_" (a trailing one is dropped),
    "_" is put before a name that cannot start as it does ("1st" -> "_1st") and before
    one starting with "xml". A mapped name that another column already has gets "_2",
    "_3"... (names kept as they are never change).
    """
    bases = [_xml_name(c) for c in columns]
    kept = {c for c, b in zip(columns, bases, strict=True) if c == b}
    taken: set[str] = set()
    names: list[str] = []
    for column, base in zip(columns, bases, strict=True):
        name, n = base, 1
        if column != base:
            while name in taken or name in kept:
                n += 1
                name = f"{base}_{n}"
        taken.add(name)
        names.append(name)
    return names


def _escape_all(texts: Sequence[str]) -> list[str]:
    """Escape many attribute values at once: NUL (which no value can hold, XML forbids
    it) separates them while str.replace runs over the whole column in C."""
    joined = "\0".join(texts)
    for raw, entity in _ATTRIBUTE_ESCAPES:
        joined = joined.replace(raw, entity)
    return joined.split("\0")


class XmlEncoder:
    """``<records>`` of empty ``<record>`` elements, one attribute per non-null column.

    Attributes rather than child elements keep files small and parsing cheap (one
    element per record). A batch is encoded column by column (escape, wrap as an
    attribute) and zipped back into records, so per-value work runs in C.
    """

    def __init__(self, columns: Sequence[str]) -> None:
        self._columns = list(columns)
        self.names = xml_names(columns)
        self._attribute = [f' {c}="{{}}"'.format for c in self.names]
        self._record = "<record" + "%s" * len(self._columns) + "/>\n"

    def header(self) -> str:
        return '<?xml version="1.0" encoding="UTF-8"?>\n<records>\n'

    def batch(self, batch: Batch) -> str:
        if not batch.size:
            return ""
        columns = [self._column(batch, i, batch.text(i)) for i in range(len(batch.columns))]
        return "".join(map(self._record.__mod__, zip(*columns, strict=True)))

    def _column(self, batch: Batch, index: int, texts: Sequence[str | None]) -> list[str]:
        attribute = self._attribute[index]
        complete = None not in texts
        present: Sequence[str] = texts if complete else [t for t in texts if t is not None]  # type: ignore[assignment]
        joined = " ".join(present)  # a space is neither forbidden nor special
        if _XML_FORBIDDEN.search(joined):
            for at, text in enumerate(texts):
                if text is not None and _XML_FORBIDDEN.search(text):
                    raise DataError(
                        f"holds a character XML cannot carry ({_codepoint(text, _XML_FORBIDDEN)})",
                        record=batch.first + at,
                        column=index + 1,
                    )
        if _XML_ATTRIBUTE_SPECIAL.search(joined):
            present = _escape_all(present)
        if complete:
            return list(map(attribute, present))
        escaped = iter(present)
        return ["" if t is None else attribute(next(escaped)) for t in texts]  # null: omitted

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

    def batch(self, batch: Batch) -> str:
        if not batch.size:
            return ""
        columns = [batch.text(i) for i in range(len(batch.columns))]
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
