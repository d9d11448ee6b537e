"""The reference invoice agent end to end: real Postgres, real worker processes, real signals, the fakes."""

from __future__ import annotations

import signal

import httpx2
import pytest

from killpoint.reference_agent import invoice_agent
from tests.helpers.agents import AgentEnv, agent_fixture, wait_for  # noqa: F401 (the `agent` fixture)


def test_runs_to_done_with_one_effect_per_step(agent: AgentEnv) -> None:
    worker = agent.run("r-ok", KILLPOINT_PARAMS='{"invoice_id": "INV-7", "amount_cents": 4200}')
    assert worker.proc.returncode == 0, worker.output
    row = agent.row("r-ok")
    cp = row["data"]
    assert (row["seq"], row["status"], cp["cursor"], cp["status"]) == (5, "done", "done", "done")
    assert cp["version"] == invoice_agent.STATE_VERSION
    charges, emails = agent.effects("r-ok", "ledger"), agent.effects("r-ok", "mailer")
    assert [(c["key"], c["payload"]["amount_cents"]) for c in charges] == [("r-ok:charge", 4200)]
    assert [e["key"] for e in emails] == ["r-ok:email"]
    assert agent.invoices("r-ok") == [("INV-7", 4200)]
    assert len(agent.model_requests("r-ok")) == 2
    # the model's answers steer the outcome: they are in the state and in the email
    state = cp["state"]
    assert state["plan"] == agent.model_requests("r-ok")[0]["response_text"]
    assert emails[0]["payload"]["data"]["reference"] == invoice_agent.reference(state)
    assert state["charge_id"] == charges[0]["id"] and state["email_id"] == emails[0]["id"]
    # the window is what the model saw, plus its last answer; the cost is what the usage says
    last = agent.model_requests("r-ok")[-1]
    assert cp["window"] == [*last["messages"], {"role": "assistant", "content": last["response_text"]}]
    assert cp["cost_usd"] > 0


def test_articles_hard_restart(agent: AgentEnv) -> None:
    """The articles' own test: wait until seq >= 3, SIGKILL, resume, exactly one email."""
    worker = agent.start("r-kill", KILLPOINT_STEP_DELAY=0.5)
    wait_for(lambda: (agent.row("r-kill") or {}).get("seq", 0) >= 3, what="seq >= 3")
    agent.kill(worker, "r-kill")
    assert worker.proc.returncode == -signal.SIGKILL
    assert agent.row("r-kill")["status"] == "running"
    resumed = agent.run("r-kill")
    assert resumed.proc.returncode == 0, resumed.output
    assert agent.row("r-kill")["data"]["cursor"] == "done"
    assert len(agent.effects("r-kill", "mailer")) == 1


@pytest.mark.parametrize("step", ["charge", "email"])
def test_replay_trap_effect_responded(agent: AgentEnv, step: str) -> None:
    """Killed after the effect's response, before the checkpoint: the replay repeats the key, not the effect."""
    agent.crash_at("r-trap", step, "effect.responded")
    assert agent.row("r-trap")["data"]["cursor"] == step  # the checkpoint never heard of the effect
    resumed = agent.run("r-trap")
    assert resumed.proc.returncode == 0, resumed.output
    service = {"charge": "ledger", "email": "mailer"}[step]
    attempts = [a for a in agent.services.attempts("r-trap") if a["service"] == service]
    assert [a["outcome"] for a in attempts] == ["applied", "deduplicated"]
    assert len(agent.effects("r-trap", service)) == 1
    assert agent.row("r-trap")["data"]["cursor"] == "done"


def test_key_is_the_cursor_not_the_seq(agent: AgentEnv) -> None:
    """A replay at a higher seq (a drained resumer wrote a pause checkpoint in between) keeps the key."""
    agent.crash_at("r-seq", "email", "effect.responded")
    agent.conn.execute(
        "UPDATE checkpoints SET seq = seq + 1, status = 'paused', data = jsonb_set(jsonb_set(data, "
        "'{seq}', to_jsonb(seq + 1)), '{status}', '\"paused\"') WHERE run_id = %s", ("r-seq",))
    resumed = agent.run("r-seq")
    assert resumed.proc.returncode == 0, resumed.output
    assert len(agent.effects("r-seq", "mailer")) == 1


def test_own_database_effect_commits_with_the_checkpoint(agent: AgentEnv) -> None:
    """Killed inside the checkpoint transaction of `record`: the invoice row goes with the checkpoint."""
    agent.crash_at("r-rec", "record", "checkpoint.writing")
    assert agent.invoices("r-rec") == []
    assert agent.row("r-rec")["data"]["cursor"] == "record"
    resumed = agent.run("r-rec")
    assert resumed.proc.returncode == 0, resumed.output
    assert agent.invoices("r-rec") == [("INV-1001", 12_500)]


def test_reports_kill_points_in_order(agent: AgentEnv) -> None:
    agent.points  # noqa: B018 -- start the kill-point server so the worker reports to it
    worker = agent.run("r-pts")
    assert worker.proc.returncode == 0, worker.output
    seen = agent.points.points()
    boundaries = ["step.start", "checkpoint.writing", "checkpoint.committed"]
    expected = []
    for step in invoice_agent.STEPS:
        effect = ["effect.responded"] if step in ("charge", "email") else []
        expected += [(step, p) for p in [boundaries[0], *effect, *boundaries[1:]]]
    assert seen == expected
    assert [n["note"] for n in agent.points.notes()] == ["worker.start", "run.done"]


def test_webhook_variant_guard_narrows_but_does_not_close_the_window(agent: AgentEnv) -> None:
    """Negative control: was_done/mark_done skips a post already marked, but a kill between the post and
    mark_done posts twice."""
    steps = {"KILLPOINT_STEPS": "killpoint.reference_agent.webhook_agent"}
    ok = agent.run("r-wh-ok", **steps)
    assert ok.proc.returncode == 0, ok.output
    assert len(agent.effects("r-wh-ok", "webhook")) == 1
    assert agent.conn.execute("SELECT key FROM done_keys").fetchall() == [("r-wh-ok:notify",)]

    # killed after mark_done but before the checkpoint: the guard skips the repeat
    agent.crash_at("r-wh-skip", "notify", "checkpoint.writing", **steps)
    assert agent.run("r-wh-skip", **steps).proc.returncode == 0
    assert len(agent.effects("r-wh-skip", "webhook")) == 1

    # killed between the post and mark_done: the webhook fires twice
    agent.crash_at("r-wh-dup", "notify", "effect.responded", **steps)
    assert agent.run("r-wh-dup", **steps).proc.returncode == 0
    assert len(agent.effects("r-wh-dup", "webhook")) == 2
    assert len(agent.effects("r-wh-dup", "mailer")) == 1


def test_final_service_refusal_fails_the_run_for_good(agent: AgentEnv) -> None:
    """A 422 (the key was used with another payload) cannot be retried away: the run is checkpointed failed."""
    httpx2.post(agent.services.url("ledger", "r-fail") + "/v1/charges", headers={"Idempotency-Key": "r-fail:charge"},
                json={"account": "acct-42", "amount_cents": 1, "currency": "usd"}).raise_for_status()
    worker = agent.run("r-fail")
    assert worker.proc.returncode == 1, worker.output
    row = agent.row("r-fail")
    assert (row["status"], row["data"]["cursor"]) == ("failed", "charge")
    assert "422" in row["data"]["state"]["error"]
    again = agent.run("r-fail")  # a failed run is terminal: nothing more happens
    assert again.proc.returncode == 1 and agent.row("r-fail") == row
    assert agent.effects("r-fail", "mailer") == []
