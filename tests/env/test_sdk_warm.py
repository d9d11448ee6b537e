"""The model SDKs' first calls made ahead in a process that forks workers (harness/env/sdk_warm.py): a child
forked after `warm()` builds no pydantic schema and imports no module on the calls a framework makes through
the SDK's async client (a Responses API answer to a request with instructions, as the Agents SDK asks, a streamed chat completion, a streamed beta Messages
answer) and on Stripe's (a client, a listing of every kind of object the fake answers with), where a child of an unwarmed process does both; `warm()` imports no SDK the process had not
imported and leaves no thread or descriptor behind; and a fork server on the OpenAI Agents SDK example says
in its `ready` line that it warmed the SDK its agent imports.
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

CHILD = r"""
import asyncio, gc, json, os, sys
import anthropic, httpx2, openai, stripe
from pydantic._internal import _generate_schema
from killpoint.env import forkserver, sdk_warm

if sys.argv[1] == "warm":
    sdk_warm.warm()
gc.collect(); gc.freeze()

built = []
original = _generate_schema.GenerateSchema.generate_schema
def counted(self, obj, *args, **kwargs):
    built.append(repr(obj)[:80])
    return original(self, obj, *args, **kwargs)
_generate_schema.GenerateSchema.generate_schema = counted

async def framework_calls():
    # what the frameworks do: async clients, the Responses API, streams (none of these is a warm-up call)
    http = httpx2.AsyncClient(transport=httpx2.MockTransport(sdk_warm._answer))
    oa = openai.AsyncOpenAI(base_url="http://x.invalid/v1", api_key="k", http_client=http, max_retries=0)
    response = await oa.responses.create(model="m", input=[{"role": "user", "content": "hi"}],  # as the Agents SDK
                                         tools=sdk_warm.TOOLS_RESPONSES, instructions="be brief", max_output_tokens=99)
    assert response.output[-1].type == "function_call", response
    async for _ in await oa.chat.completions.create(model="m", messages=sdk_warm.MESSAGES, stream=True):
        pass
    an = anthropic.AsyncAnthropic(base_url="http://x.invalid", api_key="k", http_client=http, max_retries=0)
    async for _ in await an.beta.messages.create(model="m", max_tokens=9, messages=sdk_warm.MESSAGES, stream=True):
        pass
    await http.aclose()

class Listing(stripe.HTTPClient):  # a customer listing holding one of each kind of object the fake serves
    name = "listing"
    def request(self, method, url, headers, post_data=None):
        data = [{"object": kind, "id": kind} for kind in sdk_warm.STRIPE_OBJECTS]
        return json.dumps({"object": "list", "url": "/v1/customers", "has_more": False, "data": data}), 200, {}

def stripe_calls():
    stripe.StripeClient("sk_test_x", base_addresses={"api": "http://x.invalid"})  # the default HTTP client
    listed = stripe.StripeClient("sk_test_x", http_client=Listing()).v1.customers.list()
    assert {type(item).__name__ for item in listed.data} >= {"Charge", "PaymentIntent", "Refund"}, listed

r, w = os.pipe()
pid = os.fork()
if pid == 0:
    os.close(r)  # should the parent die, this child's write fails at once instead of waiting for a reader
    before = set(sys.modules)
    asyncio.run(framework_calls())
    stripe_calls()
    os.write(w, json.dumps({"built": built[:5], "imported": sorted(set(sys.modules) - before)[:5]}).encode())
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
    assert cold.get("built") and cold.get("imported"), cold  # the control: an unwarmed process's child does both
    assert warm == {"built": [], "imported": []}, warm


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
