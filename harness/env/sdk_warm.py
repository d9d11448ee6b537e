"""The first calls of the SDKs of the services killpoint fakes, made once in a process that forks workers.

An SDK does much of a call's work on the first call in each process, not at import: openai imports a
resource's module the first time a client touches it (`client.chat`, `client.responses`: ~0.1 CPU-s), and
both model SDKs build the pydantic schemas of their response types on the first answer they parse (~0.1-0.2
CPU-s for a Responses API answer, a streamed Messages answer); Stripe's client imports its module, its default
HTTP client and each kind of object's class on first use (~10 ms); the first client of an HTTP library
(httpx, httpx2) imports its transport stack (~15 ms). A worker forked from a server that imported an SDK but
never called it pays for all that in every incarnation: a third of a forked OpenAI Agents SDK, LangGraph
ReAct or Pydantic AI incarnation's CPU.

`warm()` does it once, for each of `SDKS` that the workers' code imported (already in `sys.modules`; none is
imported here) and that this process has not tried yet: one plain and one async client of each HTTP library
(no connection); for each SDK, the calls its fake answers (fake_services), each with a text and a tool call
(or every kind of Stripe object) in the fake's own shapes, streamed and not, through an in-memory transport
(the HTTP library's, or the SDK's own HTTP-client interface). The requests are shaped as a framework's are
(a tool loop's second turn: the model's tool call and its result; the instructions; every field the fake
echoes), since an SDK works out what it needs per shape it meets (openai: the type hints of each parameter
TypedDict; a response field's union type); an async request's first event makes anyio import its back end,
and a Stripe client its module per collection (`STRIPE_SERVICES`) and, on `requests`, that library's per-request
modules (netrc), all made here too. No socket, no thread, no file is left; nothing
is kept but what the SDK caches per process (its loaded modules, its schemas, its type adapters), which every
fork then shares. The clients are given their key and base URL, so none of the run's variables is read. A
call that fails is passed over: warming only saves time.
"""

from __future__ import annotations

import asyncio
import functools
import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

SERVICE_SDKS = ("anthropic", "openai", "stripe")
"""The SDKs of the services killpoint fakes: the model APIs and Stripe."""
SDKS = ("httpx", "httpx2", "requests", *SERVICE_SDKS)
"""What is warmed, by the module a worker's code imports: the HTTP client libraries the SDKs are built on (a
first client imports its transport stack, ~15 ms; `requests`' first request imports `netrc`), the model SDKs,
and Stripe's (its client's module and the module of each kind of object the fake answers with, each imported
on its first use: ~10 ms a process)."""
STRIPE_OBJECTS = ("card", "charge", "customer", "event", "list", "payment_intent", "refund", "search_result")
"""The kinds of object the fake Stripe answers with (fake_services/stripe_*.py; tests/env/test_sdk_warm.py
holds the two lists together)."""
STRIPE_SERVICES = ("charges", "customers", "events", "payment_intents", "refunds")
"""The endpoints' collections the fake Stripe serves (`/v1/<name>`; fake_services/stripe_api.py): each a module
of the SDK's imported on a client's first use of it."""

MODEL = "warm"
TOOLS_ANTHROPIC = [{"name": "warm", "description": "warm", "input_schema": {"type": "object", "properties": {}}}]
TOOLS_CHAT = [{"type": "function", "function": {"name": "warm", "parameters": {"type": "object", "properties": {}}}}]
TOOLS_RESPONSES = [{"type": "function", "name": "warm", "parameters": {"type": "object", "properties": {}}}]
MESSAGES = [{"role": "user", "content": "warm"}]
# A tool loop's second request, in each API's shapes: the user's message, the model's tool call, its result.
# The SDKs turn a request's parameters into JSON by their TypedDicts' type hints, worked out on first use
# of each TypedDict (openai's `_transform`); a request of the shapes a framework sends uses them all.
LOOP_CHAT = [{"role": "system", "content": "warm"}, *MESSAGES,
             {"role": "assistant", "content": None, "tool_calls": [
                 {"id": "call_warm", "type": "function", "function": {"name": "warm", "arguments": "{}"}}]},
             {"role": "tool", "tool_call_id": "call_warm", "content": "warm"}]
LOOP_RESPONSES = [*MESSAGES, {"type": "function_call", "call_id": "call_warm", "name": "warm", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": "call_warm", "output": "warm"}]
LOOP_ANTHROPIC = [*MESSAGES,
                  {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_warm", "name": "warm", "input": {}}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_warm", "content": "warm"}]}]
ECHOED = {"instructions": "warm", "max_output_tokens": 16}
"""Request fields the fake's Responses answer echoes (`openai_api.response_object`): each set, or the SDK would
meet its field's type first in an incarnation whose agent sets it (the Agents SDK's `instructions`, a union of
every input item: ~0.1 CPU-s of schema per incarnation)."""


ERROR_HEADER = "x-killpoint-warm-error"
"""A warm-up request with this header gets the fake's error answer of that kind (`model.ANTHROPIC_ERRORS`)."""

