"""The model SDKs' first calls made ahead in a process that forks workers (harness/env/sdk_warm.py): a child
forked after `warm()` builds no pydantic schema, imports no module and works out no parameter type hints on the
calls a framework makes through the SDK's async client (a Responses API answer to a tool loop's request with
instructions, as the Agents SDK asks; a streamed chat completion; a streamed beta Messages answer; both stream
helpers; an anyio event, as an async transport's first request makes) and on Stripe's (a client, a listing of
every kind of object the fake answers with, a charge through `requests`), where a child of an unwarmed process
does all three; `warm()` imports no SDK the process had not imported and leaves no thread or descriptor behind;
and a fork server on the OpenAI Agents SDK example says in its `ready` line that it warmed the SDK its agent
imports.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.env import forkserver, sdk_warm
from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.postgres import PostgresHandle
from tests.helpers import REPO
from tests.helpers.harness import harness_session
from tests.helpers.sandbox import without_zygote
from tests.helpers.schemas import COUNT_SCHEMAS

CHILD = r"""
import asyncio, gc, json, os, sys
import anthropic, anyio, httpx2, openai, requests, stripe
from openai._utils import _transform
from killpoint.env import forkserver, sdk_warm

if sys.argv[1] == "warm":
    sdk_warm.warm()
gc.collect(); gc.freeze()

""" + COUNT_SCHEMAS + r"""

LOOP = [{"role": "user", "content": "hi"}]  # a tool loop's second request: the model's call, then its result
async def framework_calls():
    # what the frameworks do: async clients, the Responses API, streams, tool loops (none is a warm-up call)
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(sdk_warm._answer))
    oa = openai.AsyncOpenAI(base_url="http://x.invalid/v1", api_key="k", http_client=http, max_retries=0)
    response = await oa.responses.create(  # as the Agents SDK asks
        model="m", input=[*LOOP, {"type": "function_call", "call_id": "call_1", "name": "f", "arguments": "{}"},
                          {"type": "function_call_output", "call_id": "call_1", "output": "42"}],
        tools=sdk_warm.TOOLS_RESPONSES, instructions="be brief", max_output_tokens=99)
    assert response.output[-1].type == "function_call", response
    for item in response.output:  # the Agents SDK makes the answer's items anew with their own classes
        type(item).model_validate(item.model_dump())
    chat = [{"role": "system", "content": "be brief"}, *LOOP, {"role": "assistant", "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "42"}]
    async for _ in await oa.chat.completions.create(model="m", messages=chat, stream=True):
        pass
    an = anthropic.AsyncAnthropic(base_url="http://x.invalid", api_key="k", http_client=http, max_retries=0)
    turns = [*LOOP, {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}]},
             {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "42"}]}]
    async for _ in await an.beta.messages.create(model="m", max_tokens=9, system="be brief", messages=turns,
                                                 stream=True):
        pass
    for helper in (an.messages, an.beta.messages):  # the SDK's stream helpers, accumulating a message
        async with helper.stream(model="m", max_tokens=9, messages=turns) as stream:
            await stream.get_final_message()
    await http.aclose()
    anyio.Event()  # what an async transport's first request makes
    # a fault that outlasts the retries: the fake's 500 (the warm-up met its 529 overload only)
    failing = httpx2.AsyncClient(transport=httpx2.MockTransport(lambda _: httpx2.Response(
        500, json={"type": "error", "error": {"type": "api_error", "message": "boom"}})))
    try:
        await anthropic.AsyncAnthropic(base_url="http://x.invalid", api_key="k", http_client=failing,
                                       max_retries=0).messages.create(model="m", max_tokens=9, messages=LOOP)
    except anthropic.InternalServerError:
        pass
    else:
        raise AssertionError("the 500 was not raised")

class Listing(stripe.HTTPClient):  # a customer listing holding one of each kind of object the fake serves
    name = "listing"
    def request(self, method, url, headers, post_data=None):
        data = [{"object": kind, "id": kind} for kind in sdk_warm.STRIPE_OBJECTS]
        return json.dumps({"object": "list", "url": "/v1/customers", "has_more": False, "data": data}), 200, {}

class Intent(requests.adapters.BaseAdapter):  # what the fake answers a charge, through requests' session
    def send(self, request, **kwargs):
        response = requests.Response()
        response.status_code, response.url, response.request = 200, request.url, request
        response._content = b'{"object": "payment_intent", "id": "pi_1", "status": "succeeded"}'
        return response
    def close(self):
        pass

