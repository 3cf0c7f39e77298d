"""The provider sandbox: a loopback HTTP/1.1 server serving seeded snapshots and faults.

Place in the pipeline: stands in for a provider in tests, the demo and the benchmark,
over real sockets. ``GET /feeds/<name>`` serves the next version of that feed's
snapshot (version 1, 2, ... per feed, so snapshots change between fetches); the feed's
:class:`FeedConfig` (given per feed at start, else the default) may be overridden by
query parameters, e.g. ``/feeds/acme?plans=500&fail_first=2&fail_status=429&retry_after=1``.

Faults on request: ``latency`` (seconds before the headers), ``drip_bytes`` and
``drip_interval`` (a slow body), ``fail_first`` requests answered ``fail_status`` (with
``retry_after``: seconds, or ``date:N`` for an HTTP-date N seconds ahead), ``drop_after``
(the connection is cut after that many body bytes), ``truncate_after`` (the document
stops mid-record but the response completes), ``malformed_every``/``malformed_kind``,
``hostile`` (see :mod:`~herald.ingest.sandbox.hostile`), ``gzip``. ``auth`` (config only)
is the Authorization value a feed requires. ``/canary/...`` counts hits (a parser that
fetched an external entity would land there); ``/stats`` reports counts as JSON.

The body is written with chunked transfer encoding straight from the generator, so a
snapshot of any size costs one chunk of memory.
"""

from __future__ import annotations

import asyncio
import dataclasses
import email.utils
import json
import time
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from herald.ingest.sandbox.hostile import HOSTILE_KINDS, hostile_document
from herald.ingest.sandbox.snapshots import SnapshotSpec, snapshot_chunks

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


@dataclass(frozen=True)
class FeedConfig:
    """One feed's snapshot and faults.

    Every field of ``spec`` (:class:`SnapshotSpec`) and of this class but ``auth`` can
    be set by a query parameter of the same name.
    """

    spec: SnapshotSpec = field(default_factory=SnapshotSpec)
    version: int | None = None  # serve this version instead of the next one
    latency: float = 0.0
    drip_bytes: int = 0
    drip_interval: float = 0.05
    fail_first: int = 0
    fail_status: int = 503
    retry_after: str | None = None
    drop_after: int | None = None
    gzip: bool = False
    hostile: str | None = None
    hostile_size: int = 100_000
    auth: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if self.hostile is not None and self.hostile not in HOSTILE_KINDS:
            raise ValueError(f"hostile is one of {', '.join(HOSTILE_KINDS)}")
        if self.fail_status not in _REASONS or self.fail_status < 400:
            raise ValueError(f"fail_status is one of {sorted(s for s in _REASONS if s >= 400)}")
        if self.latency < 0 or self.drip_bytes < 0 or self.drip_interval < 0:
            raise ValueError("latency, drip_bytes and drip_interval must be >= 0")

    def with_query(self, query: Mapping[str, str]) -> FeedConfig:
        """This config with query parameters applied (unknown names are an error)."""
        own = {
            f.name: str(f.type) for f in dataclasses.fields(self) if f.name not in ("spec", "auth")
        }
        spec = {f.name: str(f.type) for f in dataclasses.fields(SnapshotSpec)}
        changes: dict[str, Any] = {}
        spec_changes: dict[str, Any] = {}
        for name, raw in query.items():
            if name in own:
                changes[name] = _convert(name, raw, own[name])
            elif name in spec:
                spec_changes[name] = _convert(name, raw, spec[name])
            else:
                raise ValueError(f"unknown sandbox parameter {name!r}")
        if spec_changes:
            changes["spec"] = dataclasses.replace(self.spec, **spec_changes)
        return dataclasses.replace(self, **changes)


def _convert(name: str, raw: str, kind: str) -> object:
    if raw == "" and "None" in kind:
        return None
    try:
        if kind.startswith("int"):
            return int(raw)
        if kind.startswith("float"):
            return float(raw)
        if kind.startswith("bool"):
            return raw.lower() in ("1", "true", "yes", "on")
    except ValueError:
        raise ValueError(f"sandbox parameter {name}={raw!r} is not a {kind}") from None
    return raw


@dataclass
class FeedStats:
    requests: int = 0
    served: list[int] = field(default_factory=list)  # snapshot versions served, in order


