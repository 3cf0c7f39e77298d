"""The "event plans" snapshot format shipped with Herald, mapped to canonical plans.

Place in the pipeline: registered as format ``event-plans`` (see
:mod:`herald.ingest.formats`); the only module that knows this provider's element and
attribute names. The document shape::

    <planList version="1.0">
      <output>
        <base_plan base_plan_id="291" sell_mode="online" title="Camela en concierto">
          <plan plan_id="291" plan_start_date="2021-06-30T21:00:00"
                plan_end_date="2021-06-30T22:00:00" sell_from="2020-07-01T00:00:00"
                sell_to="2021-06-30T20:00:00" sold_out="false">
            <zone zone_id="40" capacity="243" price="20.00" name="Platea" numbered="true"/>
          </plan>
        </base_plan>
      </output>
    </planList>

A ``base_plan`` is one record; each of its ``plan`` children becomes one canonical
:class:`~herald.ingest.records.Plan` (title and sell mode come from the base plan). A bad
base plan attribute rejects the whole record; a bad plan or zone rejects that plan only,
its siblings are kept. Required: ``base_plan_id``, ``title``, ``sell_mode``, ``plan_id``,
``plan_start_date``, ``plan_end_date`` (not before the start), and for each zone
``zone_id`` (unique in its plan), ``name``, ``price`` and ``capacity``. ``sell_from`` and
``sell_to`` are optional, ``sold_out`` and ``numbered`` default to false. Unknown
attributes and elements are ignored, so a provider may add some without breaking us.
A base plan without any plan maps to nothing (it has no dates to publish).
"""

from __future__ import annotations

from decimal import Decimal
from operator import itemgetter

from herald.ingest.errors import InvalidRecord
from herald.ingest.mapping import (
    FLAGS,
    MappingContext,
    SnapshotFormat,
    ValueReader,
    bad,
    identifier,
    located,
    text,
)
from herald.ingest.records import Plan, Zone
from herald.ingest.xmlstream import Mapper, RawElement, RecordLayout

TITLE_LIMIT = 1000
NAME_LIMIT = 300


def event_plans_mapper(context: MappingContext) -> Mapper[Plan]:
    """The function the parser calls with each ``base_plan`` element."""
    read = ValueReader(context)

    def map_base_plan(element: RawElement) -> list[Plan | InvalidRecord]:
        base_id, title, sell_mode = _base_plan(element.attrs)
        online = sell_mode == "online"
        plans: list[Plan | InvalidRecord] = []
        for child in element.children:
            if child.name == "plan":
                try:
                    plans.append(_plan(child, base_id, title, sell_mode, online, read))
                except InvalidRecord as exc:
                    plans.append(located(f"<base_plan base_plan_id={base_id!r}>", exc))
        return plans

    return map_base_plan


# Each element has a fast path (one C call fetches the required attributes, values come
# from the reader's caches, the reader's checking methods run on a miss) and a checked
# path that only runs when something is missing or suspect: it names what is wrong.
_BASE_FIELDS = itemgetter("base_plan_id", "title", "sell_mode")
_PLAN_FIELDS = itemgetter("plan_id", "plan_start_date", "plan_end_date")
_ZONE_FIELDS = itemgetter("zone_id", "name", "price", "capacity")


def _plain_id(value: str) -> bool:
    return 0 < len(value) <= 128 and not value[0].isspace() and not value[-1].isspace()


def _plain_text(value: str, limit: int) -> bool:
    return 0 < len(value) <= limit and not value[0].isspace() and not value[-1].isspace()


def _base_plan(attrs: dict[str, str]) -> tuple[str, str, str]:
    try:
        base_id, title, sell_mode = _BASE_FIELDS(attrs)
        if _plain_id(base_id) and _plain_text(title, TITLE_LIMIT) and sell_mode in _SELL_MODES:
            return base_id, title, sell_mode
    except KeyError:
        pass
    try:
        base_id = identifier(attrs, "base_plan_id")
    except InvalidRecord as exc:
        raise located("<base_plan>", exc) from None
    try:
        title = text(attrs, "title", limit=TITLE_LIMIT, empty=False)
        mode = attrs.get("sell_mode")
        if mode is None or not 0 < len(mode) <= 32 or not mode.isidentifier():
            raise bad("sell_mode", mode, "a sell mode such as online or offline")
    except InvalidRecord as exc:
        raise located(f"<base_plan base_plan_id={base_id!r}>", exc) from None
    return base_id, title, mode.lower()