_tried: dict[str, bool] = {}
"""What this process tried to warm (or the process it was forked from: a zygote warms what it preloads), and
whether every call went through."""


def warm(names: Iterable[str] = SDKS) -> list[str]:
    """Warm each of `names` (of `SDKS`) that is imported and not tried yet in this process; `warmed()`."""
    for name in names:
        if name in WARMERS and name in sys.modules and name not in _tried:
            _tried[name] = False
            _tried[name] = _calls(WARMERS[name])
    return warmed()


def warmed() -> list[str]:
    """What this process holds warm: each of `SDKS` whose calls all went through here or in its parent."""
    return [name for name in SDKS if _tried.get(name)]


def _calls(warmer: Callable[[Any], list[Callable[[], Any]]]) -> bool:
    import httpx2  # noqa: PLC0415 - both SDKs are built on it

    ok = True
    with httpx2.Client(transport=httpx2.MockTransport(_answer)) as http:
        try:
            calls = warmer(http)
        except Exception:  # noqa: BLE001 - an SDK of another version: the workers warm themselves
            return False
        for call in calls:
            try:
                call()
            except Exception:  # noqa: BLE001 - see the module docstring
                ok = False
    return ok


@functools.cache  # both model SDKs' warm-ups ask for it
def _executor() -> None:
    """An async client's first request asks for the platform in a thread (`asyncio.to_thread`): the module
    of asyncio's default executor, imported here; no thread is started. Its transport's first request makes
    an `anyio` event, for which anyio imports its asyncio back end (~10 ms): one made here in an event loop."""
    import concurrent.futures.thread  # noqa: F401, PLC0415

    async def event() -> None:
        try:
            import anyio  # noqa: PLC0415 - httpx's and httpcore's, imported with them
        except ImportError:
            return
        anyio.Event()

    asyncio.run(event())


def _complete(answer: Any) -> None:
    """Build the validator of the class of every pydantic object in `answer` (the SDK parsed it without
    validating: `construct`). A framework that validates the answer's objects with their own classes (the
    Agents SDK makes its `ResponseFunctionToolCall`s and `ResponseOutputMessage`s anew) would otherwise build
    each class's deferred schema in every incarnation."""
    import pydantic  # noqa: PLC0415 - the SDKs' own

    pending, seen = [answer], set()
    while pending:
        obj = pending.pop()
        if isinstance(obj, (list, tuple)):
            pending.extend(obj)
        elif isinstance(obj, pydantic.BaseModel) and id(obj) not in seen:
            seen.add(id(obj))
            if not type(obj).__pydantic_complete__:
                type(obj).model_rebuild(force=True)
            pending.extend(obj.__dict__.values())


def _anthropic(http: Any) -> list[Callable[[], Any]]:
    import anthropic  # noqa: PLC0415 - imported already (see `warm`)

    client = anthropic.Anthropic(base_url="http://warm.invalid", api_key="warm", http_client=http, max_retries=0)
    ask = {"model": MODEL, "max_tokens": 16, "system": "warm", "messages": LOOP_ANTHROPIC, "tools": TOOLS_ANTHROPIC}

    def streamed() -> None:  # the SDK's stream helpers accumulate the events into a message: beta's too
        with client.messages.stream(**ask) as stream:
            stream.get_final_message()
        with client.beta.messages.stream(**ask) as stream:
            stream.get_final_message()

    async def async_client() -> None:  # its default HTTP client: the async transport stack imported
        await anthropic.AsyncAnthropic(base_url="http://warm.invalid", api_key="warm").close()

    def overloaded() -> None:  # the first error it raises builds its error types' schemas (~30 ms)
        try:
            client.messages.create(**ask, extra_headers={ERROR_HEADER: "overload"})
        except anthropic.APIStatusError:
            return
        raise AssertionError("the overload answer was not raised")

    return [lambda: _complete(client.messages.create(**ask)), lambda: list(client.messages.create(**ask, stream=True)),
            streamed, lambda: client.beta.messages.create(**ask),
            lambda: list(client.beta.messages.create(**ask, stream=True)), lambda: asyncio.run(async_client()),
            _executor, overloaded]


def _openai(http: Any) -> list[Callable[[], Any]]:
    import openai  # noqa: PLC0415 - imported already (see `warm`)

    client = openai.OpenAI(base_url="http://warm.invalid/v1", api_key="warm", http_client=http, max_retries=0)
    chat = {"model": MODEL, "messages": LOOP_CHAT, "tools": TOOLS_CHAT}

    async def async_client() -> None:  # its default HTTP client: the async transport stack imported
        await openai.AsyncOpenAI(base_url="http://warm.invalid/v1", api_key="warm").close()

    return [_executor, lambda: asyncio.run(async_client()), lambda: _complete(client.chat.completions.create(**chat)),
            lambda: list(client.chat.completions.create(**chat, stream=True)),
            lambda: client.chat.completions.with_raw_response.create(**chat).parse(),
            lambda: _complete(client.responses.create(model=MODEL, input=LOOP_RESPONSES, tools=TOOLS_RESPONSES,
                                                      **ECHOED))]


