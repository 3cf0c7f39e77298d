"""A real HTTP/1.1 server on loopback for client-side tests: it answers every request
with the request's head as its body, keeps the connection open unless told otherwise,
and can be asked for answers a lean client must refuse (a chunked body)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field


@dataclass
class EchoServer:
    port: int = 0
    connections: int = 0  # accepted so far
    heads: list[bytes] = field(default_factory=list)  # every request's head, in order

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.heads.append(head)
                length = 0
                for line in head.decode("latin-1").split("\r\n")[1:]:
                    name, _, value = line.partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                if length:
                    await reader.readexactly(length)
                writer.write(_answer(head))
                await writer.drain()
                if b"x-echo-close" in head.lower():
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def _answer(head: bytes) -> bytes:
    if b"x-echo-chunked" in head.lower():
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"
    extra = b"Connection: close\r\n" if b"x-echo-close" in head.lower() else b""
    status = b"202 Accepted" if head.startswith(b"POST") else b"200 OK"
    return (
        b"HTTP/1.1 "
        + status
        + b"\r\nContent-Type: text/plain\r\n"
        + extra
        + b"Content-Length: "
        + str(len(head)).encode()
        + b"\r\n\r\n"
        + head
    )


@asynccontextmanager
async def echo_server() -> AsyncIterator[EchoServer]:
    echo = EchoServer()
    server = await asyncio.start_server(echo._serve, "127.0.0.1", 0)
    echo.port = server.sockets[0].getsockname()[1]
    try:
        yield echo
    finally:
        server.close()
        await server.wait_closed()
