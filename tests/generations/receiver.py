"""A real HTTP webhook receiver for tests: verifies signatures, deduplicates on the
message id, and can be told to fail the first N requests (to exercise retries)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from herald.ops import signing


@dataclass
class Received:
    secret: str = ""
    fail_first: int = 0
    requests: list[dict[str, Any]] = field(default_factory=list)
    processed: dict[str, dict[str, Any]] = field(default_factory=dict)  # by webhook-id
    lock: threading.Lock = field(default_factory=threading.Lock)


@contextmanager
def receiver(state: Received) -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            headers = {k.lower(): v for k, v in self.headers.items()}
            with state.lock:
                state.requests.append({"headers": headers, "body": body})
                failing = len(state.requests) <= state.fail_first
            if failing:
                self.send_response(503)
                self.end_headers()
                return
            try:
                msg_id = signing.verify(state.secret, headers, body)
            except signing.SignatureError:
                self.send_response(401)
                self.end_headers()
                return
            with state.lock:  # idempotent consumer: a redelivery changes nothing
                state.processed.setdefault(msg_id, json.loads(body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook"
    finally:
        server.shutdown()
        server.server_close()
