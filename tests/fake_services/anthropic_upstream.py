"""A loopback stand-in for the real Anthropic API, for the cassette recorder's tests (no network).

``POST /v1/messages`` answers as Anthropic does: with tools offered and no tool result yet, a ``tool_use``
of the first tool (``issue_refund`` gets amount 4200 for order A-17), id ``toolu_01REAL…``; otherwise the
text ``real answer N`` (N counts the requests). Usage is fixed (``input_tokens`` 321, ``output_tokens``
12) so a test can tell a recorded answer from the fake's own. A request without ``x-api-key`` is 401.
Every request's headers and body are kept in ``seen``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

USAGE = {"input_tokens": 321, "output_tokens": 12}


class AnthropicApi(ThreadingHTTPServer):
    """The server; start it with :func:`anthropic_api`."""

    daemon_threads = True

    def __init__(self, handler: type[BaseHTTPRequestHandler] | None = None) -> None:
        self.seen: list[tuple[dict[str, str], dict[str, Any]]] = []
        self.lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), handler or AnthropicHandler)

    @property
    def url(self) -> str:
        """The API root, as the SDK's base URL."""
        return f"http://127.0.0.1:{self.server_address[1]}"


Server = TypeVar("Server", bound=ThreadingHTTPServer)


@contextmanager
def serving(server: Server) -> Iterator[Server]:
    """``server`` serving in a thread for the block, then shut down and closed."""
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def anthropic_api() -> AbstractContextManager[AnthropicApi]:
    """A serving :class:`AnthropicApi`, shut down and closed after the block."""
    return serving(AnthropicApi())


def send_json(handler: BaseHTTPRequestHandler, status: int, answer: dict[str, Any]) -> None:
    """Answer ``handler``'s request with ``answer`` as JSON."""
    data = json.dumps(answer).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def reply_to(body: dict[str, Any], count: int) -> dict[str, Any]:
    last = body["messages"][-1]["content"]
    answered = isinstance(last, list) and any(b.get("type") == "tool_result" for b in last)
    if body.get("tools") and not answered:
        tool = body["tools"][0]["name"]
        content = [{"type": "tool_use", "id": f"toolu_01REAL{count:04d}", "name": tool,
                    "input": {"order_id": "A-17", "amount": 4200}}]
        stop = "tool_use"
    else:
        content, stop = [{"type": "text", "text": f"real answer {count}"}], "end_turn"
    return {"id": f"msg_01REAL{count:04d}", "type": "message", "role": "assistant", "model": body["model"],
            "content": content, "stop_reason": stop, "stop_sequence": None, "usage": USAGE}


class AnthropicHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: AnthropicApi

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        with self.server.lock:
            self.server.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
            count = len(self.server.seen)
        if self.path != "/v1/messages":
            status, answer = 404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}}
        elif not self.headers.get("x-api-key"):
            status, answer = 401, {"type": "error", "error": {"type": "authentication_error", "message": "no key"}}
        else:
            status, answer = 200, reply_to(body, count)
        send_json(self, status, answer)
