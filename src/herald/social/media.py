"""Fetching a post's media URL within size, type and time limits, streamed to a spool.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): the media
step fetches the URL here, then hands the :class:`FetchedMedia` to the adapter's upload;
the upload's result is what gets checkpointed, so a retry after the upload never
fetches again.

Limits, each failing with a clear :class:`MediaRejected` (permanent) or a transient
error worth a retry:

* only ``http``/``https`` URLs; with ``allow_private`` off (the default when
  ``HERALD_ENV=production``) no loopback, private, link-local or otherwise non-global
  address is connected to - checked on every connection, after DNS resolution, so
  neither a redirect nor a DNS answer that changes between check and use gets through;
* at most ``max_bytes`` (refused from ``Content-Length`` before reading, else as soon as
  the stream passes the limit);
* a content type from ``content_types``, and bytes that really are of that type;
* at most ``total_timeout`` seconds for the whole fetch, redirects included.

The body goes to a :class:`tempfile.SpooledTemporaryFile`: memory up to
``spool_memory`` bytes, a temporary file beyond, never the whole of a large file in RAM.
"""

from __future__ import annotations

import asyncio
import hashlib
import ipaddress
import os
import re
import socket
import tempfile
from collections.abc import AsyncIterator, Iterable, Mapping
from dataclasses import dataclass
from typing import IO, Any

import httpcore
import httpx

from herald.social.errors import PermanentError, RateLimited, TransientError
from herald.social.ratelimit import platform_now, retry_after

MiB = 1024 * 1024
DEFAULT_CONTENT_TYPES = frozenset(
    {"image/jpeg", "image/png", "image/gif", "image/webp", "video/mp4", "video/quicktime"}
)
_GENERIC_TYPES = frozenset({"", "application/octet-stream", "binary/octet-stream"})
_EXTENSIONS = {
    "image/jpeg": ".jpg",
    "image/png": ".png",
    "image/gif": ".gif",
    "image/webp": ".webp",
    "video/mp4": ".mp4",
    "video/quicktime": ".mov",
}
_OPERATION = "fetch media"


def is_production(environ: Mapping[str, str] | None = None) -> bool:
    env = os.environ if environ is None else environ
    return env.get("HERALD_ENV", "").strip().lower() == "production"


class MediaRejected(PermanentError):
    """The media URL or what it serves breaks a limit: retrying cannot help."""


class AddressBlocked(Exception):
    """A connection to a non-global address was refused (private addresses not allowed)."""


@dataclass(frozen=True)
class MediaLimits:
    max_bytes: int = 16 * MiB
    content_types: frozenset[str] = DEFAULT_CONTENT_TYPES
    total_timeout: float = 30.0
    connect_timeout: float = 5.0
    max_redirects: int = 5
    allow_private: bool = True
    spool_memory: int = 1 * MiB
    spool_dir: str | None = None

    def __post_init__(self) -> None:
        if self.max_bytes <= 0 or self.total_timeout <= 0 or self.connect_timeout <= 0:
            raise ValueError("media limits must be positive")
        if self.max_redirects < 0 or self.spool_memory < 0:
            raise ValueError("max_redirects and spool_memory must not be negative")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> MediaLimits:
        """Defaults for this environment: private addresses refused in production.

        ``HERALD_MEDIA_ALLOW_PRIVATE`` overrides that default either way.
        """
        env = os.environ if environ is None else environ
        raw = env.get("HERALD_MEDIA_ALLOW_PRIVATE", "").strip().lower()
        if raw in ("1", "true", "yes", "on"):
            allow = True
        elif raw in ("0", "false", "no", "off"):
            allow = False
        elif raw == "":
            allow = not is_production(env)
        else:
            raise ValueError(f"HERALD_MEDIA_ALLOW_PRIVATE must be true or false, got {raw!r}")
        return cls(**{"allow_private": allow, **overrides})

    def narrowed(self, content_types: Iterable[str], max_bytes: int) -> MediaLimits:
        """These limits, tightened to what a platform accepts."""
        types = self.content_types & frozenset(content_types)
        return MediaLimits(
            max_bytes=min(self.max_bytes, max_bytes),
            content_types=types,
            total_timeout=self.total_timeout,
            connect_timeout=self.connect_timeout,
            max_redirects=self.max_redirects,
            allow_private=self.allow_private,
            spool_memory=self.spool_memory,
            spool_dir=self.spool_dir,
        )


