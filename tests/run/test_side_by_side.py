"""Scenarios side by side (`run.side_by_side`, `run.gate`): which run alone and which at once, the session's
width shared between them, a stop that reaches every scenario, and the findings of an interrupted run
split by scenario. Threads synchronise on events and barriers, never on sleeps."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from killpoint.cli.interrupted import Progress
from killpoint.run.gate import Gate, GateClosed
from killpoint.run.side_by_side import lanes, run_all

WAIT = 30  # seconds: a bound on waiting for a thread, never a pace


@dataclass
class Sc:
    name: str
    side_by_side: bool


SUITE = [Sc("concurrent-runs", False), Sc("crash-points", True), Sc("db-crash", False), Sc("flaky-services", True),
         Sc("fleet", False), Sc("zombie-worker", True)]


def until(condition: Callable[[], bool]) -> None:
    """Wait for `condition` (another thread's state, read where it has no event of its own), at most `WAIT`."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the other thread never got there"
        threading.Event().wait(0.001)


def names(scs: list[Sc]) -> list[str]:
    return [sc.name for sc in scs]


def test_the_alone_ones_run_first_in_order_then_the_rest_at_once() -> None:
    alone, beside = lanes(SUITE, wide=True)
    assert names(alone) == ["concurrent-runs", "db-crash", "fleet"]
    assert names(beside) == ["crash-points", "flaky-services", "zombie-worker"]


def test_one_at_a_time_when_not_wide_or_when_only_one_could_go_beside_another() -> None:
    assert lanes(SUITE, wide=False) == (SUITE, [])
    few = [Sc("db-crash", False), Sc("crash-points", True), Sc("fleet", False)]
    assert lanes(few, wide=True) == (few, [])  # a suite's order is kept when nothing would overlap


def test_the_gate_holds_the_whole_session_to_its_width() -> None:
    """Six threads ask for a slot of a width-2 gate: two get in and stay in (they wait on `release`), the rest
    wait; the most ever in at once is 2, and all six get in once the first ones leave."""
    gate = Gate(2)
    inside, most, lock = [0], [0], threading.Lock()
    two_in = threading.Barrier(3)
    release = threading.Event()

    def worker(i: int) -> None:
        with gate.slot():
            with lock:
                inside[0] += 1
                most[0] = max(most[0], inside[0])
            if i < 2:
                two_in.wait(WAIT)
                assert release.wait(WAIT)
            with lock:
                inside[0] -= 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    two_in.wait(WAIT)  # the first two hold their slots
    late = [threading.Thread(target=worker, args=(i,)) for i in range(2, 6)]
    for t in late:
        t.start()
    assert inside[0] == 2
    release.set()
    for t in threads + late:
        t.join(WAIT)
    assert most[0] == 2 and inside[0] == 0


def test_slots_are_given_in_the_order_they_were_asked_for() -> None:
    """With one slot held, three threads ask in turn (each asks once the one before is waiting); they get in
    in that order."""
    gate = Gate(1)
    order: list[int] = []
    hold = threading.Event()
    holding = threading.Event()

    def holder() -> None:
        with gate.slot():
            holding.set()
            assert hold.wait(WAIT)

    def asker(i: int) -> None:
        with gate.slot():
            order.append(i)

    first = threading.Thread(target=holder)
    first.start()
    assert holding.wait(WAIT)
    askers = []
    for i in range(3):
        t = threading.Thread(target=asker, args=(i,))
        t.start()
        askers.append(t)
        until(lambda i=i: gate._asked >= i + 2)  # noqa: SLF001 - its ticket taken: it waits in turn
    hold.set()
    for t in [first, *askers]:
        t.join(WAIT)
    assert order == [0, 1, 2]


def test_a_closed_gate_refuses_every_waiter_and_every_later_ask() -> None:
    gate = Gate(1)
    holding, hold = threading.Event(), threading.Event()
    refused: list[str] = []

    def holder() -> None:
        with gate.slot():
            holding.set()
            assert hold.wait(WAIT)

    def waiter() -> None:
        try:
            with gate.slot():
                refused.append("admitted")
        except GateClosed:
            refused.append("refused")

    t1 = threading.Thread(target=holder)
    t1.start()
    assert holding.wait(WAIT)
    t2 = threading.Thread(target=waiter)
    t2.start()
    until(lambda: gate._asked >= 2)  # noqa: SLF001 - the waiter took its ticket
    gate.close()
    t2.join(WAIT)
    hold.set()
    t1.join(WAIT)
    assert refused == ["refused"]
    with pytest.raises(GateClosed), gate.slot():
        pass


def test_the_first_error_stops_the_other_scenarios_and_is_raised_once_they_end() -> None:
    """`crash-points` raises once `zombie-worker` holds a slot; `zombie-worker` is let go only after the gate
    closed, and its next trial is refused; `flaky-services` never gets a slot. The error is raised; the
    scenario stopped by the closed gate adds nothing."""
    gate = Gate(2)
    zombie_in, closed = threading.Event(), threading.Event()
    ran: list[str] = []

    def one(sc: Sc, _beside: bool) -> None:
        if sc.name == "crash-points":
            assert zombie_in.wait(WAIT)
            with gate.slot():
                raise RuntimeError("Postgres is gone")
        if sc.name == "zombie-worker":
            with gate.slot():
                zombie_in.set()
                until(lambda: gate._closed)  # noqa: SLF001 - the crash-points error closed it
                closed.set()
            with gate.slot():
                ran.append("zombie-worker: a second trial")
        if sc.name == "flaky-services":
            assert closed.wait(WAIT)
            with gate.slot():
                ran.append("flaky-services")

    beside = [Sc("crash-points", True), Sc("zombie-worker", True), Sc("flaky-services", True)]
    with pytest.raises(RuntimeError, match="Postgres is gone"):
        run_all(beside, True, one, gate)
    assert ran == []


def test_an_interrupted_run_splits_its_trials_by_the_scenarios_in_progress() -> None:
    """Two scenarios side by side when Ctrl-C came: each is `interrupted` with the trials of its own run ids;
    a finished one keeps its result."""
    from killpoint.run.scenario import ScenarioResult

    session = SimpleNamespace(trials=[])
    progress = Progress()
    progress.begin("db-crash", session)
    session.trials.append(SimpleNamespace(run_id="db-crash-1", outcome="pass"))
    progress.results.append(ScenarioResult("db-crash", "pass", list(session.trials), 1.0))
    progress.begin("crash-points", session)
    progress.begin("zombie-worker", session)
    session.trials += [SimpleNamespace(run_id=r, outcome="pass") for r in
                       ("crash-points-1", "zombie-worker-1", "crash-points-2", "zombie-worker-2", "crash-points-3")]
    out = {r.name: r for r in progress.so_far(session, "SIGINT")}
    assert out["db-crash"].outcome == "pass"
    assert [t.run_id for t in out["crash-points"].trials] == ["crash-points-1", "crash-points-2", "crash-points-3"]
    assert [t.run_id for t in out["zombie-worker"].trials] == ["zombie-worker-1", "zombie-worker-2"]
    assert out["zombie-worker"].outcome == "interrupted" and "after 2 trials" in out["zombie-worker"].reason


def test_an_interrupted_run_lists_its_scenarios_in_the_suites_order_not_the_order_they_finished() -> None:
    """Side by side, flaky-services finished before crash-points, which was still going with zombie-worker:
    the findings so far list them as the suite does (and as a finished run's summary does), whatever finished
    first; a scenario the order does not name goes last."""
    from killpoint.run.scenario import ScenarioResult

    session = SimpleNamespace(trials=[])
    progress = Progress(order=["crash-points", "flaky-services", "zombie-worker"])
    for name in ("zombie-worker", "crash-points", "flaky-services", "own-scenario"):
        progress.begin(name, session)
    progress.results += [ScenarioResult("own-scenario", "pass", [], 1.0),
                         ScenarioResult("flaky-services", "pass", [], 1.0)]
    listed = [(r.name, r.outcome) for r in progress.so_far(session, "SIGINT")]
    assert listed == [("crash-points", "interrupted"), ("flaky-services", "pass"),
                      ("zombie-worker", "interrupted"), ("own-scenario", "pass")]


def test_a_scenarios_share_of_the_time_is_divided_by_the_trials_in_flight() -> None:
    """On a clock the test moves: A alone for 2 s (2 s of A's), then A and B one trial each for 2 s (1 s each),
    then B with two trials beside A's one for 3 s (A 1 s, B 2 s), then nothing runs for 5 s (no one's)."""
    now = [0.0]
    gate = Gate(4, clock=lambda: now[0])
    a1 = gate.slot("crash-points")
    a1.__enter__()
    now[0] = 2.0
    b1, b2 = gate.slot("zombie-worker"), gate.slot("zombie-worker")
    b1.__enter__()
    now[0] = 4.0
    b2.__enter__()
    now[0] = 7.0
    for held in (a1, b1, b2):
        held.__exit__(None, None, None)
    now[0] = 12.0
    assert gate.share("crash-points") == pytest.approx(2 + 1 + 1)
    assert gate.share("zombie-worker") == pytest.approx(1 + 2)
    assert gate.share("flaky-services") == 0.0


def test_a_scenario_beside_others_spends_its_budget_in_its_share_not_the_wall_clock() -> None:
    from killpoint.run.context import Context

    share = [0.0]
    ctx = Context(session=SimpleNamespace(), budget=4.0, started=0.0)  # type: ignore[arg-type]
    assert ctx.over_budget()  # the wall clock: a monotonic clock is far past 4 s since 0
    ctx.share = lambda: share[0]
    assert not ctx.over_budget()
    share[0] = 4.5
    assert ctx.over_budget()


def test_a_crash_free_run_is_named_by_what_it_runs_not_by_who_asked_first() -> None:
    """Two side-by-side scenarios that need different crash-free runs (non-idempotent-downstream's own agent,
    shared-account's parameters) ask for them in whichever order their threads get there: the ids' prefix is
    a digest of module and parameters, pinned here so it is the same on any machine."""
    from killpoint.env.stepmodule import AgentSpec
    from killpoint.run.options import RunOptions
    from killpoint.run.trial import Session

    def agent(module: str, path: str | None = None) -> AgentSpec:
        return AgentSpec(module, "plan", ("plan",), 1, "d" * 64, None, path=path)

    own, webhook = agent("acme.steps"), agent("acme.webhook")
    session = SimpleNamespace(agent=own, options=RunOptions(params={"month": "2026-11"}))
    prefix = lambda options, a: Session.baseline_prefix(session, options, a)  # noqa: E731
    assert prefix(RunOptions(params={"month": "2026-11"}, budget_cap=40.0), own) == "baseline"  # a cap is no other run
    other = prefix(RunOptions(), webhook)
    assert other == prefix(RunOptions(), webhook) == "baseline-b000eb", other
    assert prefix(RunOptions(params={"month": "2026-12"}), own) not in ("baseline", other)
    assert prefix(session.options, agent("acme.steps", "/tmp/v1")) == prefix(session.options, agent("acme.steps", "/x"))
