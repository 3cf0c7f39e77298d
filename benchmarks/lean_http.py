"""A lean HTTP/1.1 keep-alive client for load generators (the benchmarks' side only).

The benchmark's client shares the machine's cores with the system it measures, so every
millisecond of CPU it spends per request is taken from the API and the workers. httpx
costs about as much CPU per request as the API process answering it (its request and
response models, header normalisation, its connection pool's scan); this client does
only what a load generator needs: one persistent connection per caller, a request
written in one ``write``, a response read by its ``Content-Length``. It understands no
chunked bodies, redirects, proxies, TLS or compression - an answer it cannot read is an
error, never a guess.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from dataclasses import dataclass
from typing import Any

# What a response's head may be at most: larger is not an answer this client reads.
HEAD_LIMIT = 64 * 1024


class LeanHttpError(Exception):
    """The connection failed or the server's answer was not one this client reads; the
    connection is closed (a retry opens a new one)."""


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class LeanConnection:
    """One keep-alive connection, used by one caller at a time (requests in turn)."""

    def __init__(self, host: str, port: int, headers: dict[str, str] | None = None) -> None:
        self.host, self.port = host, port
        # Sent with every request: encoded once.
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post_json(
        self, path: str, body: Any, headers: dict[str, str] | None = None
    ) -> Answer:
        payload = json.dumps(body, separators=(",", ":")).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{self._fixed}{extra}"
            f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
        )
        return await self._exchange(head.encode("latin-1") + payload)

    async def _exchange(self, request: bytes) -> Answer:
        try:
            if self._writer is None:
                self._reader, self._writer = await asyncio.open_connection(
                    self.host, self.port, limit=HEAD_LIMIT
                )
            assert self._reader is not None
            self._writer.write(request)
            head = await self._reader.readuntil(b"\r\n\r\n")
            status, length, close = _parse_head(head)
            body = await self._reader.readexactly(length) if length else b""
        except (OSError, EOFError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            await self.close()
            raise LeanHttpError(f"{type(exc).__name__}: {exc}") from exc
        except LeanHttpError:
            await self.close()
            raise
        if close:
            await self.close()
        return Answer(status, body)

    async def close(self) -> None:
        writer, self._reader, self._writer = self._writer, None, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(OSError):  # the peer went first: closed all the same
                await writer.wait_closed()


def _parse_head(head: bytes) -> tuple[int, int, bool]:
    """Status, Content-Length and whether the server closes the connection."""
    lines = head.decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
        raise LeanHttpError(f"not an HTTP/1.x status line: {lines[0]!r}")
    length: int | None = None
    close = version == "HTTP/1.0"
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value.strip())
        elif name == "transfer-encoding":
            raise LeanHttpError(f"a {value.strip()} body: this client reads Content-Length only")
        elif name == "connection":
            close = value.strip().lower() == "close"
    if length is None:
        raise LeanHttpError("an answer without Content-Length")
    return int(rest[:3]), length, close
