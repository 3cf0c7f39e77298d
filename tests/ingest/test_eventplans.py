"""The event-plans mapping: canonical values, edge cases, errors that name the attribute."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest

from herald.ingest.errors import InvalidRecord
from herald.ingest.eventplans import EVENT_PLANS
from herald.ingest.formats import format_names, new_parser, register_format, snapshot_format
from herald.ingest.mapping import MappingContext, SnapshotFormat
from herald.ingest.records import Plan, Zone
from herald.ingest.xmlstream import Mapper, RawElement, RecordLayout

BASE = {"base_plan_id": "291", "sell_mode": "online", "title": "Camela en concierto"}
PLAN = {
    "plan_start_date": "2021-06-30T21:00:00",
    "plan_end_date": "2021-06-30T22:00:00",
    "plan_id": "291",
    "sell_from": "2020-07-01T00:00:00",
    "sell_to": "2021-06-30T20:00:00",
    "sold_out": "false",
}
ZONES = [
    {"zone_id": "40", "capacity": "243", "price": "20.00", "name": "Platea", "numbered": "true"},
    {"zone_id": "38", "capacity": "100", "price": "15.00", "name": "Grada 2", "numbered": "false"},
]


def element(
    base: dict[str, str], *plans: tuple[dict[str, str], list[dict[str, str]]]
) -> RawElement:
    root = RawElement("base_plan", dict(base))
    for attrs, zones in plans:
        plan = RawElement("plan", dict(attrs))
        plan.children.extend(RawElement("zone", dict(z)) for z in zones)
        root.children.append(plan)
    return root


def mapped(root: RawElement, context: MappingContext | None = None) -> list[Plan | InvalidRecord]:
    return list(EVENT_PLANS.mapper(context or MappingContext())(root))


def one(root: RawElement, context: MappingContext | None = None) -> Plan:
    [result] = mapped(root, context)
    assert isinstance(result, Plan), result
    return result


def error(root: RawElement) -> str:
    try:
        results = mapped(root)
    except InvalidRecord as exc:
        return str(exc)
    [result] = results
    assert isinstance(result, InvalidRecord), result
    return str(result)


def test_the_issue_example_maps_to_a_canonical_plan() -> None:
    utc = dt.UTC
    assert one(element(BASE, (PLAN, ZONES))) == Plan(
        base_plan_id="291",
        plan_id="291",
        title="Camela en concierto",
        starts_at=dt.datetime(2021, 6, 30, 21, tzinfo=utc),
        ends_at=dt.datetime(2021, 6, 30, 22, tzinfo=utc),
        sell_mode="online",
        online=True,
        sell_from=dt.datetime(2020, 7, 1, tzinfo=utc),
        sell_to=dt.datetime(2021, 6, 30, 20, tzinfo=utc),
        sold_out=False,
        min_price=Decimal("15.00"),
        max_price=Decimal("20.00"),
        zones=(
            Zone("40", "Platea", Decimal("20.00"), 243, True),
            Zone("38", "Grada 2", Decimal("15.00"), 100, False),
        ),
    )


def test_naive_times_are_read_in_the_provider_timezone_and_offsets_are_kept() -> None:
    madrid = ZoneInfo("Europe/Madrid")
    plan = one(element(BASE, (PLAN, ZONES)), MappingContext(timezone=madrid))
    assert plan.starts_at == dt.datetime(2021, 6, 30, 19, tzinfo=dt.UTC)
    offset = {**PLAN, "plan_start_date": "2021-06-30T21:00:00+02:00"}
    assert one(element(BASE, (offset, ZONES))).starts_at == dt.datetime(
        2021, 6, 30, 19, tzinfo=dt.UTC
    )


def test_optional_values_and_defaults() -> None:
    plan_attrs = {k: v for k, v in PLAN.items() if k not in ("sell_from", "sell_to", "sold_out")}
    zone = {k: v for k, v in ZONES[0].items() if k != "numbered"}
    plan = one(element({**BASE, "sell_mode": "Offline"}, (plan_attrs, [zone])))
    assert (plan.sell_from, plan.sell_to, plan.sold_out) == (None, None, False)
    assert plan.zones[0].numbered is False
    assert (plan.sell_mode, plan.online) == ("offline", False)


def test_a_plan_without_zones_has_no_prices() -> None:
    plan = one(element(BASE, (PLAN, [])))
    assert (plan.min_price, plan.max_price, plan.zones) == (None, None, ())


def test_every_plan_of_a_base_plan_is_mapped_and_a_bad_one_alone_is_rejected() -> None:
    second = {**PLAN, "plan_id": "292", "plan_end_date": "2021-06-30T20:00:00"}
    third = {**PLAN, "plan_id": "293"}
    results = mapped(element(BASE, (PLAN, ZONES), (second, ZONES), (third, [])))
    assert [type(r).__name__ for r in results] == ["Plan", "InvalidRecord", "Plan"]
    assert str(results[1]) == (
        "<base_plan base_plan_id='291'> <plan plan_id='292'>: attribute "
        "plan_end_date='2021-06-30T20:00:00' is not at or after plan_start_date"
    )


def test_unknown_attributes_and_elements_are_ignored() -> None:
    root = element({**BASE, "organizer_company_id": "7"}, (PLAN, ZONES))
    root.children.append(RawElement("extra", {}))
    root.children[0].children.append(RawElement("seat", {"row": "1"}))
    assert one(root).zones == one(element(BASE, (PLAN, ZONES))).zones


def test_values_read_once_are_reused_and_stay_correct() -> None:
    # The fast path serves repeated values from the reader's caches: same answers.
    mapper = EVENT_PLANS.mapper(MappingContext())
    first, second = (mapper(element(BASE, (PLAN, ZONES)))[0] for _ in range(2))
    assert first == second


@pytest.mark.parametrize(
    ("where", "change", "message"),
    [
        (
            "base",
            {"base_plan_id": ""},
            "<base_plan>: attribute base_plan_id='' is not an identifier",
        ),
        ("base", {"base_plan_id": " 7"}, "attribute base_plan_id=' 7' is not an identifier"),
        ("base", {"title": "   "}, "attribute title='   ' is not non-empty text"),
        ("base", {"title": "x" * 1001}, "is not non-empty text of at most 1000 characters"),
        ("base", {"sell_mode": "on line"}, "attribute sell_mode='on line' is not a sell mode"),
        ("plan", {"plan_id": None}, "<plan>: attribute 'plan_id' is missing"),
        (
            "plan",
            {"plan_start_date": None},
            "<plan plan_id='291'>: attribute 'plan_start_date' is missing",
        ),
        (
            "plan",
            {"plan_start_date": "30/06/2021"},
            "plan_start_date='30/06/2021' is not an ISO 8601",
        ),
        ("plan", {"sell_to": "soon"}, "attribute sell_to='soon' is not an ISO 8601 date-time"),
        ("plan", {"sold_out": "maybe"}, "attribute sold_out='maybe' is not a boolean"),
        (
            "zone",
            {"price": "-1"},
            "<zone zone_id='40'>: attribute price='-1' is not a non-negative",
        ),
        ("zone", {"price": "NaN"}, "attribute price='NaN' is not a non-negative decimal"),
        ("zone", {"price": "1e12"}, "attribute price='1e12' is not a non-negative decimal"),
        ("zone", {"price": None}, "attribute 'price' is missing"),
        ("zone", {"capacity": "-5"}, "attribute capacity='-5' is not a non-negative integer"),
        ("zone", {"capacity": "1_000"}, "attribute capacity='1_000' is not a non-negative integer"),
        ("zone", {"capacity": "٣"}, "is not a non-negative integer"),
        ("zone", {"numbered": "yes"}, "attribute numbered='yes' is not a boolean"),
        ("zone", {"zone_id": None}, "<plan plan_id='291'> <zone>: attribute 'zone_id' is missing"),
        ("zone", {"name": "x" * 301}, "text of at most 300 characters"),
    ],
)
def test_each_bad_attribute_is_named_in_the_error(
    where: str, change: dict[str, str | None], message: str
) -> None:
    base, plan, zone = dict(BASE), dict(PLAN), dict(ZONES[0])
    target = {"base": base, "plan": plan, "zone": zone}[where]
    for key, value in change.items():
        if value is None:
            del target[key]
        else:
            target[key] = value
    assert message in error(element(base, (plan, [zone])))


def test_duplicate_zone_ids_reject_the_plan() -> None:
    assert "two zones have the same zone_id" in error(element(BASE, (PLAN, [ZONES[0], ZONES[0]])))


def test_long_values_in_errors_are_shortened() -> None:
    message = error(element({**BASE, "sell_mode": "x" * 500}, (PLAN, ZONES)))
    assert len(message) < 200 and message.endswith(
        "...' is not a sell mode such as online or offline"
    )


def test_the_registry_knows_the_shipped_format_and_takes_new_ones() -> None:
    assert "event-plans" in format_names()
    assert snapshot_format("event-plans") is EVENT_PLANS
    with pytest.raises(ValueError, match=r"unknown snapshot format 'nope' \(known: .*event-plans"):
        snapshot_format("nope")

    def flat(context: MappingContext) -> Mapper[Plan]:
        def one_plan(el: RawElement) -> list[Plan | InvalidRecord]:
            return list(EVENT_PLANS.mapper(context)(element(BASE, (el.attrs, []))))

        return one_plan

    other = register_format(
        SnapshotFormat("flat-plans", "one <plan> per record", RecordLayout(("plans", "plan")), flat)
    )
    assert register_format(other) is other  # idempotent for the same object
    with pytest.raises(ValueError, match="already registered"):
        register_format(SnapshotFormat("flat-plans", "", RecordLayout(("a", "b")), flat))
    parser = new_parser("flat-plans")
    attrs = " ".join(f'{k}="{v}"' for k, v in PLAN.items())
    parser.feed(f"<plans><plan {attrs}/></plans>".encode())
    parser.close()
    records, _ = parser.take()
    assert [r.identity for r in records] == [("291", "291")]
