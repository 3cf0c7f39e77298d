"""The sandbox platform server: one loopback HTTP server speaking all four platforms.

Place in the pipeline (auth check -> media -> publish, each step checkpointed): tests,
the demo and benchmarks point accounts' ``base_url`` at it, so every step runs over
real HTTP against the platforms' own status codes, error bodies and rate-limit headers.

Paths: Mastodon under ``/api/...`` and ``/oauth/revoke``, Bluesky under ``/xrpc/...``,
Graph under ``/v21.0/...`` (any ``vN.M``), webhooks at ``/webhooks/{id}``. Admin
endpoints under ``/_sandbox/``: ``GET counts`` (posts, distinct posts and duplicates
per account, peak requests per quota window), ``GET posts``, ``POST accounts``
(``{"platform", "name"}`` -> credentials), ``POST reset``, ``POST webhooks/{id}/gone``,
``GET health``; sample media to post at ``GET /_sandbox/media/{name}.png``
(:mod:`herald.social.sandbox.mediahost`).

:class:`Sandbox` runs it on a thread of its own (``port=0`` picks a free port), for use
from tests and benchmarks; ``python -m herald.social.sandbox`` runs it in the foreground.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from herald.social.adapters.base import Account
from herald.social.sandbox import bluesky, facebook, mastodon, mediahost, webhook
from herald.social.sandbox.common import guarded, json_object, reply
from herald.social.sandbox.state import SandboxAccount, SandboxConfig, SandboxState


def build_app(state: SandboxState, gone: set[str]) -> Starlette:
    async def health(request: Request) -> Response:
        return reply({"ok": True})

    async def counts(request: Request) -> Response:
        return reply(state.counts())

    async def posts(request: Request) -> Response:
        platform = request.query_params.get("platform")
        account = request.query_params.get("account")
        with state.lock:
            found = [
                p.summary()
                for p in state.posts
                if (platform is None or p.platform == platform)
                and (account is None or p.account_id == account)
            ]
        return reply(found)

    async def add_account(request: Request) -> Response:
        body = await json_object(request, "sandbox")
        try:
            account = state.add_account(str(body.get("platform")), body.get("name"))
        except ValueError as exc:
            return reply({"error": str(exc)}, 400)
        return reply(
            {
                "platform": account.platform,
                "id": account.id,
                "name": account.name,
                "credentials": account.credentials,
                "info": account.info,
            },
            201,
        )

    async def reset(request: Request) -> Response:
        state.reset()
        return reply({"ok": True})

    async def mark_gone(request: Request) -> Response:
        gone.add(request.path_params["id"])
        return reply({"ok": True})

    admin = [
        Route("/_sandbox/health", guarded(state, health, platform=False)),
        Route("/_sandbox/counts", guarded(state, counts, platform=False)),
        Route("/_sandbox/posts", guarded(state, posts, platform=False)),
        Route("/_sandbox/accounts", guarded(state, add_account, platform=False), methods=["POST"]),
        Route("/_sandbox/reset", guarded(state, reset, platform=False), methods=["POST"]),
        Route(
            "/_sandbox/webhooks/{id}/gone",
            guarded(state, mark_gone, platform=False),
            methods=["POST"],
        ),
    ]
    return Starlette(
        routes=[
            *admin,
            *mediahost.routes(state),
            *mastodon.routes(state),
            *bluesky.routes(state),
            *webhook.routes(state, gone),
            # Last: Graph's /{version}/{node}[/{edge}] would match the paths above.
            *facebook.routes(state),
        ]
    )


class Sandbox:
    """The sandbox server and its state; ``with Sandbox() as sandbox: ...`` in tests."""

    def __init__(
        self,
        config: SandboxConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not ipaddress.ip_address(host).is_loopback:
            raise ValueError(
                "the sandbox hands out credentials freely: it listens on loopback only"
            )
        self.state = SandboxState(config or SandboxConfig(), clock)
        self.gone: set[str] = set()
        self.app = build_app(self.state, self.gone)
        self._host = host
        self._port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._error: BaseException | None = None

    @property
    def config(self) -> SandboxConfig:
        return self.state.config

    @property
    def url(self) -> str:
        if self._socket is None:
            raise RuntimeError("the sandbox is not running")
        host, port = self._socket.getsockname()[:2]
        return f"http://{host}:{port}"

    def bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self._host else socket.AF_INET
        # IPPROTO_TCP named explicitly: asyncio sets TCP_NODELAY on accepted connections only
        # for sockets that say so, and without it every keep-alive answer waits ~40 ms
        # (Nagle's algorithm meeting the client's delayed ACK).
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self._host, self._port))
        sock.listen(1024)
        sock.setblocking(False)
        self._socket = sock
        return sock

    def server(self) -> uvicorn.Server:
        config = uvicorn.Config(
            self.app, lifespan="off", log_level="warning", access_log=False, loop="asyncio"
        )
        self._server = uvicorn.Server(config)
        return self._server

    async def serve(self) -> None:
        """Serve in the running event loop until cancelled (the command line's way)."""
        sock = self._socket or self.bind()
        await self.server().serve(sockets=[sock])

    def start(self, timeout: float = 10.0) -> Sandbox:
        """Serve on a thread of its own; returns once it accepts connections."""
        sock = self.bind()
        server = self.server()

        def run() -> None:
            try:
                asyncio.run(server.serve(sockets=[sock]))
            except BaseException as exc:  # reported by start()
                self._error = exc

        self._thread = threading.Thread(target=run, name="herald-sandbox", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if self._error is not None or not self._thread.is_alive():
                raise RuntimeError(f"the sandbox failed to start: {self._error!r}")
            if time.monotonic() > deadline:
                raise RuntimeError("the sandbox did not start in time")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
            self._thread = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    def __enter__(self) -> Sandbox:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- conveniences for tests, the demo and benchmarks -------------------------------

    def add_account(self, platform: str, name: str | None = None) -> SandboxAccount:
        return self.state.add_account(platform, name)

    def account(self, platform: str, name: str | None = None) -> Account:
        """A new sandbox account, as the :class:`Account` an adapter takes."""
        return self.add_account(platform, name).account(self.url)

    def counts(self) -> dict[str, Any]:
        return self.state.counts()

    def media_url(self, name: str = "sample.png", **params: object) -> str:
        """A URL of the sandbox's media host (see :mod:`herald.social.sandbox.mediahost`)."""
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"{self.url}/_sandbox/media/{name}" + (f"?{query}" if query else "")

    def posts(self, platform: str | None = None) -> list[dict[str, Any]]:
        with self.state.lock:
            return [p.summary() for p in self.state.posts if platform in (None, p.platform)]
