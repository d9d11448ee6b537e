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
