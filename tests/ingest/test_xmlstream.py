"""The streaming parser: records out of any chunking, hostile input refused, bad records
quarantined with their raw text while the rest parses, broken documents failed."""

from __future__ import annotations

import random
import tracemalloc
from collections.abc import Iterable

import pytest

from herald.ingest.errors import DocumentError, InvalidRecord
from herald.ingest.formats import new_parser
from herald.ingest.records import Plan
from herald.ingest.sandbox.hostile import hostile_document
from herald.ingest.sandbox.snapshots import (
    SnapshotSpec,
    expected_snapshot,
    malformed,
    present,
    snapshot_chunks,
)
from herald.ingest.xmlstream import ParseLimits, RawElement, RecordLayout, Rejected, StreamParser

GOOD = (
    b'<base_plan base_plan_id="{id}" sell_mode="online" title="Plan {id}">'
    b'<plan plan_id="{id}" plan_start_date="2026-03-01T20:00:00" '
    b'plan_end_date="2026-03-01T22:00:00"><zone zone_id="1" capacity="10" price="5.00" '
    b'name="Sala"/></plan></base_plan>\n'
)


def good(plan_id: int) -> bytes:
    return GOOD.replace(b"{id}", str(plan_id).encode())


def document(*records: bytes) -> bytes:
    return (
        b'<?xml version="1.0"?>\n<planList><output>\n' + b"".join(records) + b"</output></planList>"
    )


def parse(
    chunks: Iterable[bytes], limits: ParseLimits | None = None
) -> tuple[list[Plan], list[Rejected]]:
    parser = new_parser("event-plans", limits=limits)
    for chunk in chunks:
        parser.feed(chunk)
    parser.close()
    return parser.take()


