"""A scenario whose faults have nothing to act on in the agent's crash-free run is skipped, saying so; never
passed on trials that could not show what it exists for, never unknown (which made `killpoint run` exit 1 on
a correct agent that sends no service request: flaky-services had "nothing to test").

What each acts on (`Scenario.needs`): flaky-services a request to a service or to the model, sampling-model
one to the model, shared-account one to a service. Three correct agents of tests/gallery/quiet/, other
step names, no service: `no_effects` (nothing but its checkpoint), `own_rows` (its own table) and
`asks_only` (the model only, for which flaky-services and sampling-model do apply and are judged). The
reference agent, which does both, runs all three.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from killpoint.env.postgres import PostgresHandle
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

SCENARIOS = ("flaky-services", "sampling-model", "shared-account")
DOES_NOT_APPLY = "does not apply: the agent's crash-free run made no request to"


@pytest.fixture(scope="module")
def dsn(pg_server: PostgresHandle) -> Iterator[str]:
    yield pg_server.create_database("test_not_apply")
    pg_server.drop_database("test_not_apply")


def outcomes(sandbox: Sandbox, dsn: str, steps: str, *extra: str) -> tuple[int, dict[str, dict]]:
    """`killpoint run` of the three scenarios on `steps`: its exit code and each scenario's result."""
    args = [a for name in SCENARIOS for a in ("--scenario", name)]
    done = sandbox.run("run", "--steps", steps, *args, "--seed", "1", "--no-store", *extra,
                       "--dsn", dsn, "--allow-any-dsn", "--out", str(sandbox.out / steps.rsplit(".", 1)[-1]))
    found = list((sandbox.out / steps.rsplit(".", 1)[-1]).glob("*/verdicts.json"))
    assert len(found) == 1, describe(done)
    verdicts = found[0]
    results = {r["scenario"]: r for r in json.loads(verdicts.read_text())}
    assert set(results) == set(SCENARIOS), describe(done)
    return done.returncode, results


@pytest.mark.parametrize("agent", ["no_effects", "own_rows"])
def test_an_agent_without_services_or_model_skips_all_three_and_exits_0(agent: str, dsn: str,
                                                                         sandbox: Sandbox) -> None:
    code, results = outcomes(sandbox, dsn, f"tests.gallery.quiet.{agent}")
    # nothing ran at all: never a pass, and said as such (exit 2, nothing tested), not as unknown (exit 1)
    assert code == 2, results
    for name, r in results.items():
        assert r["outcome"] == "skipped" and DOES_NOT_APPLY in r["reason"] and not r["trials"], (name, r)
    assert "to a service or to the model" in results["flaky-services"]["reason"]
    assert sandbox.survivors() == []


def test_an_agent_that_only_asks_the_model_skips_only_shared_account(dsn: str, sandbox: Sandbox) -> None:
    code, results = outcomes(sandbox, dsn, "tests.gallery.quiet.asks_only")
    assert code == 0, results
    assert results["shared-account"]["outcome"] == "skipped", results["shared-account"]
    assert "no request to a service," in results["shared-account"]["reason"]
    for name in ("flaky-services", "sampling-model"):
        assert results[name]["outcome"] == "pass" and results[name]["trials"], (name, results[name])
    schedules = [t["schedule"] for t in results["flaky-services"]["trials"]]
    assert all(":model.request:" in s for s in schedules if s), schedules  # its faults act on the model's requests
    assert any(s for s in schedules), schedules
    # model requests are no effects: an agent that only asks the model holds nothing to once
    once = [v for r in results.values() for t in r["trials"] for v in t["verdicts"] if v["checker"] == "exactly_once"]
    assert once and all(v["outcome"] == "n/a" for v in once), once


def test_the_reference_agent_runs_all_three(dsn: str, sandbox: Sandbox) -> None:
    code, results = outcomes(sandbox, dsn, "killpoint.reference_agent.invoice_agent")
    assert code == 0, {n: (r["outcome"], r.get("reason")) for n, r in results.items()}
    assert all(r["outcome"] == "pass" and r["trials"] for r in results.values())
