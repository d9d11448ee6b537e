"""A tool-calling agent through the whole harness (issue 22, items 3 and 6): a step module on the real
anthropic SDK declares ``MODEL_SCRIPT`` pinning the model's tool call (``issue_refund`` amount 4200, order
A-17); its tool pays out through the fake ledger.

- keyed with the run id and the ``tool_use`` id (``tests.tools.refund_agent``), ``killpoint run --scenario
  crash-points`` passes with exit 0 and every ledger payout is the scripted 4200 for A-17;
- with no key (``tests.tools.refund_agent_bare``), ``exactly_once`` finds the payout repeated after a crash
  (an effect made from inside a tool), and the replay line it prints, run, fails the same way.
"""

from __future__ import annotations

import re
import shlex

import pytest

from tests.helpers.checks import describe, failing_checkers
from tests.helpers.sandbox import Sandbox

pytest.importorskip("anthropic")
EXTRA_PAYOUT = re.compile(r'extra x\d+: ledger (?:POST /v1/charges )?key=None \{"account": "A-17", "amount_cents": 4200')
REPLAY = re.compile(r"reproduce the first failure with:\n\s+(killpoint replay .*)")


def test_the_scripted_tool_call_is_paid_once_at_every_crash_point(sandbox: Sandbox) -> None:
    proc = sandbox.run("run", "--steps", "tests.tools.refund_agent", "--scenario", "crash-points",
                       "--out", str(sandbox.out), "--quiet")
    assert proc.returncode == 0, describe(proc)
    assert "PASS" in proc.stdout and "crash-points" in proc.stdout, describe(proc)
    payouts = [e["record"] for e in sandbox.events() if e["type"] == "effect"]
    assert payouts and {(p["service"], p["payload"]["account"], p["payload"]["amount_cents"]) for p in payouts} \
        == {("ledger", "A-17", 4200)}
    calls = [c for e in sandbox.events() if e["type"] == "model.request" for c in e["record"]["tool_calls"]]
    assert calls and {(c["name"], c["arguments"]["amount"]) for c in calls} == {("issue_refund", 4200)}


def test_a_tool_without_a_key_pays_twice_and_the_replay_line_reproduces_it(sandbox: Sandbox) -> None:
    proc = sandbox.run("run", "--steps", "tests.tools.refund_agent_bare", "--scenario", "crash-points",
                       "--out", str(sandbox.out), "--quiet")
    assert proc.returncode == 1, describe(proc)
    assert "exactly_once" in failing_checkers(proc.stdout) and EXTRA_PAYOUT.search(proc.stdout), describe(proc)
    line = REPLAY.search(proc.stdout)
    assert line and "--steps tests.tools.refund_agent_bare" in line.group(1), describe(proc)
    again = sandbox.run(*shlex.split(line.group(1))[1:], "--out", str(sandbox.out))
    assert again.returncode == 1, describe(again)
    assert "exactly_once" in failing_checkers(again.stdout) and EXTRA_PAYOUT.search(again.stdout), describe(again)
