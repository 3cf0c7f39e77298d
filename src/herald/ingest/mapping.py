"""What a provider format is, and the value parsers every plan mapping shares.

Place in the pipeline: a :class:`SnapshotFormat` tells the streaming parser where
records sit (:class:`~herald.ingest.xmlstream.RecordLayout`) and maps each one to
canonical :class:`~herald.ingest.records.Plan` values. Adding a provider format means
writing one such object and registering it (:mod:`herald.ingest.formats`); the parser,
fetcher and the later staging and processing stay as they are.

The value parsers are fast on good input (small caches: snapshots repeat the same dates
and prices thousands of times) and raise :class:`InvalidRecord` naming the attribute
and the value on bad input.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import TypeVar

from herald.ingest.errors import InvalidRecord
from herald.ingest.records import Plan
from herald.ingest.xmlstream import Mapper, RecordLayout

T = TypeVar("T")
_CACHE_SIZE = 32_768  # a snapshot of two years of hourly start times fits
_MAX_PRICE = Decimal(10) ** 12


@dataclass(frozen=True)
class MappingContext:
    """How one provider's values are read: naive times are in ``timezone``."""

    timezone: dt.tzinfo = dt.UTC


@dataclass(frozen=True)
class SnapshotFormat:
    """A provider format: where its records are and how one maps to plans.

    ``mapper(context)`` returns the function the parser calls with each record element;
    it returns the record's plans, with an :class:`InvalidRecord` in place of each plan
    that could not be mapped (or raises one when the whole record is bad).
    """

    name: str
    description: str
    layout: RecordLayout
    mapper: Callable[[MappingContext], Mapper[Plan]] = field(repr=False)


def bad(attribute: str, value: str | None, expected: str) -> InvalidRecord:
    """The error for one attribute: which one, its value, what it should have been.

    The mapping adds the element's location with :func:`located` as the error leaves it,
    so the fast path never builds a location string.
    """
    if value is None:
        return InvalidRecord(f"attribute {attribute!r} is missing")
    shown = value if len(value) <= 80 else value[:77] + "..."
    return InvalidRecord(f"attribute {attribute}={shown!r} is not {expected}")


def located(where: str, error: InvalidRecord) -> InvalidRecord:
    """``error`` prefixed with the element it happened in (outermost element first)."""
    message = str(error)
    return InvalidRecord(f"{where} {message}" if message.startswith("<") else f"{where}: {message}")


def identifier(attrs: dict[str, str], name: str) -> str:
    """A provider identifier: 1 to 128 characters, no surrounding whitespace."""
    value = attrs.get(name)
    if value is None or not 0 < len(value) <= 128 or value[0].isspace() or value[-1].isspace():
        raise bad(name, value, "an identifier (1 to 128 characters, no blanks around)")
    return value


def text(attrs: dict[str, str], name: str, *, limit: int, empty: bool) -> str:
    """Free text, stripped, at most ``limit`` characters (and not empty unless allowed)."""
    value = attrs.get(name)
    if value is None:
        raise bad(name, value, "text")
    stripped = value.strip()
    if len(stripped) > limit or not (stripped or empty):
        raise bad(name, value, f"{'' if empty else 'non-empty '}text of at most {limit} characters")
    return stripped


class ValueReader:
    """Parses dates, prices, counts and booleans for one mapping context.

    Holds small caches (a snapshot repeats the same values over and over); make one per
    parse, not one per process, so the caches stay bounded and local.
    """

    def __init__(self, context: MappingContext) -> None:
        self.context = context
        # Values already read and checked, by their text: a mapping's fast path may look
        # a value up here and fall back to the checking method on a miss.
        self.times: dict[str | None, dt.datetime] = {}
        self.prices: dict[str | None, Decimal] = {}
        self.counts: dict[str | None, int] = {}

    def when(self, attrs: dict[str, str], name: str) -> dt.datetime:
        """An ISO 8601 date-time; naive values are in the context's timezone."""
        value = attrs.get(name)
        cached = self.times.get(value)
        return _remember(self.times, value, self._time(name, value)) if cached is None else cached

    def optional_when(self, attrs: dict[str, str], name: str) -> dt.datetime | None:
        return None if name not in attrs else self.when(attrs, name)

    def price(self, attrs: dict[str, str], name: str) -> Decimal:
        """A non-negative decimal amount (below 10^12)."""
        value = attrs.get(name)
        cached = self.prices.get(value)
        return _remember(self.prices, value, _price(name, value)) if cached is None else cached

    def _time(self, name: str, value: str | None) -> dt.datetime:
        if value is None:
            raise bad(name, value, "an ISO 8601 date-time")
        try:
            parsed = dt.datetime.fromisoformat(value)
        except ValueError:
            raise bad(name, value, "an ISO 8601 date-time") from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=self.context.timezone)
        return parsed

    def count(self, attrs: dict[str, str], name: str) -> int:
        """A non-negative integer (ASCII digits only, at most 12)."""
        value = attrs.get(name)
        if value is None or not value.isascii() or not value.isdigit() or len(value) > 12:
            raise bad(name, value, "a non-negative integer")
        return _remember(self.counts, value, int(value))

    @staticmethod
    def flag(attrs: dict[str, str], name: str, default: bool) -> bool:
        """An XML Schema boolean (true, false, 1, 0); ``default`` when absent."""
        value = attrs.get(name)
        if value is None:
            return default
        parsed = FLAGS.get(value)
        if parsed is None:
            raise bad(name, value, "a boolean (true, false, 1 or 0)")
        return parsed


def _price(name: str, value: str | None) -> Decimal:
    if value is None:
        raise bad(name, value, "a decimal amount")
    try:
        parsed = Decimal(value)
    except InvalidOperation:
        parsed = Decimal("NaN")
    if not parsed.is_finite() or parsed < 0 or parsed >= _MAX_PRICE:
        raise bad(name, value, "a non-negative decimal amount below 10^12")
    return parsed


def _remember(cache: dict[str | None, T], value: str | None, parsed: T) -> T:
    if len(cache) >= _CACHE_SIZE:
        cache.clear()  # bounded; follows what the snapshot repeats now
    cache[value] = parsed
    return parsed


FLAGS: dict[str | None, bool] = {"true": True, "1": True, "false": False, "0": False}
