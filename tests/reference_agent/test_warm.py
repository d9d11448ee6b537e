"""`context.warm`: the clients built ahead (in the fork server) are taken by one plain-http worker only."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from killpoint.reference_agent import context
from killpoint.reference_agent.context import Resources, build_ahead, warm
from tests.helpers.schemas import COUNT_SCHEMAS

PLAIN = {"MAILER_URL": "http://127.0.0.1:9/runs/r", "LEDGER_URL": "http://127.0.0.1:9/runs/r",
         "WEBHOOK_URL": "http://127.0.0.1:9/runs/r", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/runs/r"}


@pytest.fixture(autouse=True)
def no_spares(monkeypatch: pytest.MonkeyPatch):
    for name in list(context.os.environ):
        if name.lower() in context.PROXY_VARS:
            monkeypatch.delenv(name)
    monkeypatch.setattr(context, "_spare", [])
    monkeypatch.setattr(context, "_ahead", [])


def test_a_plain_http_worker_takes_the_clients_built_ahead_once() -> None:
    warm()
    (spare,) = context._spare
    first = Resources(None, PLAIN)
    second = Resources(None, PLAIN)
    assert first.http is spare[0] and first.sdk._client is spare[1]
    assert second.http is not spare[0] and second.sdk._client is not spare[1]
    first.close()
    second.close()


@pytest.mark.parametrize("env", [{**PLAIN, "HTTPS_PROXY": "http://proxy:3128"},
                                 {**PLAIN, "ANTHROPIC_BASE_URL": "https://api.example.com"},
                                 {**PLAIN, "LEDGER_URL": "https://ledger.example.com"}])
def test_a_proxied_or_tls_worker_builds_its_own(env: dict[str, str]) -> None:
    warm()
    (spare,) = context._spare
    resources = Resources(None, env)
    assert resources.http is not spare[0] and resources.sdk._client is not spare[1]
    assert context._spare == [spare]
    resources.close()


def test_warm_leaves_no_spares_where_the_server_itself_is_proxied(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("http_proxy", "http://proxy:3128")
    warm()
    assert context._spare == []


PREVIOUS = {**PLAIN, "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/runs/r0", "ANTHROPIC_API_KEY": "killpoint-fake-key"}
"""The environment a standby was forked with: the previous spawn's, another run's URLs."""


def standby_env(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    """This process's environment (which `build_ahead` reads, as the SDK's client does) made `env`'s."""
    for name in [*context.SDK_ENV, *PLAIN]:
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)


def test_a_standby_builds_the_sdk_client_ahead_and_the_incarnation_takes_it_at_its_own_url(
        monkeypatch: pytest.MonkeyPatch) -> None:
    warm()
    (spare,) = context._spare
    standby_env(monkeypatch, PREVIOUS)
    build_ahead()
    assert context._spare == []
    ((_, http, sdk),) = context._ahead
    assert http is spare[0] and sdk._client is spare[1] and str(sdk.base_url) == "http://127.0.0.1:9/runs/r0/"
    taken = Resources(None, {**PLAIN, "ANTHROPIC_API_KEY": "killpoint-fake-key"})
    assert taken.http is http and taken.sdk is sdk and context._ahead == []
    assert str(taken.sdk.base_url) == "http://127.0.0.1:9/runs/r/"  # this run's, not the previous spawn's
    other = Resources(None, {**PLAIN, "ANTHROPIC_API_KEY": "killpoint-fake-key"})  # taken once
    assert other.sdk is not sdk and other.http is not http
    taken.close()
    other.close()


@pytest.mark.parametrize("differs", [{"ANTHROPIC_API_KEY": "another-key"}, {"ANTHROPIC_AUTH_TOKEN": "a-token"},
                                     {"ANTHROPIC_CUSTOM_HEADERS": "x-team: a"}, {"HTTPS_PROXY": "http://proxy:3128"}])
def test_a_client_built_ahead_in_another_sdk_environment_is_not_taken(monkeypatch: pytest.MonkeyPatch,
                                                                      differs: dict[str, str]) -> None:
    warm()
    standby_env(monkeypatch, PREVIOUS)
    build_ahead()
    ((_, http, sdk),) = context._ahead
    resources = Resources(None, {**PREVIOUS, **differs})
    assert resources.sdk is not sdk and resources.http is not http
    assert len(context._ahead) == 1
    resources.close()