def _stripe(_http: Any) -> list[Callable[[], Any]]:
    import stripe  # noqa: PLC0415 - imported already (see `warm`)

    listing = {"object": "list", "url": "/v1/customers", "has_more": False,
               "data": [{"object": kind, "id": f"{kind}_warm"} for kind in STRIPE_OBJECTS]}
    intent = {"object": "payment_intent", "id": "pi_warm", "status": "succeeded"}

    def answer(method: str) -> str:
        return json.dumps(intent if method.lower() == "post" else listing)

    class Canned(stripe.HTTPClient):  # the SDK's own interface for an HTTP client of the user's choice
        name = "warm"

        def request(self, method: str, url: str, headers: Any, post_data: Any = None) -> tuple[str, int, dict]:
            return answer(method), 200, {}

        def close(self) -> None:
            pass

    where = {"api": "http://warm.invalid"}
    client = stripe.StripeClient("sk_test_warm", http_client=Canned(), max_network_retries=0, base_addresses=where)
    charge = {"params": {"amount": 1, "currency": "usd"}, "options": {"idempotency_key": "warm"}}
    calls = [lambda: client.v1.payment_intents.create(**charge),
             *(lambda name=name: getattr(client.v1, name).list() for name in STRIPE_SERVICES),
             # the SDK's default HTTP client (its transport stack imported; no connection made)
             lambda: stripe.StripeClient("sk_test_warm", max_network_retries=0)]
    if "requests" in sys.modules:  # the default client is then `requests`'s: a request through its session
        session = _requests_session(answer)
        calls.append(lambda: stripe.StripeClient(
            "sk_test_warm", http_client=stripe.RequestsClient(session=session), max_network_retries=0,
            base_addresses=where).v1.payment_intents.create(**charge))
    return calls


def _requests_session(answer: Callable[[str], str]) -> Any:
    """A `requests` session whose every request is answered in memory with `answer(method)` (JSON)."""
    import requests  # noqa: PLC0415 - imported already (see `_stripe`)

    class Canned(requests.adapters.BaseAdapter):
        def send(self, request: Any, **_kwargs: Any) -> Any:
            response = requests.Response()
            response.status_code, response.url, response.request = 200, request.url, request
            response._content = answer(request.method or "GET").encode()  # noqa: SLF001 - requests' own field
            response.headers["Content-Type"] = "application/json"
            return response

        def close(self) -> None:
            pass

    session = requests.Session()
    session.mount("http://", Canned())
    return session


def _clients(library: str) -> Callable[[Any], list[Callable[[], Any]]]:
    """A plain client and an async one of `library` built and closed: their transports' modules imported."""

    def calls(_http: Any) -> list[Callable[[], Any]]:
        lib = sys.modules[library]

        async def async_client() -> None:
            await lib.AsyncClient().aclose()

        return [lambda: lib.Client().close(), lambda: asyncio.run(async_client())]

    return calls


def _requests(_http: Any) -> list[Callable[[], Any]]:
    """A request through a `requests` session answered in memory (what its first request imports)."""
    session = _requests_session(lambda _method: "{}")
    return [lambda: session.get("http://warm.invalid/", timeout=1).json(), session.close]


WARMERS: dict[str, Callable[[Any], list[Callable[[], Any]]]] = {
    "httpx": _clients("httpx"), "httpx2": _clients("httpx2"), "requests": _requests, "anthropic": _anthropic,
    "openai": _openai, "stripe": _stripe}


def _answer(request: Any) -> Any:
    """The fakes' answer to `request` (a text and a tool call), as the SDK would get it from them."""
    import httpx2  # noqa: PLC0415

    from killpoint.fake_services import model, openai_api  # noqa: PLC0415 - the fakes' own shapes
    from killpoint.fake_services.turns import ToolCall  # noqa: PLC0415

    body = json.loads(request.content or b"{}")
    path = request.url.path
    sse = {"content-type": "text/event-stream"}
    if path.endswith("/messages") and ERROR_HEADER in request.headers:
        reply = model.anthropic_error(request.headers[ERROR_HEADER], "warm", {})
        return httpx2.Response(reply.status, content=reply.body, headers={"content-type": reply.content_type})

    def answer(prefix: str) -> model.Answer:
        return model.Answer("0" * 64, "warm", 1, 1, "tool_use", (ToolCall(prefix + "warm", "warm", {}),))

    if path.endswith("/messages"):
        if body.get("stream"):
            return httpx2.Response(200, content=model.stream_body(MODEL, answer("toolu_")), headers=sse)
        return httpx2.Response(200, json=model.message_body(MODEL, answer("toolu_")))
    if path.endswith("/chat/completions"):
        call = openai_api.parse_chat(body)
        if call.stream:
            return httpx2.Response(200, content=openai_api.completion_stream(call, answer("call_")), headers=sse)
        return httpx2.Response(200, json=openai_api.completion(call, answer("call_")))
    if path.endswith("/responses"):
        return httpx2.Response(200, json=openai_api.response_object(openai_api.parse_responses(body), answer("call_")))
    return httpx2.Response(404, json={"error": {"message": "not warmed", "type": "not_found"}})
