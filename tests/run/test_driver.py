"""One run driver under both restart policies (harness/run/driver.py): a service request that names no step,
of a run whose worker has reported none, is attributed to the run's cursor (read through the adapter)
whether one worker drives the run (`RunController`) or queue workers serve a fleet (`Fleet`: it used to
record no step there). No database or process: the environment is a stand-in that routes and reads."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from killpoint.env.stepmodule import AgentSpec
from killpoint.fake_services.hooks import Decision
from killpoint.faults.plan import FaultPlan
from killpoint.faults.schedule import Schedule
from killpoint.run.controller import RunController
from killpoint.run.fleet import Fleet
from killpoint.run.history import History
from killpoint.run.options import RunOptions

CURSOR = "charge"


class _Adapter:
    """The run's records say it is in `CURSOR` (a black-box worker's checkpoint)."""

    def cursor(self, conn: Any, run_id: str) -> str | None:
        return CURSOR


class _Env:
    """What the driver asks of the environment on a service point: a connection and the adapter; and
    where a policy attaches the listeners the environment routes to."""

    adapter = _Adapter()

    def __init__(self) -> None:
        self.listeners: dict[str, Any] = {}

    @contextlib.contextmanager
    def pooled(self) -> Iterator[None]:
        yield None

    def attach(self, listener: Any) -> None:
        self.listeners[listener.run_id] = listener

    def detach(self, listener: Any) -> None:
        self.listeners.pop(listener.run_id, None)


@contextlib.contextmanager
def _single(env: Any, history: History) -> Iterator[str]:
    ctl = RunController(env, history, "r1", Schedule(), RunOptions(), "m")
    env.attach(ctl)
    yield "r1"


@contextlib.contextmanager
def _fleet(env: Any, history: History) -> Iterator[str]:
    agent = AgentSpec(module="m", start="plan", steps=("plan", CURSOR), state_version=1, digest="",
                      own_effects_sql=None)
    fleet = Fleet(env, history, "f", ["f1", "f2"], RunOptions(), agent, FaultPlan(Schedule(), "fleet"))
    with fleet.attached():
        yield "f2"


@pytest.mark.parametrize("policy", [_single, _fleet], ids=["one-worker-per-run", "queue-workers"])
def test_a_request_naming_no_step_is_the_cursors_step_under_either_policy(policy: Any) -> None:
    env, history = _Env(), History()
    with policy(env, history) as run_id:
        decision = env.listeners[run_id].on_service_point(
            "effect.received", {"run_id": run_id, "service": "ledger", "key": "9f1c2e"})  # an opaque key
    assert decision == Decision.GO
    points = [e for e in history.events() if e["type"] == "point"]
    assert [(p["run_id"], p["step"], p["source"]) for p in points] == [(run_id, CURSOR, "ledger")]
