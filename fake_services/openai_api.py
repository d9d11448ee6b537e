"""The fake OpenAI: Chat Completions and Responses, as the ``openai`` SDK calls them.

Point the SDK at the run's base URL followed by ``/v1`` (the SDK's default base is
``https://api.openai.com/v1`` and it appends ``/chat/completions``; the fake also answers without ``/v1``)::

    client = openai.OpenAI(api_key="sk-x", base_url=svc.url("openai", run_id) + "/v1")
    # or set OPENAI_BASE_URL and OPENAI_API_KEY, which OpenAI() reads

``POST /v1/chat/completions``: ``model``, ``messages`` (a non-empty list) required; ``max_completion_tokens``
(or ``max_tokens``), ``n``, ``stream``, ``stream_options.include_usage`` honoured; other fields accepted.
The answer is the Anthropic fake's, a pure function of the request: the text ``answer <digest12>
verdict=approve|review`` where the digest is that of the canonical JSON of ``{model, system: null,
messages}``; ``usage.prompt_tokens`` = ceil(len(that JSON) / 4), ``completion_tokens`` = ceil(len(text) / 4);
cut at the token limit with ``finish_reason`` ``length`` (else ``stop``). ``stream: true`` is answered as the
``chat.completion.chunk`` server-sent events the SDK parses, ending ``data: [DONE]``.

``POST /v1/responses``: ``model``, ``input`` (a string, or a list of messages) required; ``instructions``
(recorded as the system), ``max_output_tokens`` honoured; not streamed (``stream: true`` -> 400). A string
input answers as the chat message ``[{"role": "user", "content": input}]`` would. ``response.output_text``
is the answer.

Tools and structured output (``openai_tools.py``): Chat Completions answers a tool call as
``message.tool_calls`` (ids ``call_…``, ``finish_reason`` ``tool_calls``, streamed as tool-call deltas);
Responses as ``function_call`` output items (``call_id`` ``call_…``, ``id`` ``fc_…``); structured output
(``response_format`` / ``text.format``) as JSON text satisfying the schema. Both follow the script or the
default policy, as the Anthropic fake does.

Auth: ``Authorization: Bearer <key>`` (401 ``invalid_api_key`` otherwise). Faults at ``model.request``
(hook or static, service ``openai``): overload -> 429 ``rate_limit_exceeded`` (``openai.RateLimitError``),
error -> 500 ``server_error`` (``openai.InternalServerError``), both with ``x-should-retry: true`` and
``retry-after-ms`` (default 10, so the SDK's retries are quick), drop -> connection reset
(``openai.APIConnectionError`` once the SDK's retries are spent), slow -> latency. Every answer carries
``x-request-id``. Requests are recorded in ``model_requests`` like the Anthropic fake's, with ``service``
``openai`` and ``api`` ``chat.completions`` or ``responses``; ``usage`` there is
``{"input_tokens", "output_tokens"}`` for every API.
"""

from __future__ import annotations

import json
from typing import Any

from . import openai_tools
from .model import Answer, Call, ModelApi, handle_model
from .wire import BadRequest, Reply, Request