class FetchedMedia:
    """Media bytes on a spool, with what is known about them. Close it when done."""

    def __init__(
        self,
        spool: IO[bytes],
        *,
        content_type: str,
        size: int,
        sha256: str,
        source_url: str,
        filename: str,
    ) -> None:
        self._spool = spool
        self.content_type = content_type
        self.size = size
        self.sha256 = sha256
        self.source_url = source_url
        self.filename = filename

    @classmethod
    def from_bytes(
        cls, data: bytes, content_type: str, *, source_url: str = "", filename: str = ""
    ) -> FetchedMedia:
        spool = tempfile.SpooledTemporaryFile(max_size=max(len(data), 1))  # noqa: SIM115
        spool.write(data)
        return cls(
            spool,
            content_type=content_type,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            source_url=source_url,
            filename=filename or "media" + _EXTENSIONS.get(content_type, ""),
        )

    def file(self) -> IO[bytes]:
        """The spool, rewound: pass it as a multipart upload."""
        self._spool.seek(0)
        return self._spool

    async def chunks(self, size: int = 64 * 1024) -> AsyncIterator[bytes]:
        """The bytes in chunks, from the start (a raw upload body)."""
        spool = self.file()
        while chunk := spool.read(size):
            yield chunk

    def read(self) -> bytes:
        return self.file().read()

    def close(self) -> None:
        self._spool.close()

    def __enter__(self) -> FetchedMedia:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<FetchedMedia {self.content_type} {self.size} bytes sha256={self.sha256[:12]}>"


def sniff(head: bytes) -> str | None:
    """The media type the first bytes show, if one we know."""
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[4:8] == b"ftyp":
        return "video/quicktime" if head[8:10] == b"qt" else "video/mp4"
    return None


def safe_url(url: httpx.URL | str) -> str:
    """The URL without query, fragment or user info: fine to show (signed URLs aren't)."""
    parsed = httpx.URL(str(url))
    port = f":{parsed.port}" if parsed.port else ""
    return f"{parsed.scheme}://{parsed.host}{port}{parsed.path}"


