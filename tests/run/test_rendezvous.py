"""The rendezvous of concurrent-runs (harness/run/rendezvous.py), on threads standing in for the runs'
barrier threads: all go on together, a missing run breaks it once (and only costs its timeout), a run
repeating a step or arriving after the break is not held, and `close` lets the held ones go."""

from __future__ import annotations

import threading
import time

from killpoint.run.rendezvous import Rendezvous


def arriving(rv: Rendezvous, run_id: str, step: str) -> threading.Thread:
    """`run_id` arrives at `step` on a thread of its own; returns once the rendezvous counts it."""
    t = threading.Thread(target=rv.arrive, args=(run_id, step), daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while run_id not in rv._arrived.get(step, set()):  # counted: it is waiting (or went on)
        assert time.monotonic() < deadline, f"{run_id} never arrived"
        time.sleep(0.001)
    return t


def test_the_runs_go_on_together_once_the_last_one_arrives_and_are_told_so() -> None:
    told: list[tuple[str, str, list[str]]] = []
    rv = Rendezvous(["a", "b", "c"], timeout=60, told=lambda *args: told.append(args))
    a, b = arriving(rv, "a", "plan"), arriving(rv, "b", "plan")
    assert a.is_alive() and b.is_alive() and told == []  # held until c comes
    rv.arrive("c", "plan")  # the last one does not wait
    a.join(10)
    b.join(10)
    assert not a.is_alive() and not b.is_alive()
    assert told == [("together", "plan", ["a", "b", "c"])] and rv.together == ["plan"] and rv.missing is None
    rv.arrive("a", "plan")  # a resumed incarnation repeating the step goes on at once
    rv.arrive("zz", "book")  # so does a run not of the set


def test_a_run_that_does_not_come_breaks_the_rendezvous_once() -> None:
    told: list[tuple[str, str, list[str]]] = []
    rv = Rendezvous(["a", "b", "c"], timeout=0.2, told=lambda *args: told.append(args))
    started = time.monotonic()
    a = arriving(rv, "a", "book")
    rv.arrive("b", "book")  # waits for c, which never comes, for the timeout
    a.join(10)
    assert time.monotonic() - started >= 0.2 and not a.is_alive()
    assert rv.broken and rv.missing == ("book", ["c"]) and told == [("broken", "book", ["c"])]
    for run, step in (("c", "book"), ("a", "close"), ("b", "close")):  # held no more
        rv.arrive(run, step)
    assert rv.together == [] and len(told) == 1


def test_close_lets_the_held_runs_go() -> None:
    rv = Rendezvous(["a", "b"], timeout=60)
    a = arriving(rv, "a", "open")
    assert a.is_alive()
    rv.close()
    a.join(10)
    assert not a.is_alive() and rv.broken
