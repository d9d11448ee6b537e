"""`context.warm`: the clients built ahead (in the fork server) are taken by one plain-http worker only."""

from __future__ import annotations

import pytest

from killpoint.reference_agent import context
from killpoint.reference_agent.context import Resources, warm

PLAIN = {"MAILER_URL": "http://127.0.0.1:9/runs/r", "LEDGER_URL": "http://127.0.0.1:9/runs/r",
         "WEBHOOK_URL": "http://127.0.0.1:9/runs/r", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/runs/r"}


@pytest.fixture(autouse=True)
def no_spares(monkeypatch: pytest.MonkeyPatch):
    for name in list(context.os.environ):
        if name.lower() in context.PROXY_VARS:
            monkeypatch.delenv(name)
    monkeypatch.setattr(context, "_spare", [])


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
