"""The fake model: the Anthropic Messages API as the anthropic Python SDK calls it.

``POST /v1/messages`` (under the per-run prefix, so ``base_url=http://HOST:PORT/runs/<run_id>`` works
with the SDK, which appends ``/v1/messages``):

- auth: ``Authorization: Bearer <key>`` (what the SDK sends) or ``x-api-key``; neither -> 401.
- body: ``model`` (str), ``max_tokens`` (int > 0), ``messages`` (non-empty list), optional ``system``,
  ``stream``; other fields are accepted and ignored. A bad body -> 400 ``invalid_request_error``.
- the answer is a pure function of the request: ``digest`` = sha256 of the canonical JSON of
  ``{model, system, messages}``; text ``answer <digest[:12]> verdict=<approve|review>`` (cut to
  ``max_tokens`` * 4 characters, with ``stop_reason`` ``max_tokens``); id ``msg_<digest[:24]>``;
  ``usage.input_tokens`` = ceil(len(canonical JSON) / 4), ``usage.output_tokens`` = ceil(len(text) / 4).
  The same messages always get the same answer, so a replayed step sees what the first run saw -- unless
  the harness made the run's model sample (``sampling.py``): then a repeated request is answered anew
  (``sampled``: how many answers it had before, in the record).
- ``stream: true`` is answered as server-sent events (message_start ... message_stop).
- tools (``tools``, ``tool_choice``; ``messages_tools.py``) and structured output (``output_config.format``):
  the answer is the turn the user's script (``script.py``), a recorded cassette (``cassette.py``) or the
  default policy (``policy.py``) gives:
  ``tool_use`` blocks (ids ``toolu_…``, ``stop_reason`` ``tool_use``, streamed as ``input_json_delta``) or
  text (JSON for structured output); the digest then also covers the tools, the choice and the schema.
- every reply carries a ``request-id`` header; the SDK's ``x-stainless-retry-count`` is recorded.
- faults (hook at ``model.request``, or static): ``overload`` -> 529 ``overloaded_error``, ``error`` ->
  500 ``api_error`` (both with ``x-should-retry: true`` and, unless set to 0, ``retry-after-ms``),
  ``drop`` -> connection reset, ``slow`` -> latency.

``POST /v1/messages/count_tokens`` answers ``{"input_tokens": N}`` (not recorded, no hook).

Every request is recorded in ``model_requests``: ``order``, ``run_id``, ``service`` (``model``), ``api``
(``messages``), ``model``, ``system``, ``messages``, ``max_tokens``, ``stream``, ``retry_count``,
``request_digest``, ``response_text``, ``usage``, ``stop_reason``, ``tools`` (the names offered),
``tool_calls`` (``[{"id", "name", "arguments"}]``), ``outcome``, ``status``, ``t`` -- and as
an attempt of service ``model``. The flow (:func:`handle_model`) is shared with the OpenAI fake
(``openai_api.py``), which records the same fields.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from . import messages_tools
from .canon import DIGEST_LENGTH, canonical_json, text_digest
from .cassette import Cassette, NotInCassette, UpstreamFailed
from .effects import info_for
from .policy import default_text
from .sampling import resampled
from .schema_values import NoValue
from .script import Script, ScriptError
from .turns import Call, ToolCall, Turn
from .wire import BadRequest, Reply, Request


@dataclass(frozen=True)
class Answer:
    """The deterministic answer to one request."""

    digest: str
    text: str
    input_tokens: int
    output_tokens: int
    stop_reason: str
    calls: tuple[ToolCall, ...] = ()

    @property
    def message_id(self) -> str:
        return f"msg_{self.digest[:24]}"

    @property
    def usage(self) -> dict[str, int]:
        return {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens}


def request_text(model: Any, system: Any, messages: Any) -> str:
    """The canonical JSON of what the answer depends on (its digest names the request)."""
    return canonical_json({"model": model, "system": system, "messages": messages})


def answer(model: str, system: Any, messages: list[Any], max_tokens: int | None) -> Answer:
    """The answer the fake gives to (model, system, messages, max_tokens); pure."""
    return answer_for(request_text(model, system, messages), max_tokens)


def answer_for(canonical: str, max_tokens: int | None) -> Answer:
    """The text answer to the request whose :func:`request_text` is ``canonical`` (``max_tokens`` None: no cut)."""
    hexdigest = text_digest(canonical)
    return answer_from(Turn(default_text(hexdigest)), hexdigest, canonical, max_tokens)


def call_text(call: Call) -> str:
    """The canonical JSON naming ``call``: :func:`request_text`, with the tools, tool choice and output
    schema when the request has any (a plain request's text, and so its digest, is unchanged)."""
    shape = call.shape()
    if not shape:
        return request_text(call.model, call.system, call.messages)
    return canonical_json({"model": call.model, "system": call.system, "messages": call.messages, **shape})


def respond(call: Call, canonical: str, script: Script, call_prefix: str, cassette: Cassette | None = None,
            headers: Mapping[str, str] | None = None) -> Answer:
    """The answer to ``call`` (whose :func:`call_text` is ``canonical``), from the first that gives one: the
    script's pinned turn, the cassette's recording (``cassette.py``, with its recorded usage), the default
    policy's turn (``policy.py``). ``ScriptError`` / ``NoValue`` when none can answer, ``cassette.NotAnswered``
    when the cassette must answer and cannot (a request missing from a strict cassette)."""
    hexdigest = text_digest(canonical)
    turn = script.pinned(call, hexdigest, call_prefix)
    if turn is None and cassette is not None:
        recorded = cassette.answer(call, hexdigest, headers or {})
        if recorded is not None:
            return Answer(hexdigest, recorded.turn.text, recorded.input_tokens, recorded.output_tokens,
                          recorded.stop_reason, recorded.turn.calls)
    if turn is None:
        turn = script.default(call, hexdigest, call_prefix)
    return answer_from(turn, hexdigest, canonical, call.max_tokens)


def answer_from(turn: Turn, hexdigest: str, canonical: str, max_tokens: int | None) -> Answer:
    """The turn as an answer with its usage: input tokens ceil(len(canonical) / 4), output tokens ceil(len(text
    and calls) / 4); a text-only turn longer than ``max_tokens`` is cut, with stop reason ``max_tokens``."""
    text, stop_reason = turn.text, turn.stop_reason
    said = text + (canonical_json([[c.name, c.arguments] for c in turn.calls]) if turn.calls else "")
    if not turn.calls and max_tokens is not None and math.ceil(len(text) / 4) > max_tokens:
        text, stop_reason = text[: max_tokens * 4], "max_tokens"
        said = text
    return Answer(hexdigest, text, math.ceil(len(canonical) / 4), math.ceil(len(said) / 4), stop_reason, turn.calls)


def content_blocks(ans: Answer) -> list[dict[str, Any]]:
    """The answer's content: its text block (left out when empty and the answer calls tools), then a
    ``tool_use`` block per call."""
    text = [{"type": "text", "text": ans.text}] if ans.text or not ans.calls else []
    return text + [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in ans.calls]


def message_body(model: str, ans: Answer) -> dict[str, Any]:
    """The Messages API response object."""
    return {
        "id": ans.message_id, "type": "message", "role": "assistant", "model": model,
        "content": content_blocks(ans), "stop_reason": ans.stop_reason,
        "stop_sequence": None, "usage": ans.usage,
    }


def block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """One content block as stream events: start (empty), deltas, stop. A tool call's input comes as
    ``input_json_delta`` pieces (two, cut mid-JSON, so a client must join them before parsing)."""
    if block["type"] == "text":
        empty: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": block["text"]}]
    else:
        empty = {**block, "input": {}}
        whole = json.dumps(block["input"], separators=(",", ":"))
        half = len(whole) // 2
        deltas = [{"type": "input_json_delta", "partial_json": part} for part in (whole[:half], whole[half:])]
    return [("content_block_start", {"type": "content_block_start", "index": index, "content_block": empty}),
            *(("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas),
            ("content_block_stop", {"type": "content_block_stop", "index": index})]


def stream_body(model: str, ans: Answer) -> bytes:
    """The same answer as the server-sent events the SDK's streaming parser expects."""
    start = {**message_body(model, ans), "content": [], "stop_reason": None,
             "usage": {"input_tokens": ans.input_tokens, "output_tokens": 1}}
    blocks = [event for i, block in enumerate(content_blocks(ans)) for event in block_events(i, block)]
    events = [
        ("message_start", {"type": "message_start", "message": start}),
        *blocks[:1], ("ping", {"type": "ping"}), *blocks[1:],
        ("message_delta", {"type": "message_delta",
                           "delta": {"stop_reason": ans.stop_reason, "stop_sequence": None},
                           "usage": {"output_tokens": ans.output_tokens}}),
        ("message_stop", {"type": "message_stop"}),
    ]
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode("utf-8")


def api_error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> Reply:
    return Reply.json(status, {"type": "error", "error": {"type": kind, "message": message}}, headers)


@dataclass(frozen=True)
class ModelApi:
    """One model API served by :func:`handle_model`.

    ``service``: the attempt's service (``model`` for Anthropic, ``openai``); ``name``: recorded as
    ``api``; ``parse``: the :class:`Call` from a JSON body (``BadRequest`` otherwise); ``error(kind,
    message, headers)`` for kinds ``unauthenticated``, ``invalid``, ``overload``, ``failed``; ``answer(call,
    ans, headers)``: the 200 reply; ``request_id``: the header naming the request.
    """

    service: str
    name: str
    parse: Callable[[Any], Call]
    error: Callable[[str, str, dict[str, str]], Reply]
    answer: Callable[[Call, Answer, dict[str, str]], Reply]
    request_id: str = "request-id"
    call_prefix: str = "toolu_"
    """How the API's tool call ids begin."""


def handle_model(api: ModelApi, request: Request) -> Reply:
    """The flow every model endpoint shares:

    1. parse the body and record the attempt (``pending``) and the model request;
    2. no credentials -> 401, a bad body -> 400 (``rejected``);
    3. hook and static faults at ``model.request``: drop -> reset, overload / error -> the API's overload /
       server error, with ``x-should-retry: true`` and (unless set to 0) ``retry-after-ms``
       (``injected-error``);
    4. otherwise the deterministic answer (``applied``): the script's, the cassette's or the default
       policy's (:func:`respond`); a script that fails, or a tool schema no value satisfies, is a 400
       (``rejected``); a request a strict cassette has no recording of is a 400 naming its digest, and an
       upstream that fails while recording a 500, both ``rejected`` and journaled with ``cassette``
       (``missing`` / ``upstream-failed``) and ``error`` (the message).
    """
    state = request.state
    call: Call | None = None
    problem = None
    try:
        call = api.parse(request.json())
    except BadRequest as exc:
        problem = exc.message
    key = request.headers.get("idempotency-key")
    canonical = call_text(call) if call else canonical_json(None)
    request_digest = text_digest(canonical)[:DIGEST_LENGTH]
    attempt = state.journal.begin(api.service, request.run_id, key, request_digest, request.route)
    request.attempt = attempt
    headers = {api.request_id: f"req_{attempt['order']:012d}"}
    retry_count = request.headers.get("x-stainless-retry-count", "0")
    record: dict[str, Any] = {
        "order": attempt["order"], "run_id": request.run_id, "service": api.service, "api": api.name,
        "model": None, "system": None, "messages": None, "max_tokens": None, "stream": False,
        "retry_count": int(retry_count) if retry_count.isdigit() else 0,
        "request_digest": request_digest, "response_text": None, "usage": None, "stop_reason": None,
        "tools": [], "tool_calls": [], "t": attempt["t"],
    }
    if call is not None:
        record.update(model=call.model, system=call.system, messages=call.messages,
                      max_tokens=call.max_tokens, stream=call.stream, tools=list(call.tool_names))

    def finish(outcome: str, reply: Reply) -> Reply:
        status = None if reply.drop else reply.status
        state.journal.finish(attempt, outcome, status)
        state.journal.add_model_request({**record, "outcome": outcome, "status": status})
        reply.attempt = attempt
        return reply

    if not has_credentials(request.headers):
        return finish("rejected", api.error("unauthenticated", "invalid x-api-key", headers))
    if call is None:
        return finish("rejected", api.error("invalid", str(problem), headers))
    info = {**info_for(request, attempt), "model": call.model, "retry_count": record["retry_count"]}
    decision = state.decide("model.request", info)
    if decision.action == "drop":
        return finish("dropped", Reply.dropped())
    if decision.action in ("overload", "error"):
        headers["x-should-retry"] = "true"
        retry_after = state.faults.retry_after_ms(api.service)
        if retry_after:
            headers["retry-after-ms"] = str(retry_after)
        kind = "overload" if decision.action == "overload" else "failed"
        return finish("injected-error", api.error(kind, "Overloaded" if kind == "overload" else "Internal server error",
                                                  headers))
    try:
        ans = respond(call, canonical, state.script, api.call_prefix, state.cassette, request.headers)
    except (ScriptError, NoValue) as exc:
        return finish("rejected", api.error("invalid", f"the fake model cannot answer: {exc}", headers))
    except NotInCassette as exc:
        record.update(cassette="missing", error=str(exc))
        return finish("rejected", api.error("invalid", str(exc), headers))
    except UpstreamFailed as exc:
        record.update(cassette="upstream-failed", error=str(exc))
        return finish("rejected", api.error("failed", str(exc), headers))
    if not ans.calls:  # a sampling model re-draws a repeated request's answer; a pinned one is as pinned
        earlier = [r["response_text"] for r in state.journal.model_requests(request.run_id)
                   if r["request_digest"] == request_digest and r["outcome"] == "applied"]
        text = state.sampling.text(request.run_id, request_digest, ans.text, earlier)
        if text != ans.text:
            record["sampled"] = len(earlier)
            ans = resampled(ans, text)
    record.update(response_text=ans.text, usage=ans.usage, stop_reason=ans.stop_reason,
                  tool_calls=[c.as_json() for c in ans.calls])
    return finish("applied", api.answer(call, ans, headers))


def parse(body: Any) -> Call:
    """The validated Messages API request; ``BadRequest`` (400 invalid_request_error) otherwise."""
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequest("model: field required")
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens <= 0:
        raise BadRequest("max_tokens: a positive integer is required")
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise BadRequest("messages: a non-empty list is required")
    tools = messages_tools.tools_of(body)
    return Call(body["model"], body.get("system"), body["messages"], max_tokens, bool(body.get("stream")), body,
                api="messages", tools=tools, choice=messages_tools.choice_of(body, tools),
                output=messages_tools.output_of(body), dialogue=messages_tools.dialogue_of(body["messages"]))


def has_credentials(headers: dict[str, str]) -> bool:
    bearer = headers.get("authorization", "")
    return bool(headers.get("x-api-key")) or (bearer.startswith("Bearer ") and len(bearer) > len("Bearer "))


ANTHROPIC_ERRORS = {
    "unauthenticated": (401, "authentication_error"), "invalid": (400, "invalid_request_error"),
    "overload": (529, "overloaded_error"), "failed": (500, "api_error"),
}


def anthropic_error(kind: str, message: str, headers: dict[str, str]) -> Reply:
    status, name = ANTHROPIC_ERRORS[kind]
    return api_error(status, name, message, headers)


def anthropic_answer(call: Call, ans: Answer, headers: dict[str, str]) -> Reply:
    if call.stream:
        return Reply(200, stream_body(call.model, ans), "text/event-stream; charset=utf-8", headers)
    return Reply.json(200, message_body(call.model, ans), headers)


MESSAGES = ModelApi(service="model", name="messages", parse=parse, error=anthropic_error, answer=anthropic_answer)


def messages(request: Request) -> Reply:
    """``POST /v1/messages``: see the module docstring."""
    return handle_model(MESSAGES, request)


def count_tokens(request: Request) -> Reply:
    """``POST /v1/messages/count_tokens``: the input token count the fake would charge."""
    if not has_credentials(request.headers):
        return api_error(401, "authentication_error", "invalid x-api-key")
    try:
        body = request.json()
    except BadRequest as exc:
        return api_error(400, "invalid_request_error", exc.message)
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        return api_error(400, "invalid_request_error", "messages: a list is required")
    canonical = request_text(body.get("model"), body.get("system"), body["messages"])
    return Reply.json(200, {"input_tokens": math.ceil(len(canonical) / 4)})


ROUTES = {"/v1/messages": messages, "/v1/messages/count_tokens": count_tokens}
