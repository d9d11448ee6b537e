"""A scenario whose faults land nowhere in the agent runs no schedule (not even the empty random ones a
seed draws from no points) and is unknown with the reason and the adapter's hint, never pass; deploy-drain
says so instead of raising IndexError. Pure: the crash-free run's evidence is written here."""

from __future__ import annotations

import time
from types import SimpleNamespace

from killpoint.adapters import get
from killpoint.checkers.evidence import Evidence
from killpoint.events import Point
from killpoint.run.context import Context
from killpoint.run.gate import Gate
from killpoint.run.scenario import Scenario
from killpoint.run.untested import late_checkpoint, nothing_to_test
from killpoint.scenarios.db_crash import DbCrash
from killpoint.scenarios.deploy_drain import DeployDrain


def only_at_exit() -> Evidence:
    """A LangGraph graph run with durability='exit': one checkpoint commit, after every node ran."""
    events = [Point(run_id="b", inc="b#1", point=p, step=None, source="sql-barrier", nth=1)
              for p in ("checkpoint.writing", "checkpoint.committed")]
    return Evidence(run_id="b", events=events)


def ctx(base: Evidence, adapter: str, said: list[str]) -> Context:
    session = SimpleNamespace(baseline=lambda *_a, **_k: base, options=None, agent=None, jobs=1, gate=Gate(1),
                              env=SimpleNamespace(adapter=get(adapter), pg=SimpleNamespace(owned=True)))
    return Context(session=session, say=said.append)  # type: ignore[arg-type]


def test_the_reason_names_what_was_reached_and_the_frameworks_fix() -> None:
    line = nothing_to_test(only_at_exit(), get("langgraph"), ("checkpoint.writing", "checkpoint.committed"))
    assert line.startswith("nothing to test: the crash-free run reached none of checkpoint.writing, "
                           "checkpoint.committed inside a step (1 checkpoint commit(s), none inside a step)")
    assert "durability='sync'" in line
    assert "@DBOS.step" in nothing_to_test(only_at_exit(), get("dbos"))
    assert "no checkpoint" in nothing_to_test(Evidence(run_id="b"), get("checkpoints"))


class NoPoints(Scenario):
    name = "no-points"

    def options(self, base):  # type: ignore[no-untyped-def, override]
        return base

    def agent(self, ctx):  # type: ignore[no-untyped-def, override]
        return None


def test_a_scenario_with_no_point_runs_nothing_and_is_unknown_with_the_reason() -> None:
    said: list[str] = []
    c = ctx(only_at_exit(), "langgraph", said)
    for scenario in (NoPoints(), DbCrash(), DeployDrain()):
        started = time.monotonic()
        assert scenario.run(c) == [] and scenario.random_plan(c, 8) == []  # no empty schedule drawn
        result = scenario.result([], started)
        assert result.outcome == "unknown" and "durability='sync'" in result.reason, result
    assert len(said) == 3 and all("nothing to test" in s for s in said)


def test_a_request_sent_before_its_steps_checkpoint_was_committed_is_noted_with_the_durability() -> None:
    """LangGraph's default durability='async': email's request reached the service before the checkpoint
    that starts email (cursor email, seq 1) was committed; with 'sync' it comes after, and nothing is said."""
    def run(effect_first: bool) -> Evidence:
        effect = Point(run_id="b", inc="b#1", point="effect.received", step="email", source="resend", nth=1)
        commit = Point(run_id="b", inc="b#1", point="checkpoint.committed", step="plan", source="sql-barrier",
                       nth=1, seq=1)
        return Evidence(run_id="b", events=[effect, commit] if effect_first else [commit, effect],
                        audit=[{"seq": 0, "cursor": "plan"}, {"seq": 1, "cursor": "email"}])

    note = late_checkpoint(run(True), get("langgraph"))
    assert note.startswith("note: email sent a request before its checkpoint was committed") and "durability='sync'" in note
    assert late_checkpoint(run(False), get("langgraph")) == ""
    said: list[str] = []
    assert NoPoints().step_points(ctx(run(True), "langgraph", said)) == {"email": ["effect.received"], "plan": ["checkpoint.committed"]}
    assert said == [f"no-points: {note}"]