def split(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


@pytest.mark.parametrize("size", [1, 7, 100, 65536])
def test_any_chunking_yields_the_same_records(size: int) -> None:
    spec = SnapshotSpec(seed=5, plans=120, plans_per_base=2)
    data = b"".join(snapshot_chunks(spec, 1))
    records, rejects = parse(split(data, size))
    assert rejects == []
    assert sorted(r.identity for r in records) == sorted(expected_snapshot(spec, 1))


@pytest.mark.parametrize("kind", ["value", "syntax", "mixed"])
@pytest.mark.parametrize("size", [13, 4096])
def test_malformed_records_are_quarantined_and_the_rest_parses(kind: str, size: int) -> None:
    spec = SnapshotSpec(
        seed=9, plans=150, plans_per_base=3, malformed_every=10, malformed_kind=kind
    )
    data = b"".join(snapshot_chunks(spec, 2))
    records, rejects = parse(split(data, size))
    assert sorted(r.identity for r in records) == sorted(expected_snapshot(spec, 2))
    assert rejects, "the malformed plans were reported"
    for reject in rejects:
        assert reject.reason
        assert reject.raw.startswith(b"<base_plan ")
        assert data[reject.offset : reject.offset + len(reject.raw)] == reject.raw
        assert data.count(b"\n", 0, reject.offset) + 1 == reject.line
    if kind == "syntax":
        assert all("not well-formed" in r.reason for r in rejects)
        # One per malformed plan still published in this version; its whole base plan goes.
        broken = {i // 3 for i in range(150) if present(spec, i, 2) and malformed(spec, i)}
        assert len(rejects) == len(broken) > 10


def test_an_undeclared_entity_in_a_start_tag_quarantines_only_that_record() -> None:
    bad = good(2).replace(b'title="Plan 2"', b'title="Caf&eacute; &amp; Co"')
    data = document(good(1), bad, good(3))
    records, rejects = parse(split(data, 5))
    assert [r.plan_id for r in records] == ["1", "3"]
    [reject] = rejects
    assert "undefined entity" in reject.reason
    assert reject.raw == bad
    assert reject.size is None  # skipped by restarting the parser: its extent is a guess


def test_an_unescaped_ampersand_is_quarantined_with_its_raw_text() -> None:
    bad = good(2).replace(b"Plan 2", b"Tom & Jerry")
    records, rejects = parse([document(good(1), bad, good(3))])
    assert [r.plan_id for r in records] == ["1", "3"]
    assert rejects[0].raw == bad


def test_a_record_mapping_error_keeps_the_raw_record_and_its_exact_size() -> None:
    bad = good(2).replace(b'price="5.00"', b'price="five"')
    records, rejects = parse([document(good(1), bad)])
    assert [r.plan_id for r in records] == ["1"]
    [reject] = rejects
    assert reject.reason == (
        "<base_plan base_plan_id='2'> <plan plan_id='2'> <zone zone_id='1'>: "
        "attribute price='five' is not a non-negative decimal amount below 10^12"
    )
    assert reject.raw == bad.rstrip(b"\n")
    assert reject.size == len(reject.raw) and not reject.truncated


def test_raw_text_of_a_rejected_record_is_bounded() -> None:
    bad = good(2).replace(b'sell_mode="online"', b'sell_mode="?" padding="' + b"x" * 5000 + b'"')
    records, rejects = parse([document(good(1), bad)], ParseLimits(max_raw_bytes=100))
    assert [r.plan_id for r in records] == ["1"]
    assert len(rejects[0].raw) == 100 and rejects[0].truncated


def test_an_empty_element_record_is_measured_exactly() -> None:
    bad = b'<base_plan base_plan_id="7" sell_mode="on line" title="a>b"/>'
    records, rejects = parse([document(good(1), bad, good(3))])
    assert [r.plan_id for r in records] == ["1", "3"]
    assert rejects[0].raw == bad


@pytest.mark.parametrize(
    "kind", ["dtd", "xxe-file", "xxe-net", "external-dtd", "billion-laughs", "quadratic-blowup"]
)
def test_any_dtd_is_refused_before_it_is_read(kind: str) -> None:
    chunks = hostile_document(
        kind, canary_url="http://127.0.0.1:9/canary", target_file="/etc/hostname", size=0
    )
    tracemalloc.start()
    try:
        with pytest.raises(DocumentError, match="declares a DTD"):
            parse(chunks)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, f"refusing {kind} took {peak} bytes"


def test_billion_laughs_costs_no_memory_growth() -> None:
    def laughs() -> Iterable[bytes]:
        # The classic payload, then a long tail of records it would have been followed by.
        yield from hostile_document("billion-laughs", canary_url="", target_file="", size=0)
        yield from (good(i) for i in range(100_000))

    tracemalloc.start()
    try:
        with pytest.raises(DocumentError):
            parse(laughs())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_deep_nesting_outside_records_fails_the_document_in_bounded_memory() -> None:
    tracemalloc.start()
    try:
        with pytest.raises(DocumentError, match="nesting deeper than 32"):
            parse(hostile_document("deep-nesting", canary_url="", target_file="", size=500_000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000


def test_deep_nesting_inside_a_record_skips_that_record() -> None:
    records, rejects = parse(
        hostile_document("deep-record", canary_url="", target_file="", size=5000)
    )
    assert [r.plan_id for r in records] == ["900"]
    assert rejects[0].reason == "nesting deeper than 32 elements"
    assert rejects[0].truncated


def test_too_many_attributes_and_oversized_values_reject_the_record() -> None:
    many, _ = (
        parse(hostile_document("many-attributes", canary_url="", target_file="", size=100)),
        None,
    )
    assert [r.plan_id for r in many[0]] == ["900"]
    assert "more than 64 attributes" in many[1][0].reason
    huge = parse(hostile_document("huge-attribute", canary_url="", target_file="", size=50_000))
    assert [r.plan_id for r in huge[0]] == ["900"]
    assert "'title' is 50000 characters" in huge[1][0].reason


def test_a_record_over_the_size_limit_is_skipped_while_it_streams() -> None:
    zones = b"".join(
        b'<zone zone_id="%d" capacity="1" price="1" name="z"/>' % i for i in range(5000)
    )
    big = good(2).replace(b"</plan>", zones + b"</plan>")
    limits = ParseLimits(max_record_bytes=50_000, max_record_elements=100_000)
    records, rejects = parse(split(document(good(1), big, good(3)), 4096), limits)
    assert [r.plan_id for r in records] == ["1", "3"]
    assert rejects[0].reason == "the record exceeds 50000 bytes"


def test_a_single_token_over_the_limit_outside_records_fails() -> None:
    data = b"<planList><output><!-- " + b"x" * 300_000 + b" --></output></planList>"
    with pytest.raises(DocumentError, match="markup token exceeds"):
        parse(split(data, 65536), ParseLimits(max_token_bytes=100_000))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "the document is empty"),
        (b'{"plans": []}', "not XML"),
        (b"<html><body/></html>", "root element is <html>, expected <planList>"),
        (b"<planList><other/></planList>", "has no <planList/output> element"),
        (document(good(1))[:-30], "truncated"),
        (document(good(1)) + b"<junk/>", "malformed outside any record"),
        (b"<planList><output>&amp;&bogus;</output></planList>", "malformed outside any record"),
    ],
)
def test_broken_documents_fail_with_a_clear_error(data: bytes, message: str) -> None:
    with pytest.raises(DocumentError, match=message):
        parse(split(data, 10))


def test_a_document_cut_inside_a_record_fails_even_after_good_records() -> None:
    spec = SnapshotSpec(seed=2, plans=100, truncate_after=60)
    parser = new_parser("event-plans")
    for chunk in snapshot_chunks(spec, 1):
        parser.feed(chunk)
    with pytest.raises(DocumentError, match="truncated"):
        parser.close()
    assert parser.stats.records == 60  # delivered before the break: the caller fails them all
    with pytest.raises(DocumentError, match="already failed"):
        parser.feed(b"<more/>")


def test_too_many_rejects_fail_the_document() -> None:
    bad = good(1).replace(b'price="5.00"', b'price="x"')
    with pytest.raises(DocumentError, match="more than 3 malformed records"):
        parse([document(*[bad] * 5)], ParseLimits(max_rejects=3))


def test_unknown_elements_are_ignored_and_counted() -> None:
    data = b"<planList><meta a='1'><x/></meta><output><note/>" + good(1) + b"</output></planList>"
    parser = new_parser("event-plans")
    parser.feed(data)
    parser.close()
    records, _ = parser.take()
    assert [r.plan_id for r in records] == ["1"]
    assert parser.stats.ignored_elements == 2


def test_latin1_documents_decode_and_can_skip_records() -> None:
    title = "Café".encode("latin-1")
    one = good(1).replace(b"Plan 1", title)
    bad = good(2).replace(b"Plan 2", b"A & B")
    data = b'<?xml version="1.0" encoding="ISO-8859-1"?><planList><output>' + one + bad + good(3)
    records, rejects = parse(split(data + b"</output></planList>", 3))
    assert [(r.plan_id, r.title) for r in records] == [("1", "Café"), ("3", "Plan 3")]
    assert len(rejects) == 1


def test_utf16_documents_parse_but_cannot_skip_a_broken_record() -> None:
    text = document(good(1)).decode().replace('<?xml version="1.0"?>', "")
    records, _ = parse([text.encode("utf-16")])
    assert [r.plan_id for r in records] == ["1"]
    broken = document(good(1), good(2).replace(b"Plan 2", b"A & B")).decode()
    with pytest.raises(DocumentError, match="cannot be skipped in this encoding"):
        parse([broken.replace('<?xml version="1.0"?>', "").encode("utf-16")])


def test_a_second_layout_with_text_content_needs_no_parser_change() -> None:
    layout = RecordLayout(("feed", "items", "item"), text=True)

    def mapper(element: RawElement) -> list[str | InvalidRecord]:
        names: list[str | InvalidRecord] = [
            child.text.strip() for child in element.children if child.name == "name"
        ]
        return names or [InvalidRecord("no name")]

    parser: StreamParser[str] = StreamParser(layout, mapper)
    parser.feed(b"<feed><items><item><name> one </name></item><item/><item><name>two</name>")
    parser.feed(b"</item></items></feed>")
    parser.close()
    records, rejects = parser.take()
    assert records == ["one", "two"]
    assert [r.reason for r in rejects] == ["no name"]


@pytest.mark.parametrize("size", [3, 50, 65536])
def test_skipping_a_record_never_restarts_inside_a_comment_or_cdata(size: int) -> None:
    fake = b'<base_plan base_plan_id="666" sell_mode="online" title="Fake"><plan plan_id="666" '
    fake += (
        b'plan_start_date="2026-01-01T00:00:00" plan_end_date="2026-01-01T01:00:00"/></base_plan>'
    )
    bad = good(2).replace(b"Plan 2", b"A & B")
    hidden = b"<!-- " + fake + b" --><![CDATA[" + fake + b"]]><?note " + fake + b"?>"
    data = document(good(1), bad + hidden, good(3))
    records, rejects = parse(split(data, size))
    assert [r.plan_id for r in records] == ["1", "3"]
    assert [r.raw for r in rejects] == [bad + hidden]


def test_a_record_with_too_many_elements_is_skipped() -> None:
    zones = b"".join(b'<zone zone_id="%d" capacity="1" price="1" name="z"/>' % i for i in range(50))
    big = good(2).replace(b"</plan>", zones + b"</plan>")
    records, rejects = parse([document(good(1), big, good(3))], ParseLimits(max_record_elements=20))
    assert [r.plan_id for r in records] == ["1", "3"]
    assert rejects[0].reason == "the record has more than 20 elements"


@pytest.mark.slow  # 200 parses: a few seconds on a loaded machine
def test_random_damage_never_invents_or_alters_a_record() -> None:
    """Damage one byte anywhere, in many ways: the parse either fails as a document, or
    every record it returns is as the snapshot had it, except possibly the one record
    whose bytes were damaged; every reject is a slice of the document."""
    spec = SnapshotSpec(seed=21, plans=60, plans_per_base=2)
    clean = b"".join(snapshot_chunks(spec, 1))
    expected = expected_snapshot(spec, 1)
    rng = random.Random(1234)
    outcomes = {"failed": 0, "skipped": 0, "unchanged": 0}
    for _ in range(200):
        at = rng.randrange(len(clean))
        damaged = clean[:at] + bytes([rng.choice(b'<>&"/=x\x00 ')]) + clean[at + 1 :]
        try:
            records, rejects = parse(split(damaged, rng.choice([7, 300, 65536])))
        except DocumentError:
            outcomes["failed"] += 1
            continue
        # The base plan the damage fell in (the only one whose records may differ).
        hit = damaged[damaged.rfind(b"<base_plan", 0, at + 1) : damaged.find(b"</base_plan>", at)]
        for record in records:
            want = expected.get(record.identity)
            same = want is not None and (
                (record.title, record.online, record.starts_at.replace(tzinfo=None))
                == (want.title, want.online, want.starts_at)
                and tuple(z.price for z in record.zones) == want.prices
            )
            assert same or f'plan_id="{record.plan_id}"'.encode() in hit, (at, record)
        for reject in rejects:
            assert damaged[reject.offset : reject.offset + len(reject.raw)] == reject.raw
        outcomes["skipped" if rejects else "unchanged"] += 1
    assert all(outcomes.values()), outcomes  # every kind of outcome was exercised