class Sandbox:
    """The server; ``async with Sandbox(...) as sandbox`` runs it on the current loop."""

    def __init__(
        self,
        feeds: Mapping[str, FeedConfig] | None = None,
        *,
        default: FeedConfig | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        target_file: str = "/etc/hostname",
    ) -> None:
        self.feeds = dict(feeds or {})
        self.default = default or FeedConfig()
        self.host = host
        self.port = port
        self.target_file = target_file  # what the xxe-file payload tries to read
        self.stats: dict[str, FeedStats] = {}
        self.canary_hits = 0
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    async def start(self) -> Sandbox:
        self._server = await asyncio.start_server(self._connection, self.host, self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> Sandbox:
        return await self.start()

    async def __aexit__(self, *_: object) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def feed_url(self, name: str, **params: object) -> str:
        query = urlencode(
            {
                k: "" if v is None else str(v).lower() if isinstance(v, bool) else v
                for k, v in params.items()
            }
        )
        return f"{self.base_url}/feeds/{name}" + (f"?{query}" if query else "")

    def requests(self, name: str) -> int:
        return self.stats.get(name, FeedStats()).requests

    # -- HTTP ---------------------------------------------------------------------------

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    return
                keep = await self._request(head, writer)
                if not keep:
                    return
        except (ConnectionError, asyncio.CancelledError):
            return
        finally:
            self._connections.discard(task)
            writer.close()

    async def _request(self, head: bytes, writer: asyncio.StreamWriter) -> bool:
        lines = head.decode("latin-1").split("\r\n")
        try:
            method, target, _version = lines[0].split(" ")
        except ValueError:
            return await self._plain(writer, 400, "malformed request line\n", keep=False)
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            if name:
                headers[name.strip().lower()] = value.strip()
        keep = headers.get("connection", "").lower() != "close"
        if method not in ("GET", "HEAD"):
            return await self._plain(writer, 405, "only GET and HEAD\n", keep)
        url = urlsplit(target)
        if url.path.startswith("/canary"):
            self.canary_hits += 1
            return await self._plain(writer, 404, "canary\n", keep)
        if url.path == "/healthz":
            return await self._plain(writer, 200, "ok\n", keep)
        if url.path == "/stats":
            body = {
                "canary_hits": self.canary_hits,
                "feeds": {n: dataclasses.asdict(s) for n, s in self.stats.items()},
            }
            return await self._plain(writer, 200, json.dumps(body), keep, "application/json")
        if not url.path.startswith("/feeds/") or len(url.path) <= len("/feeds/"):
            return await self._plain(writer, 404, "no such path; try /feeds/<name>\n", keep)
        name = url.path[len("/feeds/") :]
        try:
            config = self.feeds.get(name, self.default).with_query(dict(parse_qsl(url.query)))
        except ValueError as exc:
            return await self._plain(writer, 400, f"{exc}\n", keep)
        return await self._feed(name, config, headers, writer, keep, head_only=method == "HEAD")

    async def _feed(
        self,
        name: str,
        config: FeedConfig,
        headers: dict[str, str],
        writer: asyncio.StreamWriter,
        keep: bool,
        head_only: bool,
    ) -> bool:
        stats = self.stats.setdefault(name, FeedStats())
        stats.requests += 1
        if config.latency:
            await asyncio.sleep(config.latency)
        if config.auth is not None and headers.get("authorization") != config.auth:
            return await self._plain(writer, 401, "missing or wrong credentials\n", keep)
        if stats.requests <= config.fail_first:
            extra = {}
            if config.retry_after is not None:
                extra["Retry-After"] = _retry_after(config.retry_after)
            return await self._plain(
                writer, config.fail_status, "failing on purpose\n", keep, extra=extra
            )
        if config.hostile is not None:
            version = 0
            chunks: Iterator[bytes] = hostile_document(
                config.hostile,
                canary_url=f"{self.base_url}/canary",
                target_file=self.target_file,
                size=config.hostile_size,
            )
        else:
            version = config.version or 1 + len(stats.served)
            chunks = snapshot_chunks(config.spec, version)
        stats.served.append(version)
        response = [
            "HTTP/1.1 200 OK",
            "Content-Type: application/xml; charset=utf-8",
            "Transfer-Encoding: chunked",
            f"X-Snapshot-Version: {version}",
            f"Date: {email.utils.formatdate(usegmt=True)}",
            f"Connection: {'keep-alive' if keep else 'close'}",
        ]
        if config.gzip:
            response.append("Content-Encoding: gzip")
        writer.write(("\r\n".join(response) + "\r\n\r\n").encode())
        if head_only:
            await writer.drain()
            return keep
        return await self._body(writer, chunks, config) and keep

    async def _body(
        self, writer: asyncio.StreamWriter, chunks: Iterator[bytes], config: FeedConfig
    ) -> bool:
        """Write the chunked body; False when the connection was cut on purpose."""
        compressor = zlib.compressobj(wbits=31) if config.gzip else None
        sent = 0
        pieces = _compressed(chunks, compressor) if compressor else chunks
        for piece in pieces:
            if config.drop_after is not None and sent + len(piece) > config.drop_after:
                await self._chunk(writer, piece[: config.drop_after - sent], config)
                writer.transport.abort()  # no terminating chunk: the client sees a cut body
                return False
            await self._chunk(writer, piece, config)
            sent += len(piece)
        writer.write(b"0\r\n\r\n")
        await writer.drain()
        return True

    async def _chunk(self, writer: asyncio.StreamWriter, data: bytes, config: FeedConfig) -> None:
        if not data:
            return
        step = config.drip_bytes or len(data)
        for at in range(0, len(data), step):
            piece = data[at : at + step]
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            await writer.drain()
            if config.drip_bytes and config.drip_interval:
                await asyncio.sleep(config.drip_interval)

    async def _plain(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: str,
        keep: bool,
        content_type: str = "text/plain; charset=utf-8",
        extra: Mapping[str, str] | None = None,
    ) -> bool:
        data = body.encode()
        lines = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(data)}",
            f"Connection: {'keep-alive' if keep else 'close'}",
            *(f"{k}: {v}" for k, v in (extra or {}).items()),
        ]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + data)
        await writer.drain()
        return keep


def _compressed(chunks: Iterator[bytes], compressor: Any) -> Iterator[bytes]:
    for chunk in chunks:
        out = compressor.compress(chunk)
        if out:
            yield out
    yield compressor.flush()


def _retry_after(value: str) -> str:
    """``date:N`` becomes an HTTP-date N seconds from now; anything else is sent as is."""
    if value.startswith("date:"):
        return email.utils.formatdate(time.time() + float(value[5:]), usegmt=True)
    return value