_SELL_MODES = frozenset({"online", "offline"})


def _plan(
    element: RawElement, base_id: str, title: str, sell_mode: str, online: bool, read: ValueReader
) -> Plan:
    attrs = element.attrs
    try:
        plan_id, start_text, end_text = _PLAN_FIELDS(attrs)
    except KeyError:
        plan_id = attrs.get("plan_id", "")
        start_text = end_text = ""
    if not _plain_id(plan_id):
        try:
            plan_id = identifier(attrs, "plan_id")
        except InvalidRecord as exc:
            raise located("<plan>", exc) from None
    try:
        times = read.times
        starts_at = times.get(start_text) or read.when(attrs, "plan_start_date")
        ends_at = times.get(end_text) or read.when(attrs, "plan_end_date")
        if ends_at < starts_at:
            raise bad("plan_end_date", end_text, "at or after plan_start_date")
        sell_from = times.get(attrs.get("sell_from")) or read.optional_when(attrs, "sell_from")
        sell_to = times.get(attrs.get("sell_to")) or read.optional_when(attrs, "sell_to")
        sold_out = FLAGS.get(attrs.get("sold_out", "false"))
        if sold_out is None:
            sold_out = read.flag(attrs, "sold_out", default=False)
        zones, prices = _zones(element.children, read)
    except InvalidRecord as exc:
        raise located(f"<plan plan_id={plan_id!r}>", exc) from None
    return Plan(
        base_id,
        plan_id,
        title,
        starts_at,
        ends_at,
        sell_mode,
        online,
        sell_from,
        sell_to,
        sold_out,
        min(prices) if prices else None,
        max(prices) if prices else None,
        tuple(zones),
    )


def _zones(children: list[RawElement], read: ValueReader) -> tuple[list[Zone], list[Decimal]]:
    """A plan's zones and their prices (one loop: three zones a plan, millions of plans)."""
    zones: list[Zone] = []
    prices: list[Decimal] = []
    known_prices, known_counts = read.prices, read.counts
    for child in children:
        if child.name != "zone":
            continue
        attrs = child.attrs
        # The fast path only looks values up; anything missing, unseen or suspect goes
        # the checked way, which reads (and caches) it or names what is wrong.
        try:
            zone_id, name, price_text, capacity_text = _ZONE_FIELDS(attrs)
            price = known_prices.get(price_text)
            capacity = known_counts.get(capacity_text)
            numbered = FLAGS.get(attrs.get("numbered", "false"))
        except KeyError:
            price = None
        if (
            price is None
            or capacity is None
            or numbered is None
            or not 0 < len(zone_id) <= 128
            or zone_id.strip() != zone_id
            or len(name) > NAME_LIMIT
            or name.strip() != name
        ):
            zone = _checked_zone(attrs, read)
        else:
            zone = Zone(zone_id, name, price, capacity, numbered)
        zones.append(zone)
        prices.append(zone.price)
    if len(zones) > 1 and len({zone.zone_id for zone in zones}) < len(zones):
        raise InvalidRecord("two zones have the same zone_id")
    return zones, prices


def _checked_zone(attrs: dict[str, str], read: ValueReader) -> Zone:
    try:
        zone_id = identifier(attrs, "zone_id")
    except InvalidRecord as exc:
        raise located("<zone>", exc) from None
    try:
        return Zone(
            zone_id=zone_id,
            name=text(attrs, "name", limit=NAME_LIMIT, empty=True),
            price=read.price(attrs, "price"),
            capacity=read.count(attrs, "capacity"),
            numbered=read.flag(attrs, "numbered", default=False),
        )
    except InvalidRecord as exc:
        raise located(f"<zone zone_id={zone_id!r}>", exc) from None


EVENT_PLANS = SnapshotFormat(
    name="event-plans",
    description="planList/output/base_plan/plan/zone, one base plan per record",
    layout=RecordLayout(("planList", "output", "base_plan")),
    mapper=event_plans_mapper,
)