def stripe_calls():
    stripe.StripeClient("sk_test_x", base_addresses={"api": "http://x.invalid"})  # the default HTTP client
    listed = stripe.StripeClient("sk_test_x", http_client=Listing()).v1.customers.list()
    assert {type(item).__name__ for item in listed.data} >= {"Charge", "PaymentIntent", "Refund"}, listed
    session = requests.Session()
    session.mount("http://", Intent())
    client = stripe.StripeClient("sk_test_x", http_client=stripe.RequestsClient(session=session),
                                 base_addresses={"api": "http://x.invalid"})
    for name in ("refunds", "charges"):
        getattr(client.v1, name)
    paid = client.v1.payment_intents.create(params={"amount": 5, "currency": "usd"}, options={"idempotency_key": "k"})
    assert paid.id == "pi_1", paid

r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)  # should the parent die, this child's write fails at once instead of waiting for a reader
    before, hints_before = set(sys.modules), _transform.get_type_hints.cache_info().misses
    asyncio.run(framework_calls())
    stripe_calls()
    os.write(w, json.dumps({"built": built[:5], "imported": sorted(set(sys.modules) - before)[:5],
                            "hints": _transform.get_type_hints.cache_info().misses - hints_before}).encode())
    os._exit(0)
os.close(w)
with os.fdopen(r) as said:
    text = said.read()
_, status = os.waitpid(pid, 0)
print(text if status == 0 else json.dumps({"status": status}))
"""


def child_of(mode: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, mode], capture_output=True, text=True, timeout=120,
                          cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_a_child_of_a_warmed_process_builds_no_schema_and_imports_nothing_on_a_frameworks_calls() -> None:
    cold, warm = child_of("cold"), child_of("warm")
    assert cold.get("built") and cold.get("imported") and cold.get("hints"), cold  # the control: does all three
    assert warm == {"built": [], "imported": [], "hints": 0}, warm


WITHOUT_SDKS = r"""
import json, os, sys, threading
import httpx2
from killpoint.env import forkserver, sdk_warm
fds, threads = sorted(os.listdir("/proc/self/fd")), threading.active_count()
first, again = sdk_warm.warm(), sdk_warm.warm()
print(json.dumps({"first": first, "again": again, "sdks": [m for m in ("anthropic", "openai") if m in sys.modules],
                  "fds": sorted(os.listdir("/proc/self/fd")) == fds, "threads": threading.active_count() - threads}))
"""


def test_warm_imports_no_sdk_and_leaves_no_thread_or_descriptor() -> None:
    proc = subprocess.run([sys.executable, "-c", WITHOUT_SDKS], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert json.loads(proc.stdout) == {"first": ["httpx2"], "again": ["httpx2"], "sdks": [], "fds": True, "threads": 0}


EXAMPLES = REPO / "examples" / "tool_agents"


@pytest.fixture
def tool_agents_importable(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The examples' step modules importable here and in the fork servers (their PYTHONPATH), which are
    started fresh, not forked from the test session's zygotes (which warm what they preload themselves)."""
    pytest.importorskip("agents", reason="openai-agents is not installed: pip install 'killpoint[tool-agents]'")
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setenv("PYTHONPATH", str(EXAMPLES))
    with without_zygote():
        yield


def test_a_fork_server_warms_the_sdk_its_step_module_imports(pg_server: PostgresHandle, tmp_path: Path,
                                                             tool_agents_importable: None) -> None:
    """The OpenAI Agents SDK example (a real framework, one step around the SDK's whole tool loop) imports
    openai and stripe, which killpoint's runtime never does: both fork servers warm them; the reference
    agent's warm nothing more than the runtime's own call."""
    with harness_session(pg_server, tmp_path / "oa", "warm_oa", steps="openai_agents_billing") as session:
        launcher = session.env.launcher
        assert isinstance(launcher, ForkLauncher)
        assert [report.get("warmed") for report in launcher.reports] == [["openai", "stripe"]] * 2, launcher.reports
    with harness_session(pg_server, tmp_path / "ref", "warm_ref") as session:
        assert [report.get("warmed") for report in session.env.launcher.reports] == [[], []]


def test_the_fork_server_looks_for_the_sdks_sdk_warm_warms() -> None:
    assert forkserver.AGENT_SDKS == sdk_warm.SERVICE_SDKS


def test_the_stripe_objects_warmed_are_the_kinds_the_fake_answers_with() -> None:
    kinds = set()
    for module in (REPO / "fake_services").glob("stripe_*.py"):
        kinds |= set(re.findall(r'"object": "([a-z_]+)"', module.read_text()))
    assert kinds == set(sdk_warm.STRIPE_OBJECTS)


def test_the_stripe_services_warmed_are_the_collections_the_fake_serves() -> None:
    from killpoint.fake_services.stripe_api import ROUTES  # noqa: PLC0415

    assert {route.split("/")[2] for route in ROUTES} == set(sdk_warm.STRIPE_SERVICES)
