"""A worker's unanswered note and the request it sends next are journalled in the worker's order.

A SIGTERM handler's ``drain.signal`` note goes over the kill-point socket and is not answered, so the worker
sends its next request at once, on another socket that another harness thread reads: a clean-clone CI run
journalled the request first in one of two sessions replaying the same schedule, and their traces differed.
Here the harness's note handler is made slow, so that without `BarrierServer.caught_up` the request would be
journalled first every time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from killpoint.run.history import trace
from killpoint.run.trial import Session
from tests.helpers.harness import harness_session


@pytest.fixture(scope="module")
def session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """A session whose harness handles each ``drain.signal`` note 0.5 s late (a busy harness thread)."""
    with harness_session(pg_server, tmp_path_factory.mktemp("notes"), "test_note_order") as s:
        barrier = s.env.barrier
        handle = barrier._on_note

        def late(msg: dict) -> None:
            if msg.get("note") == "drain.signal":
                time.sleep(0.5)  # the fault injected: widen the window a scheduler sometimes opens
            handle(msg)

        barrier._on_note = late
        yield s


def rows(t_run_id: str, events: list) -> list[tuple]:
    return [(r[0], r[1], r[2], r[3], r[6]) for r in trace(events, replace={t_run_id: "<run>"})]


@pytest.mark.parametrize("schedule", ["charge:step.start:term", "email:step.start:term",
                                      "charge:effect.responded:kill,charge:step.start:term@2"])
def test_a_drain_signal_is_journalled_before_the_request_that_follows_it(session: Session, schedule: str) -> None:
    trial = session.trial(Schedule.parse(schedule), prefix="order")
    assert trial.outcome == "pass", trial.verdicts
    story = rows(trial.run_id, trial.evidence.events)
    signal = next(i for i, r in enumerate(story) if r[4] == "drain.signal")
    termed = story[signal][1]
    step = schedule.split(",")[-1].split(":")[0]
    received = [i for i, r in enumerate(story) if r[0] == "point" and r[1] == termed and r[2] == step
                and r[3] == "effect.received"]
    assert received, story
    assert all(signal < i for i in received), story[signal - 2: received[-1] + 1]
