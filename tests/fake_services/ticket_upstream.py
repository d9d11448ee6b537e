"""A small real upstream whose answers nest their id, for the recording proxy's tests: on 127.0.0.1,

- ``POST /api/v2/tickets`` ``{"ticket": {"subject", ...}}`` opens a ticket, answered 201
  ``{"ticket": {"id": N, "subject", "status"}}`` (Zendesk's shape: the id nested, and a number);
- ``POST /api/2010-04-01/Messages`` ``{"To", "Body"}`` sends a text, answered 201 ``{"sid": "SM...", ...}``
  (Twilio's shape: the id is ``sid``).

Both honour ``Idempotency-Key``: the same key gets the first answer again, but with no replay header, so
nothing but the id tells a replay from a new object. What the service did is in ``tickets`` and ``texts``
(a replay adds nothing): a test sees what the service saw, not what the proxy says it saw.
"""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fake_services.sms_upstream import LoopbackApi


class TicketApi(LoopbackApi):
    def __init__(self) -> None:
        self.tickets: list[dict[str, Any]] = []
        self.texts: list[dict[str, Any]] = []
        self.answers: dict[tuple[str, str], bytes] = {}
        super().__init__(TicketHandler)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        if path == "/api/v2/tickets":
            self.tickets.append(body.get("ticket") or {})
            return {"ticket": {"id": len(self.tickets), "subject": (body.get("ticket") or {}).get("subject"),
                               "status": "new"}}
        self.texts.append(body)
        return {"sid": f"SM{len(self.texts):032d}", "to": body.get("To"), "status": "queued"}


class TicketHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: TicketApi

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.rstrip("/")
        if path not in ("/api/v2/tickets", "/api/2010-04-01/Messages"):
            self._answer(404, b'{"error": "no such route"}')
            return
        key = self.headers.get("Idempotency-Key")
        with self.server.lock:
            if key is not None and (path, key) in self.server.answers:
                self._answer(201, self.server.answers[(path, key)])  # the first answer, no replay header
                return
            answer = json.dumps(self.server.create(path, json.loads(body or b"{}"))).encode()
            if key is not None:
                self.server.answers[(path, key)] = answer
        self._answer(201, answer)
