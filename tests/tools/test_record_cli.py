"""``killpoint record`` through the whole harness: the tool-calling agent's model answers are recorded from a
loopback stand-in for the real Anthropic API during a crash-points run (each distinct request once: the
tool result carries the payout id, so each run's second request is its own; the cassette holds no key),
then replayed with the stand-in gone (``KILLPOINT_MODEL_CASSETTE``): the same runs pass again."""

from __future__ import annotations

import subprocess

import pytest

from tests.fake_services.anthropic_upstream import anthropic_api
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

pytest.importorskip("anthropic")
SECRET = "sk-ant-real-secret-key"


def killpoint(sandbox: Sandbox, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return sandbox.run(*args, timeout=600, env=env)


def test_a_recorded_run_replays_with_no_upstream(sandbox: Sandbox) -> None:
    cassette = sandbox.root / "answers.jsonl"
    run = ("run", "--steps", "tests.tools.refund_agent_unscripted", "--scenario", "crash-points",
           "--out", str(sandbox.out), "--quiet")
    with anthropic_api() as upstream:
        recorded = killpoint(sandbox, "record", "--cassette", str(cassette), "--upstream", upstream.url, *run,
                             ANTHROPIC_API_KEY=SECRET)
    assert recorded.returncode == 0, describe(recorded)
    bodies = {str(b) for _, b in upstream.seen}
    assert {h["x-api-key"] for h, _ in upstream.seen} == {SECRET} and len(bodies) == len(upstream.seen)
    text = cassette.read_text()
    assert len(text.splitlines()) == len(bodies) and SECRET not in text and "killpoint-fake-key" not in text
    payouts = [e["record"]["payload"] for e in sandbox.events() if e["type"] == "effect"]
    assert payouts and {(p["account"], p["amount_cents"]) for p in payouts} == {("A-17", 4200)}
    replayed = killpoint(sandbox, *run, KILLPOINT_MODEL_CASSETTE=str(cassette))
    assert replayed.returncode == 0, describe(replayed)
