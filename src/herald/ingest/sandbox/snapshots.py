"""Seeded event-plans snapshots of any size, generated as a stream of byte chunks.

Place in the pipeline: what the provider sandbox serves to the fetcher in tests, the
demo and the benchmark. Nothing is held in memory beyond one chunk, so a million plans
cost no more than a hundred.

Every value is a pure function of ``(seed, plan index, version)`` (a splitmix64 hash,
not a random generator with state), so snapshot ``version`` of a seed is the same bytes
on every machine, and :func:`expected_plan` tells a test what a correct ingestion must
have found. Between versions, prices move, titles change, plans go online and offline
and some plans disappear for good.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import NamedTuple

_MASK = (1 << 64) - 1
_EPOCH = dt.datetime(2026, 1, 1)
_ADJECTIVES = (
    "Noche", "Gran", "Festival", "Concierto", "Gira", "Sesión", "Música", "Teatro",
    "Café", "Clásico", "Jazz", "Ópera", "Danza", "Circo", "Cine", "Flamenco",
)  # fmt: skip
_NOUNS = (
    "de verano", "acústico", "en directo", "sinfónico", "de invierno", "al aire libre",
    "de cámara", "infantil", "nocturno", "de estreno", "popular", "internacional",
)  # fmt: skip
_ZONE_NAMES = ("Platea", "Grada 1", "Grada 2", "Palco", "Pista", "Anfiteatro", "VIP", "Sala")


@dataclass(frozen=True)
class SnapshotSpec:
    """What to generate: size and shape, plus faults inside the document itself.

    ``malformed_every`` makes every Nth plan malformed: ``malformed_kind`` ``"value"``
    (well-formed XML, a bad attribute value: the plan is rejected), ``"syntax"`` (not
    well-formed: its whole base plan is rejected) or ``"mixed"`` (alternating).
    ``truncate_after`` stops the document in the middle of the record after that many
    plans, as a provider cut off mid-write would (the HTTP response itself completes).
    """

    seed: int = 1
    plans: int = 1000
    zones: int = 3
    plans_per_base: int = 1
    malformed_every: int = 0
    malformed_kind: str = "value"
    truncate_after: int | None = None

    def __post_init__(self) -> None:
        if self.plans < 0 or self.zones < 0 or self.plans_per_base < 1:
            raise ValueError("plans and zones must be >= 0, plans_per_base >= 1")
        if self.malformed_every < 0:
            raise ValueError("malformed_every must be >= 0")
        if self.malformed_kind not in ("value", "syntax", "mixed"):
            raise ValueError("malformed_kind is value, syntax or mixed")


@dataclass(frozen=True)
class ExpectedPlan:
    """What a correct ingestion of one plan of one version must find."""

    base_plan_id: str
    plan_id: str
    title: str
    starts_at: dt.datetime  # naive: the document carries no offset
    ends_at: dt.datetime
    online: bool
    sold_out: bool
    prices: tuple[Decimal, ...]


_SPAN_HOURS = 2 * 365 * 24  # plans start within two years of the epoch
_SELL_AHEAD = 60 * 24  # sales open 60 days before the start


class _Text:
    """Date and price texts computed once: generation then only picks from lists."""

    hours: list[str] = []
    cents: list[str] = []

    @classmethod
    def ready(cls) -> type[_Text]:
        if not cls.hours:
            start = _EPOCH - dt.timedelta(hours=_SELL_AHEAD)
            cls.hours = [
                (start + dt.timedelta(hours=h)).isoformat()
                for h in range(_SELL_AHEAD + _SPAN_HOURS + 8)
            ]
            cls.cents = [f"{c // 100}.{c % 100:02d}" for c in range(25_000)]
        return cls


class _Fields(NamedTuple):
    """The numbers behind one plan of one version (generation and expectations share them)."""

    hour: int  # start, in hours after the epoch
    hours: int  # duration
    sold_out: bool
    cents: list[int]  # zone prices
    zone_bits: int  # capacities, names, numbered flags


def _round(x: int) -> int:
    """One splitmix64 step: cheap enough to call a few times per generated plan."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK
    return x ^ (x >> 31)


class _Base(NamedTuple):
    title: str
    online: bool


_TITLES = [f"{adjective} {noun}" for adjective in _ADJECTIVES for noun in _NOUNS]


def _base(spec: SnapshotSpec, base: int, version: int) -> _Base:
    static = _round(spec.seed * 0x100000001B3 ^ base ^ 0x5BA5E)
    moving = _round(static ^ version)
    title = f"{_TITLES[static % len(_TITLES)]} #{base + 1}"
    if (moving >> 24) % 10 == 0:
        title += f" (edición {version})"
    return _Base(title, moving % 100 < 85)


