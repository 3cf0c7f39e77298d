"""Media fetching within size, type and time limits, against the sandbox's media host."""

from __future__ import annotations

import hashlib

import httpx
import pytest

from herald.social.errors import RateLimited, TransientError
from herald.social.media import (
    FetchedMedia,
    MediaFetcher,
    MediaLimits,
    MediaRejected,
    address_allowed,
    sniff,
)
from herald.social.sandbox import Sandbox
from herald.social.sandbox.mediahost import sample_png


async def fetch(url: str, **limits: object) -> FetchedMedia:
    async with MediaFetcher(MediaLimits(**limits)) as fetcher:  # type: ignore[arg-type]
        return await fetcher.fetch(url)


async def test_fetches_streamed_to_a_spool(sandbox: Sandbox) -> None:
    url = sandbox.media_url("photo.png", size=200_000, length="omit")
    with await fetch(url, spool_memory=16 * 1024) as media:
        expected = sample_png(200_000, seed=sum(b"photo.png"))
        assert media.content_type == "image/png" and media.size == len(expected)
        assert media.sha256 == hashlib.sha256(expected).hexdigest()
        assert media.read() == expected and media.filename == "photo.png"
        assert b"".join([c async for c in media.chunks()]) == expected


async def test_size_limit_before_and_while_reading(sandbox: Sandbox) -> None:
    with pytest.raises(MediaRejected, match="over the limit of 10000 bytes") as info:
        await fetch(sandbox.media_url(size=50_000), max_bytes=10_000)
    assert "50" in str(info.value)  # refused from Content-Length, size named
    with pytest.raises(MediaRejected, match="over the limit of 10000 bytes"):
        await fetch(sandbox.media_url(size=50_000, length="omit"), max_bytes=10_000)


async def test_type_limits_check_the_bytes_too(sandbox: Sandbox) -> None:
    with pytest.raises(MediaRejected, match="text/html, not an accepted media type"):
        await fetch(sandbox.media_url(declared="text/html"))
    with pytest.raises(MediaRejected, match="does not look like any accepted media type"):
        await fetch(sandbox.media_url(body="text"))
    with pytest.raises(MediaRejected, match="says it is image/jpeg but its content is image/png"):
        await fetch(sandbox.media_url(declared="image/jpeg"))
    with await fetch(sandbox.media_url(declared="application/octet-stream")) as media:
        assert media.content_type == "image/png"
    with pytest.raises(MediaRejected, match="image/png, not an accepted"):
        await fetch(sandbox.media_url(), content_types=frozenset({"image/jpeg"}))


async def test_time_limit(sandbox: Sandbox) -> None:
    with pytest.raises(TransientError, match=r"longer than 0\.3 s"):
        await fetch(sandbox.media_url(size=100_000, drip=0.2), total_timeout=0.3)


async def test_schemes_and_private_addresses_are_refused(sandbox: Sandbox) -> None:
    for url in (
        "ftp://example.org/a.png",
        "file:///etc/passwd",
        "data:image/png;base64,AAAA",
        "nonsense",
    ):
        with pytest.raises(MediaRejected, match=r"only http and https|not a valid URL"):
            await fetch(url)
    for url in (sandbox.media_url(), sandbox.media_url().replace("127.0.0.1", "localhost")):
        with pytest.raises(MediaRejected, match="non-public address"):
            await fetch(url, allow_private=False)


async def test_redirects_and_error_statuses(sandbox: Sandbox) -> None:
    with await fetch(sandbox.media_url(redirects=2)) as media:
        assert media.content_type == "image/png"
    with pytest.raises(MediaRejected, match="redirected more than 5 times"):
        await fetch(sandbox.media_url(redirects=9))
    with pytest.raises(MediaRejected, match="HTTP 404"):
        await fetch(sandbox.media_url(status=404))
    with pytest.raises(TransientError, match="HTTP 502"):
        await fetch(sandbox.media_url(status=502))
    with pytest.raises(RateLimited):
        await fetch(sandbox.media_url(status=429))


async def test_a_dead_host_is_transient() -> None:
    with pytest.raises(TransientError, match="failed"):
        await fetch("http://127.0.0.1:9/a.png")


def test_limits_from_the_environment() -> None:
    assert MediaLimits.from_env({"HERALD_ENV": "production"}).allow_private is False
    assert MediaLimits.from_env({}).allow_private is True
    forced = MediaLimits.from_env({"HERALD_ENV": "production", "HERALD_MEDIA_ALLOW_PRIVATE": "yes"})
    assert forced.allow_private is True
    with pytest.raises(ValueError, match="HERALD_MEDIA_ALLOW_PRIVATE"):
        MediaLimits.from_env({"HERALD_MEDIA_ALLOW_PRIVATE": "maybe"})
    narrowed = MediaLimits().narrowed({"image/png", "image/tiff"}, 1000)
    assert narrowed.content_types == {"image/png"} and narrowed.max_bytes == 1000


def test_addresses_and_sniffing() -> None:
    for address in (
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "::1",
        "fe80::1%eth0",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        "224.0.0.1",
    ):
        assert not address_allowed(address), address
    assert address_allowed("8.8.8.8") and address_allowed("2606:4700:4700::1111")
    assert sniff(b"\xff\xd8\xff\xe0") == "image/jpeg"
    assert sniff(b"GIF89a...") == "image/gif"
    assert sniff(b"RIFF\x00\x00\x00\x00WEBPVP8 ") == "image/webp"
    assert sniff(b"\x00\x00\x00\x18ftypmp42") == "video/mp4"
    assert sniff(b"<html>") is None


async def test_transport_guard_is_really_installed() -> None:
    # The guard replaces the stock connection pool; fail loudly if httpx changes under it.
    async with MediaFetcher(MediaLimits(allow_private=False)) as fetcher:
        transport = fetcher._client._transport
        assert type(transport).__name__ == "_GuardedTransport"
        assert isinstance(transport, httpx.AsyncHTTPTransport)
