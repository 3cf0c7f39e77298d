"""Canonical plan records: what every provider format is mapped to.

Place in the pipeline: a format mapping (:mod:`herald.ingest.formats`) turns each raw
XML record into :class:`Plan` values; the fetcher hands them in batches to a sink, which
will stage them as rows of an ingestion run; processing will upsert them into the
canonical table keyed on (provider, base_plan_id, plan_id). Nothing here depends on a
provider's attribute names.

Records are values: nothing mutates one after its mapping built it. They are not
declared frozen only because a frozen dataclass costs about four times as much to build,
and a snapshot builds millions of them.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal


@dataclass(slots=True)
class Zone:
    """One priced zone of a plan (a seating area, a ticket class)."""

    zone_id: str
    name: str
    price: Decimal
    capacity: int
    numbered: bool


@dataclass(slots=True)
class Plan:
    """A plan as one snapshot showed it, independent of the provider's format.

    Identity within a provider is ``(base_plan_id, plan_id)``. ``online`` is what this
    snapshot said; the canonical store keeps ``ever_online`` (true once any snapshot
    said online). ``min_price``/``max_price`` are over ``zones`` and ``None`` when the
    plan has no zone. Every datetime is timezone-aware.
    """

    base_plan_id: str
    plan_id: str
    title: str
    starts_at: dt.datetime
    ends_at: dt.datetime
    sell_mode: str
    online: bool
    sell_from: dt.datetime | None
    sell_to: dt.datetime | None
    sold_out: bool
    min_price: Decimal | None
    max_price: Decimal | None
    zones: tuple[Zone, ...]

    @property
    def identity(self) -> tuple[str, str]:
        return self.base_plan_id, self.plan_id
