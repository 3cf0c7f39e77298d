"""A TCP proxy in front of a real server whose link can go silent.

``cut()`` makes the link behave like a pulled cable or a dead NAT entry: sockets stay
open, nothing is closed or refused, bytes simply stop arriving (they are held, as TCP
would keep retransmitting them). ``restore()`` lets them through again. Connections
opened while the link is cut hang until it is restored.
"""

from __future__ import annotations

import asyncio
import contextlib

from psycopg.conninfo import conninfo_to_dict, make_conninfo


class SilentLink:
    """Listens on loopback TCP; forwards to the server of ``url`` (TCP or Unix socket)."""

    def __init__(self, url: str) -> None:
        params = conninfo_to_dict(url)
        self._url = url
        host = str(params.get("host") or "localhost")
        port = int(params.get("port") or 5432)
        self._unix = f"{host}/.s.PGSQL.{port}" if host.startswith("/") else None
        self._target = (host, port)
        self._open = asyncio.Event()
        self._open.set()
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> SilentLink:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        return self

    @property
    def url(self) -> str:
        """The proxied server's connection string, through this link."""
        if self._server is None:
            raise RuntimeError("start the link first")
        port = self._server.sockets[0].getsockname()[1]
        return make_conninfo(self._url, host="127.0.0.1", port=str(port))

    @property
    def is_cut(self) -> bool:
        return not self._open.is_set()

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
        if self._unix is not None:
            up_reader, up_writer = await asyncio.open_unix_connection(self._unix)
        else:
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
