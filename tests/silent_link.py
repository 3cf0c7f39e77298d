"""A TCP proxy in front of a real server whose link can go silent.

``cut()`` makes the link behave like a pulled cable or a dead NAT entry: sockets stay
open, nothing is closed or refused, bytes simply stop arriving (they are held, as TCP
would keep retransmitting them). ``restore()`` lets them through again. Connections
opened while the link is cut hang until it is restored.
"""

from __future__ import annotations

import asyncio
import contextlib
from urllib.parse import urlsplit, urlunsplit


class SilentLink:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        if parts.hostname is None or parts.port is None:
            raise ValueError("the proxied URL needs a TCP host and port")
        self._url = parts
        self._target = (parts.hostname, parts.port)
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> SilentLink:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    @property
    def url(self) -> str:
        """The proxied server's URL, through this link."""
        if self._server is None:
            raise RuntimeError("start the link first")
        port = self._server.sockets[0].getsockname()[1]
        netloc = self._url.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{port}"
        return urlunsplit(
            self._url._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) > 1 else host)
        )

    def cut(self) -> None:
        self._open.clear()

    def restore(self) -> None:
        self._open.set()

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await self._open.wait()
        up_reader, up_writer = await asyncio.open_connection(*self._target)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pipe(source, sink))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _pipe(self, source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        try:
            while data := await source.read(65536):
                await self._open.wait()  # silent: hold the bytes, close nothing
                sink.write(data)
                await sink.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            with contextlib.suppress(Exception):
                sink.close()
