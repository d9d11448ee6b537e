"""The interpreter lands every kill exactly where the schedule says, every time.

For a kill at STEP:POINT the journal must show the `fault` at that step and point, then, as the run's next
event, the end of that incarnation by signal 9, and no later point of that incarnation; the run then
resumes in a new incarnation and passes every crash checker. Checked at each of the reference agent's 23
(step, point) pairs, and at 4 representative pairs 5 times each: 23 + 4 x 4 = 39 kills.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from killpoint.env.barrier import BarrierServer
from killpoint.env.postgres import PostgresHandle
from killpoint.faults.schedule import Schedule
from killpoint.run.history import History
from killpoint.run.trial import Session, Trial, step_points
from tests.helpers.harness import harness_session, run_events

REFERENCE_PAIRS = 23
REPEATS = 5
REPRESENTATIVE = ["plan:model.request", "charge:effect.applied", "email:effect.responded", "record:checkpoint.writing"]


@pytest.fixture(scope="module")
def session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    with harness_session(pg_server, tmp_path_factory.mktemp("interpreter"), "test_interpreter") as s:
        yield s


def pairs(session: Session) -> list[str]:
    return [f"{s}:{p}" for s, points in step_points(session.baseline()).items() for p in points]


def assert_kill_landed(trial: Trial, step: str, point: str) -> None:
    events = run_events(trial.evidence.events, trial.run_id)
    faults = [i for i, e in enumerate(events) if e["type"] == "fault"]
    assert len(faults) == 1, events
    at = faults[0]
    f = events[at]
    assert (f["step"], f["point"], f["action"], f["nth"]) == (step, point, "kill", 1)
    inc = f["inc"]
    # the point itself was reached by that incarnation just before
    reached = events[at - 1]
    assert (reached["type"], reached["step"], reached["point"], reached["inc"]) == ("point", step, point, inc)
    # the next event of the run is that incarnation's end, by SIGKILL
    end = events[at + 1]
    assert (end["type"], end["inc"], end["signal"], end["exit_code"]) == ("inc.end", inc, 9, None), events[at:]
    # and it reached nothing after the fault
    assert [e for e in events[at:] if e.get("inc") == inc and e["type"] in ("point", "note")] == []
    # the run resumed in a new incarnation (unless the kill came after its final commit) and ended well
    final_commit = (step, point) == ("record", "checkpoint.committed")
    assert events[at + 2]["type"] == ("run.end" if final_commit else "inc.start"), events[at:]
    assert trial.outcome == "pass", [v for v in trial.verdicts if v.outcome != "pass"]


def test_reference_agent_has_23_pairs(session: Session) -> None:
    got = pairs(session)
    assert len(got) == REFERENCE_PAIRS and len(set(got)) == REFERENCE_PAIRS, got
    assert set(REPRESENTATIVE) <= set(got)


@pytest.mark.parametrize("repeat", range(REPEATS))
def test_kill_lands_at_every_point(session: Session, repeat: int) -> None:
    """Repeat 0 kills at every pair; repeats 1-4 at the representative pairs."""
    targets = pairs(session) if repeat == 0 else REPRESENTATIVE
    for target in targets:
        step, point = target.split(":")
        trial = session.trial(Schedule.parse(f"{target}:kill"), prefix=f"kill{repeat}")
        assert_kill_landed(trial, step, point)


def test_kill_at_second_occurrence_lands_in_the_resumed_incarnation(session: Session) -> None:
    trial = session.trial(Schedule.parse("email:step.start:kill,email:step.start:kill@2"), prefix="nth")
    events = run_events(trial.evidence.events, trial.run_id)
    faults = [e for e in events if e["type"] == "fault"]
    assert [(f["nth"], f["inc"]) for f in faults] == [(1, f"{trial.run_id}#1"), (2, f"{trial.run_id}#2")]
    starts = [e["inc"] for e in events if e["type"] == "point" and e["step"] == "email" and e["point"] == "step.start"]
    assert starts == [f"{trial.run_id}#1", f"{trial.run_id}#2", f"{trial.run_id}#3"]
    assert trial.outcome == "pass", trial.verdicts


def test_run_dir_journal_matches_memory(session: Session) -> None:
    path = Path(session.env.run_dir) / "history.jsonl"
    on_disk = History.load(path)
    assert on_disk == session.history.events()[: len(on_disk)] and len(on_disk) >= REFERENCE_PAIRS


def test_every_incarnation_is_bracketed_by_its_start_and_end(session: Session) -> None:
    """In the journal, an incarnation's first event is its inc.start and its last its inc.end: a forked
    worker's first report and the end of a quick death are both recorded in order."""
    session.trial(Schedule.parse("plan:step.start:kill"), prefix="bracket")
    by_inc: dict[str, list[str]] = {}
    for e in session.history.events():
        if e.get("inc"):
            by_inc.setdefault(e["inc"], []).append(e["type"])
    assert len(by_inc) >= 3
    bad = {inc: types for inc, types in by_inc.items() if types[0] != "inc.start" or types[-1] != "inc.end"
           or types.count("inc.start") != 1 or types.count("inc.end") != 1}
    assert bad == {}


NOTE_AND_EXIT = """
import json, os, socket, sys
sock = socket.socket(socket.AF_UNIX)
sock.connect(sys.argv[1])
sock.sendall((json.dumps({"v": 1, "kind": "note", "note": "run.done", "incarnation": "r#1"}) + "\\n").encode())
"""


def test_barrier_settles_a_dead_workers_last_note_before_its_end(tmp_path: Path) -> None:
    """A worker's last note can still be unread when its exit is known; `settle(pid)` waits for it."""
    order: list[str] = []
    entered, release = threading.Event(), threading.Event()

    def on_note(msg: dict) -> None:
        entered.set()
        assert release.wait(timeout=30)
        order.append(msg["note"])

    with BarrierServer(tmp_path / "kp.sock", lambda msg: True, on_note) as server:
        proc = subprocess.Popen([sys.executable, "-c", NOTE_AND_EXIT, str(server.path)])
        assert proc.wait(timeout=60) == 0 and entered.wait(timeout=30)  # gone; its note held in our handler
        settler = threading.Thread(target=lambda: (server.settle(proc.pid), order.append("settled")))
        settler.start()
        settler.join(timeout=0.5)
        assert settler.is_alive(), "settle returned while the worker's note was still unhandled"
        release.set()
        settler.join(timeout=10)
        assert order == ["run.done", "settled"]
        server.settle(2**22 + 1, timeout=10)  # no connection from that pid: nothing to wait for
