"""A loopback stand-in for the real OpenAI API, for the cassette recorder's tests (no network).

Its root is ``<url>`` = ``http://127.0.0.1:<port>/v1`` (what ``--openai-upstream`` takes). ``POST
/v1/chat/completions`` and ``POST /v1/responses`` answer as OpenAI does: with tools offered and no tool
result yet in the conversation, a call of the first tool with the arguments ``ARGUMENTS`` gives for its name
(``{}`` for another), id ``call_REAL<n>`` (Responses: item id ``fc_REAL<n>``); otherwise the text ``real
answer <n>``, n counting the requests. Usage is fixed (``USAGE``: 321 in, 12 out) so a test can tell a
recorded answer from the fake's own. A request without ``Authorization: Bearer`` is 401. Every request's
headers and body are kept in ``seen``.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from http.server import BaseHTTPRequestHandler
from typing import Any

from tests.fake_services.anthropic_upstream import AnthropicApi, send_json, serving

USAGE = {"input": 321, "output": 12}
ARGUMENTS = {"charge_card": {"order_id": "A-17", "amount_cents": 12500},
             "issue_refund": {"order_id": "A-17", "amount": 4200}}


class OpenAIApi(AnthropicApi):
    """The server; start it with :func:`openai_api`."""

    def __init__(self) -> None:
        super().__init__(OpenAIHandler)

    @property
    def url(self) -> str:
        """The API root, as the SDK's base URL."""
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


def openai_api() -> AbstractContextManager[OpenAIApi]:
    """A serving :class:`OpenAIApi`, shut down and closed after the block."""
    return serving(OpenAIApi())


def chat_reply(body: dict[str, Any], n: int) -> dict[str, Any]:
    answered = any(m.get("role") == "tool" for m in body["messages"])
    usage = {"prompt_tokens": USAGE["input"], "completion_tokens": USAGE["output"],
             "total_tokens": USAGE["input"] + USAGE["output"]}
    if body.get("tools") and not answered:
        name = body["tools"][0]["function"]["name"]
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_REAL{n:04d}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(ARGUMENTS.get(name, {}))}}]}
        finish = "tool_calls"
    else:
        message, finish = {"role": "assistant", "content": f"real answer {n}"}, "stop"
    return {"id": f"chatcmpl-REAL{n:04d}", "object": "chat.completion", "created": 1, "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": usage}


def responses_reply(body: dict[str, Any], n: int) -> dict[str, Any]:
    items = body["input"] if isinstance(body["input"], list) else []
    answered = any(i.get("type") == "function_call_output" for i in items)
    tools = [t for t in body.get("tools") or [] if t.get("type") == "function"]
    if tools and not answered:
        name = tools[0]["name"]
        output: list[dict[str, Any]] = [{"type": "function_call", "id": f"fc_REAL{n:04d}", "call_id": f"call_REAL{n:04d}",
                                         "name": name, "arguments": json.dumps(ARGUMENTS.get(name, {})),
                                         "status": "completed"}]
    else:
        output = [{"type": "message", "id": f"msg_REAL{n:04d}", "role": "assistant", "status": "completed",
                   "content": [{"type": "output_text", "text": f"real answer {n}", "annotations": []}]}]
    return {"id": f"resp_REAL{n:04d}", "object": "response", "created_at": 1, "model": body["model"],
            "status": "completed", "output": output,
            "usage": {"input_tokens": USAGE["input"], "output_tokens": USAGE["output"],
                      "total_tokens": USAGE["input"] + USAGE["output"]}}


REPLIES = {"/v1/chat/completions": chat_reply, "/v1/responses": responses_reply}


class OpenAIHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: OpenAIApi

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        with self.server.lock:
            self.server.seen.append(({k.lower(): v for k, v in self.headers.items()}, body))
            n = len(self.server.seen)
        reply = REPLIES.get(self.path)
        if reply is None:
            status, answer = 404, {"error": {"type": "invalid_request_error", "message": f"no route {self.path}"}}
        elif not self.headers.get("Authorization", "").startswith("Bearer "):
            status, answer = 401, {"error": {"type": "invalid_request_error", "message": "no API key"}}
        else:
            status, answer = 200, reply(body, n)
        send_json(self, status, answer)
