"""A small real upstream for the recording proxy's tests: a "sandbox SMS API" on 127.0.0.1.

``POST /api/v1/messages`` ``{"to", "text"}`` sends a message (answer 201 ``{"id": "sms_N", "to", "status"}``),
honouring ``Idempotency-Key`` when one is sent (the same key gets the first answer again, with
``Idempotent-Replayed: true``); a body without ``to`` is 400. ``GET /api/v1/messages`` lists what was sent. ``POST /api/v1/pings`` ignores keys: every ping counts
(``pings``) and is answered ``{"ok": true}``.
Every message the API accepted is in ``sent`` (a replay adds nothing), so a test sees what the service
saw, not what the proxy says it saw.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self


class LoopbackApi(ThreadingHTTPServer):
    """A sandbox API on a free port of 127.0.0.1, served from a thread inside a ``with`` block; its base URL
    is ``url`` (``.../api``)."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), handler)
        self.thread = threading.Thread(target=self.serve_forever, args=(0.02,), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/api"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
        self.server_close()
        self.thread.join(5)


class SmsApi(LoopbackApi):
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []
        self.pings = 0
        self.answers: dict[str, tuple[int, bytes]] = {}
        super().__init__(SmsHandler)


class SmsHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: SmsApi

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _answer(self, status: int, body: bytes, replayed: bool = False) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        if replayed:
            self.send_header("Idempotent-Replayed", "true")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path.rstrip("/") != "/api/v1/messages":
            self._answer(404, b'{"error": "no such route"}')
            return
        with self.server.lock:
            self._answer(200, json.dumps({"data": self.server.sent}).encode())

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.rstrip("/") == "/api/v1/pings":
            with self.server.lock:
                self.server.pings += 1
            self._answer(200, b'{"ok": true}')
            return
        if self.path.rstrip("/") != "/api/v1/messages":
            self._answer(404, b'{"error": "no such route"}')
            return
        message = json.loads(body or b"{}")
        if not message.get("to"):
            self._answer(400, b'{"error": "to is required"}')
            return
        key = self.headers.get("Idempotency-Key")
        with self.server.lock:
            if key is not None and key in self.server.answers:
                status, answer = self.server.answers[key]
                self._answer(status, answer, replayed=True)
                return
            self.server.sent.append(message)
            answer = json.dumps({"id": f"sms_{len(self.server.sent):06d}", "to": message["to"],
                                 "status": "queued"}).encode()
            if key is not None:
                self.server.answers[key] = (201, answer)
        self._answer(201, answer)