@pytest.mark.parametrize("env", [{**PREVIOUS, "ANTHROPIC_BASE_URL": "https://api.example.com"},
                                 {**PREVIOUS, "MAILER_URL": "https://mailer.example.com"},
                                 {k: v for k, v in PREVIOUS.items() if k != "ANTHROPIC_BASE_URL"}])
def test_nothing_is_built_ahead_where_a_worker_would_not_take_the_spare_clients(
        monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    warm()
    (spare,) = context._spare
    standby_env(monkeypatch, env)
    build_ahead()
    assert context._ahead == [] and context._spare == [spare]


def test_a_standby_of_a_server_without_the_sdk_builds_nothing_and_imports_nothing() -> None:
    """A fork server whose step modules never call the model holds no SDK (`worker.warm`): its standby
    neither imports it nor takes the services' spare client. In a fresh interpreter."""
    code = f"""
import os, sys
os.environ.update({PREVIOUS!r})
from killpoint.reference_agent import context
context.warm(sdk=False)
spare = list(context._spare)
context.build_ahead()
assert "anthropic" not in sys.modules and context._ahead == [] and context._spare == spare, context._ahead
print("ok")
"""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


def test_worker_warm_leaves_a_child_nothing_of_its_own_to_compile_or_level() -> None:
    """`worker.warm` (what the fork server runs before it forks): afterwards the table check's list is dumped
    with psycopg's pattern already compiled, argparse's patterns are in `re`'s cache (a worker's parse
    compiles nothing), and the SDK's loggers are at WARNING, which `quiet_libraries` then leaves alone. In a
    fresh interpreter, so nothing of this process's is already warm."""
    code = """
import logging, re
from killpoint.reference_agent import worker
from psycopg.types import array
assert array._get_needs_quotes_regexp.cache_info().currsize == 0
worker.warm()
assert array._get_needs_quotes_regexp.cache_info().currsize == 1
compiled = []
original = re._compiler.compile  # what re calls on a miss of its cache
re._compiler.compile = lambda *a: compiled.append(a) or original(*a)
worker._parse(["run-7"])
re._compiler.compile = original
assert compiled == [], compiled
assert all(logging.getLogger(n).level == logging.WARNING for n in worker.NOISY)
calls = []
for n in worker.NOISY:
    logging.getLogger(n).setLevel = lambda level, n=n: calls.append(n)
worker.quiet_libraries()
assert calls == [], calls
print("ok")
"""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "ok", out.stderr


ERROR_CHILD = r"""
import gc, json, os, sys
import anthropic, httpx2
from killpoint.reference_agent import context
from killpoint.reference_agent.clients import ModelClient

if sys.argv[1] == "warm":
    context.warm()
gc.collect(); gc.freeze()
""" + COUNT_SCHEMAS + r"""

pid = os.fork()
if pid == 0:  # the fake's 500, as a worker meets it when a fault outlasts the SDK's retries
    failing = httpx2.Client(transport=httpx2.MockTransport(lambda _: httpx2.Response(
        500, json={"type": "error", "error": {"type": "api_error", "message": "boom"}})))
    sdk = anthropic.Anthropic(base_url="http://x.invalid", api_key="k", http_client=failing, max_retries=0)
    try:
        ModelClient(sdk).ask([{"role": "user", "content": "hi"}])
    except anthropic.InternalServerError:
        print(json.dumps(built[:3]), flush=True)
    os._exit(0)
os.waitpid(pid, 0)
"""


@pytest.mark.parametrize("mode", ["cold", "warm"])
def test_a_worker_forked_after_warm_builds_no_schema_for_the_models_error(mode: str) -> None:
    """The SDK builds its error types' schemas on the first error it raises (~30 ms per worker that meets a
    fault outlasting its retries): `warm` meets one first. The cold control builds them in the child."""
    proc = subprocess.run([sys.executable, "-c", ERROR_CHILD, mode], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip(), proc.stderr[-3000:]
    built = json.loads(proc.stdout)
    assert (built == []) == (mode == "warm"), built
