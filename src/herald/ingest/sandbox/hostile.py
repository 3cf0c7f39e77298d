"""Hostile and broken documents the sandbox serves on request.

Place in the pipeline: the proofs that the fetcher and parser refuse what a provider
must never be able to do to us (read a local file, reach the network, blow up memory)
and report a broken document clearly. Large payloads are generated as a stream.
"""

from __future__ import annotations

from collections.abc import Iterator

_HEAD = b'<?xml version="1.0" encoding="UTF-8"?>\n'
_GOOD_RECORD = (
    b'<base_plan base_plan_id="900" sell_mode="online" title="After the storm">'
    b'<plan plan_start_date="2026-03-01T20:00:00" plan_end_date="2026-03-01T22:00:00" '
    b'plan_id="900"><zone zone_id="1" capacity="10" price="5.00" name="Sala" '
    b'numbered="false"/></plan></base_plan>\n'
)


def _record(title: bytes) -> bytes:
    return (
        b'<base_plan base_plan_id="1" sell_mode="online" title="' + title + b'">'
        b'<plan plan_start_date="2026-03-01T20:00:00" plan_end_date="2026-03-01T22:00:00" '
        b'plan_id="1"><zone zone_id="1" capacity="10" price="5.00" name="Sala"/></plan>'
        b"</base_plan>\n"
    )


def _repeat(piece: bytes, times: int, chunk: int = 1 << 16) -> Iterator[bytes]:
    per = max(1, chunk // max(1, len(piece)))
    while times > 0:
        count = min(per, times)
        yield piece * count
        times -= count


def _wrapped(*body: bytes) -> Iterator[bytes]:
    yield _HEAD + b"<planList><output>\n" + b"".join(body) + b"</output></planList>\n"


def hostile_document(kind: str, *, canary_url: str, target_file: str, size: int) -> Iterator[bytes]:
    """The document of ``kind`` (one of :data:`HOSTILE_KINDS`) as byte chunks.

    ``canary_url`` is a URL on the sandbox that counts hits (a parser that fetches
    external entities would hit it); ``target_file`` is the local file an XXE payload
    tries to read; ``size`` scales the deep and huge payloads.
    """
    canary = canary_url.encode()
    if kind == "dtd":
        yield _HEAD + b"<!DOCTYPE planList [<!ELEMENT planList ANY>]>\n"
        yield from _wrapped(_GOOD_RECORD)
    elif kind == "xxe-file":
        yield _HEAD + b'<!DOCTYPE planList [<!ENTITY leak SYSTEM "file://'
        yield target_file.encode() + b'">]>\n<planList><output>\n' + _record(b"&leak;")
        yield b"</output></planList>\n"
    elif kind == "xxe-net":
        yield _HEAD + b'<!DOCTYPE planList [<!ENTITY call SYSTEM "' + canary + b'/entity">\n'
        yield b'<!ENTITY % remote SYSTEM "' + canary + b'/parameter"> %remote;]>\n'
        yield b"<planList><output>\n" + _record(b"&call;") + b"</output></planList>\n"
    elif kind == "external-dtd":
        yield _HEAD + b'<!DOCTYPE planList SYSTEM "' + canary + b'/dtd">\n'
        yield from _wrapped(_GOOD_RECORD)
    elif kind == "billion-laughs":
        yield _HEAD + b'<!DOCTYPE planList [<!ENTITY lol0 "lol">\n'
        for level in range(1, 10):
            refs = f"&lol{level - 1};".encode() * 10
            yield f"<!ENTITY lol{level} ".encode() + b'"' + refs + b'">\n'
        yield b"]>\n<planList><output>\n" + _record(b"&lol9;") + b"</output></planList>\n"
    elif kind == "quadratic-blowup":
        yield _HEAD + b'<!DOCTYPE planList [<!ENTITY big "' + b"x" * 50_000 + b'">]>\n'
        yield b"<planList><output>\n" + _record(b"&big;" * 20_000) + b"</output></planList>\n"
    elif kind == "undeclared-entity":
        yield from _wrapped(_record(b"Caf&eacute; concert"), _GOOD_RECORD)
    elif kind == "deep-nesting":
        yield _HEAD + b"<planList><output>"
        yield from _repeat(b"<deep>", size)
        yield from _repeat(b"</deep>", size)
        yield b"</output></planList>\n"
    elif kind == "deep-record":
        yield _HEAD + b'<planList><output>\n<base_plan base_plan_id="1" sell_mode="online" '
        yield b'title="Deep"><plan plan_id="1">'
        yield from _repeat(b"<deep>", size)
        yield from _repeat(b"</deep>", size)
        yield b"</plan></base_plan>\n" + _GOOD_RECORD + b"</output></planList>\n"
    elif kind == "huge-attribute":
        yield _HEAD + b'<planList><output>\n<base_plan base_plan_id="1" sell_mode="online" title="'
        yield from _repeat(b"A", size)
        yield b'"><plan plan_id="1"/></base_plan>\n' + _GOOD_RECORD + b"</output></planList>\n"
    elif kind == "many-attributes":
        attrs = b"".join(b' a%d="x"' % i for i in range(size))
        yield from _wrapped(b'<base_plan base_plan_id="1"' + attrs + b"/>\n", _GOOD_RECORD)
    elif kind == "wrong-root":
        yield b"<html><body><h1>Service temporarily unavailable</h1></body></html>\n"
    elif kind == "not-xml":
        yield b'{"planList": {"output": []}}\n'
    elif kind == "empty":
        return
    else:
        raise ValueError(f"unknown hostile document {kind!r} (known: {', '.join(HOSTILE_KINDS)})")


HOSTILE_KINDS = (
    "dtd",
    "xxe-file",
    "xxe-net",
    "external-dtd",
    "billion-laughs",
    "quadratic-blowup",
    "undeclared-entity",
    "deep-nesting",
    "deep-record",
    "huge-attribute",
    "many-attributes",
    "wrong-root",
    "not-xml",
    "empty",
)
