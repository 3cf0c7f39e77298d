"""An idempotency-keyed HTTP receiver on loopback, standing in for a remote system.

Handlers POST ``/deliver`` with an ``Idempotency-Key`` header (the job id). The sink
applies the first delivery of a key and acknowledges later ones without applying them
again, as a well-behaved remote API does; it counts both so the checker can tell
redeliveries (expected: execution is at-least-once) from duplicated effects (never).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink:
    """Counts deliveries per key; started on a free loopback port in a daemon thread."""

    def __init__(self) -> None:
        self.deliveries: Counter[str] = Counter()
        self.applied: Counter[str] = Counter()
        # (key, fence of the delivering attempt, wall-clock time): every delivery, in order
        self._log: list[tuple[str, int, float]] = []
        self._lock = threading.Lock()
        sink = self

        class _Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                key = self.headers.get("Idempotency-Key")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                if self.path != "/deliver" or not key:
                    self._answer(400, {"error": "POST /deliver with an Idempotency-Key header"})
                    return
                first = sink.deliver(key, _fence(body))
                self._answer(200 if first else 208, {"key": key, "applied": first})

            def _answer(self, status: int, body: dict[str, object]) -> None:
                data = json.dumps(body).encode()
                # The caller may be a worker killed mid-request: nobody left to answer.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                return  # one line per delivery would drown the run's output

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/deliver"

    def start(self) -> Sink:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()

    def deliver(self, key: str, fence: int = -1) -> bool:
        """Record one delivery; True when it is the first for ``key`` (and so applied)."""
        with self._lock:
            self._log.append((key, fence, time.time()))
            self.deliveries[key] += 1
            if self.applied[key]:
                return False
            self.applied[key] += 1
            return True

    def snapshot(self) -> tuple[dict[str, int], dict[str, int]]:
        with self._lock:
            return dict(self.deliveries), dict(self.applied)

    def log(self) -> list[tuple[str, int, float]]:
        with self._lock:
            return list(self._log)


def _fence(body: bytes) -> int:
    """The fence a delivery says it was made under (-1 when it does not say)."""
    try:
        return int(json.loads(body or b"{}").get("fence", -1))
    except (ValueError, TypeError, AttributeError):
        return -1
