"""SIGTERM drains: the in-flight step finishes and is checkpointed, the run is left paused, exit 0."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.helpers.agents import AgentEnv, agent_fixture, wait_for  # noqa: F401 (the `agent` fixture)


def test_sigterm_while_held_at_step_start_finishes_the_step_then_yields(agent: AgentEnv) -> None:
    """The signal lands while the worker is blocked reading the harness's answer: the read goes on."""
    worker = agent.term_at("r-d", "charge", "step.start", KILLPOINT_STEP_DELAY=0.2)
    assert worker.wait() == 0, worker.output
    row = agent.row("r-d")
    assert (row["status"], row["data"]["status"], row["data"]["cursor"]) == ("paused", "paused", "email")
    assert len(agent.effects("r-d", "ledger")) == 1 and agent.effects("r-d", "mailer") == []
    assert "yielding for shutdown" in worker.output
    [yielded] = agent.points.notes("drain.yield")
    assert (yielded["run_id"], yielded["step"]) == ("r-d", "email")
    assert agent.conn.execute("SELECT count(*) FROM leases").fetchone() == (0,)

    resumed = agent.run("r-d")
    assert resumed.proc.returncode == 0, resumed.output
    assert agent.row("r-d")["data"]["cursor"] == "done"
    assert len(agent.effects("r-d", "ledger")) == 1 and len(agent.effects("r-d", "mailer")) == 1


def test_sigterm_mid_step_drains_after_the_step(agent: AgentEnv) -> None:
    hold = agent.points.hold("step.start", "validate")
    worker = agent.start("r-mid", KILLPOINT_STEP_DELAY=1.0)
    hold.wait()
    hold.release()
    worker.signal(signal.SIGTERM)  # lands in the step's one-second flight
    assert worker.wait() == 0, worker.output
    row = agent.row("r-mid")
    assert (row["status"], row["data"]["cursor"], row["seq"]) == ("paused", "charge", 2)
    assert len(agent.model_requests("r-mid")) == 2
    assert agent.effects("r-mid", "ledger") == []


def test_sigterm_between_steps_takes_no_new_step(agent: AgentEnv) -> None:
    worker = agent.term_at("r-btw", "plan", "checkpoint.committed")
    assert worker.wait() == 0, worker.output
    row = agent.row("r-btw")
    assert (row["status"], row["data"]["cursor"], row["seq"]) == ("paused", "validate", 2)
    assert len(agent.model_requests("r-btw")) == 1
    assert ("validate", "step.start") not in agent.points.points()


def test_drain_deadline_exits_6_without_checkpointing_the_step(agent: AgentEnv) -> None:
    worker = agent.term_at("r-late", "plan", "step.start", KILLPOINT_STEP_DELAY=30, KILLPOINT_DRAIN_SECONDS=0.3)
    assert worker.wait(timeout=20) == 6, worker.output  # long before the 30 s step would have ended
    assert "drain deadline" in worker.output
    row = agent.row("r-late")
    assert (row["seq"], row["status"], row["data"]["cursor"]) == (0, "running", "plan")
    assert agent.model_requests("r-late") == []


def asleep(pid: int) -> bool:
    """Whether the process's main thread is in a timed sleep (`/proc/PID/wchan`), as between queue polls."""
    try:
        return Path(f"/proc/{pid}/wchan").read_text() in ("hrtimer_nanosleep", "do_nanosleep")
    except OSError:
        return False


def test_queue_worker_with_nothing_to_do_exits_0_on_sigterm(agent: AgentEnv) -> None:
    """Idle between polls of an empty queue, it stops when told, not at its next poll: with a poll every
    10 minutes, the SIGTERM still ends it within the wait's bound (the poll's sleep went on before)."""
    agent.points  # noqa: B018 -- the worker.start note says the SIGTERM handler is installed
    worker = agent.start("-", "--queue", "--follow", KILLPOINT_POLL_SECONDS=600)
    wait_for(lambda: agent.points.notes("worker.start"), what="the worker.start note")
    wait_for(lambda: asleep(worker.pid), what="the worker's main thread asleep between polls")
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0, worker.output


@pytest.mark.parametrize(("slow", "code", "deadline"), [("plan", 6, 0.3), ("validate,charge", 0, 10.0)])
def test_only_the_slow_steps_sleep(agent: AgentEnv, slow: str, code: int, deadline: float) -> None:
    """KILLPOINT_SLOW_STEPS names the steps KILLPOINT_STEP_DELAY applies to (deploy-drain sets it to the
    steps its SIGTERMs land in). SIGTERM at `plan`'s start and a 30 s delay: with `plan` slow the worker
    gives up at its 0.3 s drain deadline (exit 6); with only other steps slow `plan` takes no time, so the
    worker drains it (exit 0, paused at `validate`) without reaching a slow step, well inside a 10 s
    deadline (a 0.3 s one was missed on a loaded CI machine: the worker waited 0.295 s for a CPU), which a
    30 s delay of `plan` would still pass."""
    run_id = f"r-slow-{code}"
    worker = agent.term_at(run_id, "plan", "step.start", KILLPOINT_STEP_DELAY=30,
                           KILLPOINT_DRAIN_SECONDS=deadline, KILLPOINT_SLOW_STEPS=slow)
    assert worker.wait(timeout=60) == code, worker.output
    row = agent.row(run_id)
    expected = ("running", "plan") if code == 6 else ("paused", "validate")
    assert (row["status"], row["data"]["cursor"]) == expected, row