def address_allowed(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


class _GuardedBackend(httpcore.AsyncNetworkBackend):
    """Resolves the host itself and connects only to allowed addresses."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except OSError as exc:
            raise httpcore.ConnectError(f"cannot resolve {host}: {exc.strerror}") from None
        addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
        for address in addresses:
            if not address_allowed(address):
                raise AddressBlocked(f"{host} resolves to the non-public address {address}")
        error: Exception = httpcore.ConnectError(f"{host} has no address")
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                error = exc
        raise error

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 - httpcore's signature
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise AddressBlocked("unix sockets are not fetched from")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _GuardedTransport(httpx.AsyncHTTPTransport):
    def __init__(self) -> None:
        super().__init__(trust_env=False)
        # The stock transport with one change: connections go through the guard.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            network_backend=_GuardedBackend(),
        )


class MediaFetcher:
    """Fetches media URLs under :class:`MediaLimits`; one per worker, closed at the end."""

    def __init__(self, limits: MediaLimits, *, transport: httpx.AsyncBaseTransport | None = None):
        self.limits = limits
        if transport is None:
            transport = httpx.AsyncHTTPTransport() if limits.allow_private else _GuardedTransport()
        self._client = httpx.AsyncClient(
            transport=transport,
            follow_redirects=False,
            trust_env=False,
            timeout=httpx.Timeout(limits.total_timeout, connect=limits.connect_timeout),
            headers={"User-Agent": "Herald media fetcher", "Accept": "image/*, video/*"},
        )

    async def __aenter__(self) -> MediaFetcher:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def fetch(self, url: str, limits: MediaLimits | None = None) -> FetchedMedia:
        """Fetch ``url`` (optionally under tighter ``limits``, e.g. a platform's)."""
        limits = limits or self.limits
        if not limits.content_types:
            raise _rejected("no media type is both allowed here and accepted by the platform")
        try:
            async with asyncio.timeout(limits.total_timeout):
                return await self._follow(url, limits)
        except TimeoutError:
            raise TransientError(
                f"fetching {safe_url(url)} took longer than {limits.total_timeout:g} s",
                platform="media",
                operation=_OPERATION,
            ) from None

    async def _follow(self, url: str, limits: MediaLimits) -> FetchedMedia:
        current = _check_scheme(url)
        for _hop in range(limits.max_redirects + 1):
            try:
                async with self._client.stream("GET", current) as response:
                    if response.is_redirect:
                        location = response.headers.get("location", "")
                        current = _check_scheme(str(current.join(location)))
                        continue
                    return await _receive(response, url, limits)
            except AddressBlocked as exc:
                raise _rejected(f"refused to fetch {safe_url(current)}: {exc}") from None
            except httpx.TimeoutException as exc:
                raise TransientError(
                    f"fetching {safe_url(current)} timed out ({type(exc).__name__})",
                    platform="media",
                    operation=_OPERATION,
                ) from None
            except httpx.TransportError as exc:
                raise TransientError(
                    f"fetching {safe_url(current)} failed: {type(exc).__name__}",
                    platform="media",
                    operation=_OPERATION,
                ) from None
        raise _rejected(f"{safe_url(url)} redirected more than {limits.max_redirects} times")


def _rejected(message: str) -> MediaRejected:
    return MediaRejected(message, platform="media", operation=_OPERATION)


def _check_scheme(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise _rejected("the media URL is not a valid URL") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise _rejected(
            f"only http and https media URLs are fetched, not {parsed.scheme or 'this'!r}"
        )
    return parsed


def _status_error(response: httpx.Response) -> Exception:
    status = response.status_code
    where = safe_url(response.url)
    message = f"fetching {where}: HTTP {status}"
    kwargs: dict[str, Any] = {"platform": "media", "operation": _OPERATION, "status": status}
    wait = retry_after(response.headers, platform_now(response.headers))
    if status == 429 or (status == 503 and wait is not None):
        return RateLimited(message, delay=wait or 60.0, **kwargs)
    if status >= 500 or status == 408:
        return TransientError(message, **kwargs)
    return MediaRejected(message, **kwargs)


async def _receive(response: httpx.Response, url: str, limits: MediaLimits) -> FetchedMedia:
    if response.status_code != 200:
        raise _status_error(response)
    where = safe_url(url)
    declared = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    if declared not in _GENERIC_TYPES and declared not in limits.content_types:
        raise _rejected(
            f"{where} is {declared}, not an accepted media type "
            f"({', '.join(sorted(limits.content_types))})"
        )
    length = response.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limits.max_bytes:
        raise _rejected(
            f"{where} is {int(length)} bytes, over the limit of {limits.max_bytes} bytes"
        )
    spool = tempfile.SpooledTemporaryFile(  # noqa: SIM115 - handed to FetchedMedia
        max_size=limits.spool_memory, dir=limits.spool_dir
    )
    try:
        digest = hashlib.sha256()
        size = 0
        head = b""
        async for chunk in response.aiter_bytes():
            size += len(chunk)
            if size > limits.max_bytes:
                raise _rejected(f"{where} is over the limit of {limits.max_bytes} bytes")
            if len(head) < 16:
                head += chunk[: 16 - len(head)]
            digest.update(chunk)
            spool.write(chunk)
        if size == 0:
            raise _rejected(f"{where} is empty")
        content_type = _confirm_type(declared, sniff(head), where, limits)
    except BaseException:
        spool.close()
        raise
    return FetchedMedia(
        spool,
        content_type=content_type,
        size=size,
        sha256=digest.hexdigest(),
        source_url=url,
        filename=_filename(response.url, content_type),
    )


def _confirm_type(declared: str, sniffed: str | None, where: str, limits: MediaLimits) -> str:
    if sniffed is None:
        raise _rejected(
            f"{where} does not look like any accepted media type (declared {declared or 'nothing'})"
        )
    if declared in _GENERIC_TYPES:
        if sniffed not in limits.content_types:
            raise _rejected(f"{where} is {sniffed}, not an accepted media type")
        return sniffed
    if sniffed != declared:
        raise _rejected(f"{where} says it is {declared} but its content is {sniffed}")
    return declared


def _filename(url: httpx.URL, content_type: str) -> str:
    last = url.path.rsplit("/", 1)[-1]
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", last.rsplit(".", 1)[0])[:60] or "media"
    return stem + _EXTENSIONS.get(content_type, "")
