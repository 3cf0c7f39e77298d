"""The registry of snapshot formats, by name.

Place in the pipeline: a provider's configuration names its format; the fetch job looks
it up here and builds a parser for it with :func:`new_parser`. A new provider format is
a new :class:`~herald.ingest.mapping.SnapshotFormat` passed to :func:`register_format`,
nothing else changes.
"""

from __future__ import annotations

from herald.ingest.eventplans import EVENT_PLANS
from herald.ingest.mapping import MappingContext, SnapshotFormat
from herald.ingest.records import Plan
from herald.ingest.xmlstream import ParseLimits, StreamParser

_FORMATS: dict[str, SnapshotFormat] = {}


def register_format(fmt: SnapshotFormat) -> SnapshotFormat:
    """Make ``fmt`` known by its name; a name is registered once."""
    known = _FORMATS.get(fmt.name)
    if known is not None and known is not fmt:
        raise ValueError(f"a snapshot format named {fmt.name!r} is already registered")
    _FORMATS[fmt.name] = fmt
    return fmt


def snapshot_format(name: str) -> SnapshotFormat:
    try:
        return _FORMATS[name]
    except KeyError:
        known = ", ".join(sorted(_FORMATS)) or "none"
        raise ValueError(f"unknown snapshot format {name!r} (known: {known})") from None


def format_names() -> list[str]:
    return sorted(_FORMATS)


def new_parser(
    fmt: SnapshotFormat | str,
    context: MappingContext | None = None,
    limits: ParseLimits | None = None,
) -> StreamParser[Plan]:
    """A fresh streaming parser for one document of format ``fmt``."""
    chosen = snapshot_format(fmt) if isinstance(fmt, str) else fmt
    return StreamParser(chosen.layout, chosen.mapper(context or MappingContext()), limits)


register_format(EVENT_PLANS)
