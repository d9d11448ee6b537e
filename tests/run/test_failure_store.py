"""The failure store: failing schedules of an agent are replayed first on its next run, fixed ones leave,
another version of the agent (another digest) starts afresh, and no store means nothing is kept."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

from killpoint.checkers.evidence import Evidence
from killpoint.checkers.verdict import Verdict
from killpoint.env.stepmodule import AgentSpec, load
from killpoint.faults.schedule import Schedule
from killpoint.run.plans import run_plan
from killpoint.run.scenario import Context, Scenario
from killpoint.run.store import FailureStore, remember, replay
from killpoint.run.trial import Trial

AGENT = "tests.gallery.variants.tiny_agent"


class Judged(Scenario):
    """Trials judged by a rule: a schedule fails when it holds one of `bad`."""

    name = "judged"

    def __init__(self, bad: set[str]) -> None:
        self.bad, self.ran = bad, []

    def agent(self, ctx: Context) -> AgentSpec:
        return load(AGENT)

    def trial(self, ctx: Context, schedule: Schedule, seed: int | None = None) -> Trial:
        self.ran.append(str(schedule))
        fails = any(str(f) in self.bad for f in schedule)
        return Trial(f"judged-{len(self.ran)}", schedule, seed, Evidence("x"),
                     [Verdict("exactly_once", "fail" if fails else "pass", "dup" if fails else "ok")])


def ctx(said: list[str]) -> Context:
    return Context(session=None, say=said.append)  # type: ignore[arg-type]  # the rule needs no session


def test_failures_are_replayed_first_next_time_and_leave_when_fixed(tmp_path: Path) -> None:
    store, said = FailureStore(tmp_path / "failures"), []
    first = Judged({"email:step.start:kill"})
    trials = [first.trial(ctx(said), Schedule.parse(s)) for s in ("plan:step.start:kill", "email:step.start:kill")]
    assert replay(store, first, ctx(said)) == []  # nothing stored yet
    remember(store, first, ctx(said), trials)
    path = store.path(load(AGENT))
    assert path.name == f"{AGENT}-{load(AGENT).digest}.json"
    assert json.loads(path.read_text()) == {"judged": ["email:step.start:kill"]}

    again = Judged({"email:step.start:kill"})
    replayed = replay(store, again, ctx(said))
    assert again.ran == ["email:step.start:kill"] and replayed[0].outcome == "fail"
    assert "judged: stored failure [1/1] email:step.start:kill -> fail" in said

    fixed = Judged(set())
    remember(store, fixed, ctx(said), replay(store, fixed, ctx(said)))
    assert replay(store, Judged(set()), ctx(said)) == []  # a schedule that passes now leaves the store


def test_no_store_and_negative_controls_keep_nothing(tmp_path: Path) -> None:
    sc = Judged({"plan:step.start:kill"})
    failing = [sc.trial(ctx([]), Schedule.parse("plan:step.start:kill"))]
    remember(None, sc, ctx([]), failing)  # --no-store
    assert replay(None, sc, ctx([])) == []
    store = FailureStore(tmp_path / "failures")
    sc.expected_finding = True
    remember(store, sc, ctx([]), failing)
    assert not (tmp_path / "failures").exists()


def test_another_digest_or_an_unreadable_file_starts_afresh(tmp_path: Path) -> None:
    store = FailureStore(tmp_path / "failures")
    agent = load(AGENT)
    store.update(agent, "judged", [Schedule.parse("plan:step.start:kill")], [])
    other = replace(agent, digest="0" * 16)  # the same module, edited
    assert store.schedules(other, "judged") == []
    store.path(agent).write_text("{not json")
    assert store.schedules(agent, "judged") == []


def test_under_shards_each_stored_failure_is_replayed_by_exactly_one_shard(tmp_path: Path) -> None:
    from killpoint.faults.shard import parse as parse_shard

    store = FailureStore(tmp_path / "failures")
    bad = {f"{step}:{point}:kill" for step in ("plan", "email")  # the tiny agent's steps
           for point in ("step.start", "checkpoint.writing", "checkpoint.committed")}
    first = Judged(bad)
    remember(store, first, ctx([]), [first.trial(ctx([]), Schedule.parse(s)) for s in sorted(bad)])
    ran: list[str] = []
    for k in (1, 2):
        sc = Judged(bad)
        replay(store, sc, Context(session=None, say=[].append, shard=parse_shard(f"{k}/2")))  # type: ignore[arg-type]
        ran.extend(sc.ran)
        assert 0 < len(sc.ran) < len(bad)  # split between the shards, not replayed by both
    assert sorted(ran) == sorted(bad)  # together: each stored failure once


def worker_ctx(cmd: str, adapter: str) -> Context:
    env = SimpleNamespace(worker_cmd=cmd, adapter=SimpleNamespace(name=adapter))
    return Context(session=SimpleNamespace(env=env), say=[].append)  # type: ignore[arg-type]


def test_each_worker_command_has_its_own_file_named_after_it(tmp_path: Path) -> None:
    """A LangGraph graph and a DBOS workflow run against the same (reference) step names never share a file,
    nor the reference agent's; a change to a worker's program is a new version of it."""
    graph, flow = tmp_path / "invoice_graph.py", tmp_path / "invoice_workflow.py"
    graph.write_text("# v1\n")
    flow.write_text("# v1\n")
    store, sc = FailureStore(tmp_path / "failures"), Judged({"plan:step.start:kill"})
    failing = [sc.trial(ctx([]), Schedule.parse("plan:step.start:kill"))]
    contexts = [worker_ctx(f"python {graph} {{run_id}}", "langgraph"), worker_ctx(f"python {flow} {{run_id}}", "dbos")]
    for c in contexts:
        remember(store, sc, c, failing)
    names = sorted(p.name for p in (tmp_path / "failures").iterdir())
    assert [n.rsplit("-", 1)[0] for n in names] == ["worker-invoice_graph.py", "worker-invoice_workflow.py"], names
    assert not (tmp_path / "failures" / f"{AGENT}-{load(AGENT).digest}.json").exists()
    assert [str(t.schedule) for t in replay(store, Judged(set()), contexts[0])] == ["plan:step.start:kill"]
    graph.write_text("# v2\n")  # another version of the graph starts afresh
    assert replay(store, Judged(set()), contexts[0]) == []


def test_a_stored_failure_replayed_first_is_not_run_again_by_the_plan(tmp_path: Path) -> None:
    """A failing run's next run replays its stored failures first; its sweep holds the same schedules, and
    ran them again (a trial judged twice). Now the plan leaves them out, says so, and the trials add up to the
    plan; where a trial is not a function of its schedule (`judged_once` False) it runs them as before."""
    store, said = FailureStore(tmp_path / "failures"), []
    first = Judged({"email:step.start:kill"})
    remember(store, first, ctx(said), [first.trial(ctx(said), Schedule.parse("email:step.start:kill"))])
    plan = [(None, Schedule.parse(s))
            for s in ("plan:step.start:kill", "email:step.start:kill", "email:step.start:term")]

    again, c = Judged({"email:step.start:kill"}), ctx(said)
    stored = replay(store, again, c)
    trials = run_plan(again, c, plan, lambda i, _seed, schedule, trial: f"[{i}] {schedule} -> {trial.outcome}")
    assert again.ran == ["email:step.start:kill", "plan:step.start:kill", "email:step.start:term"]
    assert [str(t.schedule) for t in [*stored, *trials]] == ["email:step.start:kill", "plan:step.start:kill",
                                                           "email:step.start:term"]
    assert ("judged: 1 of this plan's schedules were replayed from the failure store first, not run again: "
            "email:step.start:kill") in said

    varies, c = Judged({"email:step.start:kill"}), ctx([])
    varies.judged_once = False
    replay(store, varies, c)
    run_plan(varies, c, plan, lambda i, _seed, schedule, trial: "")
    assert varies.ran.count("email:step.start:kill") == 2