SERVICE = "openai"
CREATED = 1735689600
FINGERPRINT = "fp_killpoint"
OPENAI_ERRORS = {
    "unauthenticated": (401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    "invalid": (400, "invalid_request_error", None, None),
    "overload": (429, "requests", "rate_limit_exceeded", "Rate limit reached (injected by the fake)."),
    "failed": (500, "server_error", None, "The server had an error while processing your request."),
}


def openai_error(kind: str, message: str, headers: dict[str, str]) -> Reply:
    status, error_type, code, fixed = OPENAI_ERRORS[kind]
    body = {"error": {"message": fixed or message, "type": error_type, "param": None, "code": code}}
    return Reply.json(status, body, headers)


def token_limit(body: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise BadRequest(f"{name}: a positive integer is required")
        return value
    return None


def require_model(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    if not isinstance(body.get("model"), str) or not body["model"]:
        raise BadRequest("you must provide a model parameter")
    return body


# chat completions -------------------------------------------------------------------------------


def parse_chat(raw: Any) -> Call:
    body = require_model(raw)
    if not isinstance(body.get("messages"), list) or not body["messages"]:
        raise BadRequest("messages: a non-empty list is required")
    n = body.get("n", 1)
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 128):
        raise BadRequest("n: an integer from 1 to 128 is required")
    limit = token_limit(body, "max_completion_tokens", "max_tokens")
    tools = openai_tools.tools_of(body, nested=True)
    return Call(body["model"], None, body["messages"], limit, bool(body.get("stream")), body, api="chat.completions",
                tools=tools, choice=openai_tools.choice_of(body, tools, nested=True),
                output=openai_tools.output_of(body.get("response_format"), "response_format"),
                dialogue=openai_tools.chat_dialogue(body["messages"]))


def usage(ans: Answer) -> dict[str, Any]:
    return {
        "prompt_tokens": ans.input_tokens, "completion_tokens": ans.output_tokens,
        "total_tokens": ans.input_tokens + ans.output_tokens,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0,
                                      "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
    }


def finish_reason(ans: Answer) -> str:
    return {"max_tokens": "length", "tool_use": "tool_calls"}.get(ans.stop_reason, "stop")


def arguments(ans: Answer, index: int) -> str:
    """A call's arguments as the JSON text the OpenAI APIs send."""
    return json.dumps(ans.calls[index].arguments, ensure_ascii=False)


def choices(call: Call) -> int:
    return call.body.get("n") or 1


def completion(call: Call, ans: Answer) -> dict[str, Any]:
    """The ``chat.completion`` object."""
    message: dict[str, Any] = {"role": "assistant", "content": ans.text if ans.text or not ans.calls else None,
                               "refusal": None, "annotations": []}
    if ans.calls:
        message["tool_calls"] = [{"id": c.id, "type": "function", "function": {"name": c.name,
                                                                           "arguments": arguments(ans, i)}}
                                 for i, c in enumerate(ans.calls)]
    return {
        "id": f"chatcmpl-{ans.digest[:24]}", "object": "chat.completion", "created": CREATED, "model": call.model,
        "choices": [{"index": i, "message": dict(message), "logprobs": None, "finish_reason": finish_reason(ans)}
                    for i in range(choices(call))],
        "usage": usage(ans), "system_fingerprint": FINGERPRINT, "service_tier": "default",
    }


def completion_stream(call: Call, ans: Answer) -> bytes:
    """The same answer as ``chat.completion.chunk`` server-sent events, then ``[DONE]``."""
    head = {"id": f"chatcmpl-{ans.digest[:24]}", "object": "chat.completion.chunk", "created": CREATED,
            "model": call.model, "system_fingerprint": FINGERPRINT, "service_tier": "default"}
    deltas: list[dict[str, Any]] = [{"role": "assistant", "content": "", "refusal": None}]
    if ans.text or not ans.calls:
        deltas.append({"content": ans.text})
    deltas += call_deltas(ans)
    chunks = []
    for i in range(choices(call)):
        for n, delta in enumerate([*deltas, {}]):
            reason = finish_reason(ans) if n == len(deltas) else None
            chunks.append({**head, "choices": [{"index": i, "delta": delta, "logprobs": None, "finish_reason": reason}]})
    options = call.body.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        chunks.append({**head, "choices": [], "usage": usage(ans)})
    lines = [f"data: {json.dumps(chunk, separators=(',', ':'))}\n\n" for chunk in chunks] + ["data: [DONE]\n\n"]
    return "".join(lines).encode("utf-8")


def call_deltas(ans: Answer) -> list[dict[str, Any]]:
    """The tool calls as stream deltas: per call, its id and name with empty arguments, then the arguments'
    JSON text in two pieces (a client joins them by ``index``)."""
    deltas: list[dict[str, Any]] = []
    for i, c in enumerate(ans.calls):
        whole = arguments(ans, i)
        deltas.append({"tool_calls": [{"index": i, "id": c.id, "type": "function",
                                       "function": {"name": c.name, "arguments": ""}}]})
        deltas += [{"tool_calls": [{"index": i, "function": {"arguments": part}}]}
                   for part in (whole[:len(whole) // 2], whole[len(whole) // 2:])]
    return deltas


def chat_answer(call: Call, ans: Answer, headers: dict[str, str]) -> Reply:
    if call.stream:
        return Reply(200, completion_stream(call, ans), "text/event-stream; charset=utf-8", headers)
    return Reply.json(200, completion(call, ans), headers)


CHAT = ModelApi(service=SERVICE, name="chat.completions", parse=parse_chat, error=openai_error,
                answer=chat_answer, request_id="x-request-id", call_prefix="call_")


# responses --------------------------------------------------------------------------------------


def parse_responses(raw: Any) -> Call:
    body = require_model(raw)
    given = body.get("input")
    if isinstance(given, str) and given:
        messages: list[Any] = [{"role": "user", "content": given}]
    elif isinstance(given, list) and given:
        messages = given
    else:
        raise BadRequest("input: a non-empty string or list is required")
    if body.get("stream"):
        raise BadRequest("stream: the fake answers the Responses API without streaming")
    instructions = body.get("instructions")
    if instructions is not None and not isinstance(instructions, str):
        raise BadRequest("instructions: a string is required")
    tools = openai_tools.tools_of(body, nested=False)
    text = body.get("text")
    return Call(body["model"], instructions, messages, token_limit(body, "max_output_tokens"), False, body,
                api="responses", tools=tools, choice=openai_tools.choice_of(body, tools, nested=False),
                output=openai_tools.output_of(text.get("format") if isinstance(text, dict) else None, "text.format"),
                dialogue=openai_tools.responses_dialogue(messages))


def response_object(call: Call, ans: Answer) -> dict[str, Any]:
    """The ``response`` object."""
    cut = ans.stop_reason == "max_tokens"
    return {
        "id": f"resp_{ans.digest[:24]}", "object": "response", "created_at": CREATED, "model": call.model,
        "status": "incomplete" if cut else "completed",
        "incomplete_details": {"reason": "max_output_tokens"} if cut else None, "error": None,
        "instructions": call.system, "max_output_tokens": call.max_tokens, "metadata": {},
        "output": output_items(ans, cut),
        "parallel_tool_calls": call.choice.parallel, "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None}, "service_tier": "default", "store": True, "temperature": 1.0,
        "text": call.body.get("text") or {"format": {"type": "text"}}, "tool_choice": call.body.get("tool_choice", "auto"),
        "tools": call.body.get("tools") or [], "top_p": 1.0, "truncation": "disabled", "user": None,
        "usage": {
            "input_tokens": ans.input_tokens, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": ans.output_tokens, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": ans.input_tokens + ans.output_tokens,
        },
    }


def output_items(ans: Answer, cut: bool) -> list[dict[str, Any]]:
    """The response's output: a message (left out when empty and the answer calls tools), then a
    ``function_call`` item per call (``id`` ``fc_…``, ``call_id`` ``call_…``, ``arguments`` JSON text)."""
    message = [{
        "type": "message", "id": f"msg_{ans.digest[:24]}", "status": "incomplete" if cut else "completed",
        "role": "assistant", "content": [{"type": "output_text", "text": ans.text, "annotations": [], "logprobs": []}],
    }] if ans.text or not ans.calls else []
    return message + [{"type": "function_call", "id": "fc_" + c.id.removeprefix("call_"), "call_id": c.id,
                       "name": c.name, "arguments": arguments(ans, i), "status": "completed"}
                      for i, c in enumerate(ans.calls)]


RESPONSES = ModelApi(service=SERVICE, name="responses", parse=parse_responses, error=openai_error,
                     answer=lambda call, ans, headers: Reply.json(200, response_object(call, ans), headers),
                     request_id="x-request-id", call_prefix="call_")


def chat_completions(request: Request) -> Reply:
    """``POST /v1/chat/completions``: see the module docstring."""
    return handle_model(CHAT, request)


def responses(request: Request) -> Reply:
    """``POST /v1/responses``: see the module docstring."""
    return handle_model(RESPONSES, request)


ROUTES = {
    "/v1/chat/completions": chat_completions, "/chat/completions": chat_completions,
    "/v1/responses": responses, "/responses": responses,
}
