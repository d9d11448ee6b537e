"""Versioned state: older checkpoints migrate forward and finish; newer or unreadable ones are refused."""

from __future__ import annotations

import json
from typing import Any

import pytest

from killpoint.reference_agent import invoice_agent
from killpoint.reference_agent.checkpoint import Checkpoint
from killpoint.reference_agent.versioning import IncompatibleCheckpoint, NewerCheckpoint, parse, upgrade
from tests.helpers.agents import AgentEnv, agent_fixture  # noqa: F401 (the `agent` fixture)

V = invoice_agent.STATE_VERSION


def v1_state(validated: bool) -> dict[str, Any]:
    """The state as STATE_VERSION 1 wrote it: ``validated: bool``, flat customer fields."""
    return {"invoice_id": "INV-1001", "customer_email": "billing@example.com", "account": "acct-42",
            "amount_cents": 12_500, "currency": "usd", "plan": "answer p verdict=approve",
            "validation": "answer v verdict=approve", "verdict": "approve", "validated": validated,
            "charge_id": None, "email_id": None, "recorded": False}


def v2_state() -> dict[str, Any]:
    """The state as STATE_VERSION 2 wrote it: ``approvals: list``, flat customer fields."""
    state = {**v1_state(True), "approvals": ["validate"]}
    del state["validated"]
    return state


def store_checkpoint(agent: AgentEnv, run_id: str, version: int, cursor: str, state: Any,
                     seq: int = 2) -> None:
    data = {"run_id": run_id, "seq": seq, "version": version, "cursor": cursor, "status": "running",
            "state": state, "window": [{"role": "user", "content": "plan"},
                                       {"role": "assistant", "content": "ok"}],
            "cost_usd": 0.001, "updated_at": "2025-01-01T00:00:00+00:00"}
    agent.conn.execute("INSERT INTO checkpoints (run_id, seq, status, data) VALUES (%s, %s, 'running', %s)",
                       (run_id, seq, json.dumps(data)))


def test_the_agent_ships_a_real_migration_history() -> None:
    assert V >= 3 and sorted(invoice_agent.MIGRATIONS) == list(range(1, V))


def test_v1_checkpoint_migrates_and_finishes_without_redoing_the_approved_step(agent: AgentEnv) -> None:
    store_checkpoint(agent, "r-v1", 1, "charge", v1_state(validated=True))
    worker = agent.run("r-v1")
    assert worker.proc.returncode == 0, worker.output
    final = agent.row("r-v1")["data"]
    assert (final["cursor"], final["version"]) == ("done", V)
    assert final["state"]["approvals"] == ["validate"] and "validated" not in final["state"]
    assert final["state"]["customer"] == {"email": "billing@example.com", "account": "acct-42"}
    assert agent.model_requests("r-v1") == []  # validation was not re-done
    assert len(agent.effects("r-v1", "ledger")) == 1 and len(agent.effects("r-v1", "mailer")) == 1
    assert agent.invoices("r-v1") == [("INV-1001", 12_500)]


def test_v1_checkpoint_not_yet_validated_is_validated_before_it_is_charged(agent: AgentEnv) -> None:
    store_checkpoint(agent, "r-v1n", 1, "charge", v1_state(validated=False))
    worker = agent.run("r-v1n")
    assert worker.proc.returncode == 0, worker.output
    assert len(agent.model_requests("r-v1n")) == 1
    assert agent.row("r-v1n")["data"]["state"]["approvals"] == ["validate"]
    assert len(agent.effects("r-v1n", "ledger")) == 1


def test_previous_version_checkpoint_migrates_and_finishes(agent: AgentEnv) -> None:
    state = {**v2_state(), "charge_id": "ch_x"}
    store_checkpoint(agent, "r-v2", V - 1, "email", state, seq=3)
    worker = agent.run("r-v2")
    assert worker.proc.returncode == 0, worker.output
    final = agent.row("r-v2")
    assert (final["seq"], final["data"]["cursor"], final["data"]["version"]) == (5, "done", V)
    assert agent.effects("r-v2", "ledger") == []
    [email] = agent.effects("r-v2", "mailer")
    assert email["payload"]["to"] == "billing@example.com" and email["payload"]["data"]["charge_id"] == "ch_x"


def test_newer_checkpoint_is_refused_loudly_and_left_untouched(agent: AgentEnv) -> None:
    state = invoice_agent.initial_state({})
    store_checkpoint(agent, "r-new", V + 1, "email", {**state, "future_field": [1, 2]})
    before = agent.row("r-new")
    agent.points  # noqa: B018 -- listen for the worker's notes
    worker = agent.run("r-new")
    assert worker.proc.returncode == 3, worker.output
    assert f"checkpoint version {V + 1} is newer than this code's STATE_VERSION {V}" in worker.output
    assert "'r-new'" in worker.output
    assert agent.row("r-new") == before  # byte for byte: same text, seq, status and updated_at
    assert agent.services.attempts("r-new") == []  # no model call, no effect
    assert agent.points.points() == []  # not even a step start
    [note] = agent.points.notes("refused.newer")
    assert (note["found"], note["supported"]) == (V + 1, V)
    assert agent.conn.execute("SELECT count(*) FROM leases").fetchone() == (0,)


@pytest.mark.parametrize("payload", [{"hello": "world"}, "a string", {"run_id": "r-bad", "seq": "x"}])
def test_unreadable_checkpoint_is_refused(agent: AgentEnv, payload: Any) -> None:
    agent.conn.execute("INSERT INTO checkpoints (run_id, seq, status, data) VALUES ('r-bad', 4, 'running', %s)",
                       (json.dumps(payload),))
    before = agent.row("r-bad")
    worker = agent.run("r-bad")
    assert worker.proc.returncode == 3, worker.output
    assert "cannot read checkpoint" in worker.output
    assert agent.row("r-bad") == before
    assert agent.services.attempts("r-bad") == []


def checkpoint(version: int, state: dict[str, Any]) -> Checkpoint:
    return Checkpoint(run_id="r", seq=1, version=version, cursor="plan", status="running", state=state)


def test_upgrade_applies_migrations_in_order_and_refuses_gaps() -> None:
    def add(tag: str) -> Any:
        return lambda s: {**s, "trail": [*s.get("trail", []), tag]}

    migrations = {1: add("1->2"), 2: add("2->3"), 3: add("3->4")}
    up = upgrade(checkpoint(1, {}), 4, migrations)
    assert (up.version, up.state["trail"]) == (4, ["1->2", "2->3", "3->4"])
    assert upgrade(checkpoint(3, {}), 4, migrations).state["trail"] == ["3->4"]
    assert upgrade(checkpoint(4, {"x": 1}), 4, migrations).state == {"x": 1}
    with pytest.raises(IncompatibleCheckpoint, match="no migration from version 2"):
        upgrade(checkpoint(1, {}), 4, {1: add("1->2"), 3: add("3->4")})
    with pytest.raises(NewerCheckpoint) as newer:
        upgrade(checkpoint(5, {}), 4, migrations)
    assert (newer.value.run_id, newer.value.found, newer.value.supported) == ("r", 5, 4)


def test_parse_rejects_payloads_it_cannot_interpret() -> None:
    good = checkpoint(1, {}).to_json()
    assert parse("r", good) == checkpoint(1, {})
    for bad in ([], {**good, "seq": True}, {**good, "status": "zombie"}, {**good, "run_id": "other"},
                {k: v for k, v in good.items() if k != "cursor"}):
        with pytest.raises(IncompatibleCheckpoint):
            parse("r", bad)