def _fields(spec: SnapshotSpec, index: int, version: int) -> _Fields | None:
    static = _round(spec.seed * 0x100000001B3 ^ index)
    if static % 20 == 0 and version >= 2 + (static >> 32) % 6:
        return None  # this plan was withdrawn for good
    moving = _round(static ^ version)
    factor = 100 if (moving >> 8) % 5 else 90 + (moving >> 16) % 21
    prices = _round(static ^ 3)
    cents = []
    for zone in range(spec.zones):
        if zone and zone % 7 == 0:
            prices = _round(prices)
        cents.append((500 + (prices >> (zone % 7 * 9)) % 390 * 50) * factor // 100)
    return _Fields(
        static % _SPAN_HOURS,
        1 + (static >> 20) % 4,
        (moving >> 32) % 10 == 0,
        cents,
        _round(static ^ 11),
    )


def present(spec: SnapshotSpec, index: int, version: int) -> bool:
    """Whether plan ``index`` is still published in ``version`` (some vanish for good)."""
    return _fields(spec, index, version) is not None


def expected_plan(spec: SnapshotSpec, index: int, version: int) -> ExpectedPlan | None:
    """The plan as snapshot ``version`` shows it, or ``None`` if it is not in it."""
    fields = _fields(spec, index, version)
    if fields is None:
        return None
    base = index // spec.plans_per_base
    head = _base(spec, base, version)
    starts = _EPOCH + dt.timedelta(hours=fields.hour)
    return ExpectedPlan(
        base_plan_id=str(base + 1),
        plan_id=str(index + 1),
        title=head.title,
        starts_at=starts,
        ends_at=starts + dt.timedelta(hours=fields.hours),
        online=head.online,
        sold_out=fields.sold_out,
        prices=tuple(Decimal(c) / 100 for c in fields.cents),
    )


def malformed(spec: SnapshotSpec, index: int) -> str | None:
    """``"value"``, ``"syntax"`` or ``None``: how plan ``index`` is broken on purpose."""
    every = spec.malformed_every
    if not every or (index + 1) % every:
        return None
    if spec.malformed_kind == "mixed":
        return "value" if (index + 1) // every % 2 else "syntax"
    return spec.malformed_kind


def _plan_xml(index: int, fields: _Fields, fault: str | None, text: type[_Text]) -> str:
    hours = text.hours
    at = fields.hour + _SELL_AHEAD
    starts = hours[at]
    ends = hours[at + fields.hours]
    bits = fields.zone_bits
    zones = "".join(
        f'<zone zone_id="{zone + 1}" capacity="{50 + (bits >> (zone % 12 * 5)) % 500}" '
        f'price="{text.cents[cents]}" name="{_ZONE_NAMES[(bits >> (zone % 20 * 3)) & 7]}" '
        f'numbered="{"true" if bits >> (zone % 64) & 1 else "false"}"/>'
        for zone, cents in enumerate(fields.cents)
    )
    if fault == "value":
        # Rotate through the ways a value can be wrong; the XML stays well-formed.
        which = index % (3 if fields.cents else 2)
        if which == 0:
            starts = "not-a-date"
        elif which == 1:
            ends = hours[at - 2]
        else:
            zones = zones.replace('price="', 'price="abc', 1)
    elif fault == "syntax":
        zones = zones.replace('name="', 'name="Sala & <Co>', 1) if zones else "<zone & />"
    return (
        f'<plan plan_start_date="{starts}" plan_end_date="{ends}" plan_id="{index + 1}" '
        f'sell_from="{hours[fields.hour]}" sell_to="{hours[at - 1]}" '
        f'sold_out="{"true" if fields.sold_out else "false"}">{zones}</plan>'
    )


def snapshot_chunks(spec: SnapshotSpec, version: int, chunk_bytes: int = 65536) -> Iterator[bytes]:
    """Snapshot ``version`` of ``spec`` as UTF-8 byte chunks of about ``chunk_bytes``."""
    if version < 1:
        raise ValueError("snapshot versions start at 1")
    text = _Text.ready()
    parts = ['<?xml version="1.0" encoding="UTF-8"?>\n<planList version="1.0">\n<output>\n']
    size = 0
    per_base = spec.plans_per_base
    for base_start in range(0, spec.plans, per_base):
        shown = []
        for index in range(base_start, min(base_start + per_base, spec.plans)):
            fields = _fields(spec, index, version)
            if fields is not None:
                shown.append(_plan_xml(index, fields, malformed(spec, index), text))
        if not shown:
            continue
        base = base_start // per_base
        if spec.truncate_after is not None and base_start >= spec.truncate_after:
            parts.append(f'<base_plan base_plan_id="{base + 1}" sell_mo')
            yield "".join(parts).encode()
            return
        head = _base(spec, base, version)
        record = (
            f'<base_plan base_plan_id="{base + 1}" '
            f'sell_mode="{"online" if head.online else "offline"}" '
            f'title="{head.title}">{"".join(shown)}</base_plan>\n'
        )
        parts.append(record)
        size += len(record)
        if size >= chunk_bytes:
            yield "".join(parts).encode()
            parts, size = [], 0
    parts.append("</output>\n</planList>\n")
    yield "".join(parts).encode()


def expected_snapshot(spec: SnapshotSpec, version: int) -> dict[tuple[str, str], ExpectedPlan]:
    """Every plan a correct parse of snapshot ``version`` must yield, by identity.

    Malformed plans are left out (and, for a syntax fault, every plan of its base plan).
    Meant for tests on small snapshots: it builds the whole answer in memory.
    """
    found: dict[tuple[str, str], ExpectedPlan] = {}
    per_base = spec.plans_per_base
    for base_start in range(0, spec.plans, per_base):
        indexes = range(base_start, min(base_start + per_base, spec.plans))
        if spec.truncate_after is not None and base_start >= spec.truncate_after:
            break
        shown = [(i, expected_plan(spec, i, version)) for i in indexes]
        kept = [(i, plan) for i, plan in shown if plan is not None]
        if any(malformed(spec, i) == "syntax" for i, _ in kept):
            continue
        for i, plan in kept:
            if malformed(spec, i) is None:
                found[(plan.base_plan_id, plan.plan_id)] = plan
    return found
