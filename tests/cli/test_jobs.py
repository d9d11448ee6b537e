"""`-j N` runs a scenario's schedules at the same time and changes nothing a user reads: the same run ids,
progress lines, verdicts, verdicts.json and replay lines as `-j 1` for the same seed, through the CLI.

The agent is `tests.gallery.variants.no_email_key` (its email has no idempotency key), so the random
schedules both pass and fail, and a failing multi-fault schedule is shrunk: the comparison covers failure
blocks, seeds and replay lines, not only passes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from killpoint.cli.args import jobs
from killpoint.env.postgres import PostgresHandle
from killpoint.run.pool import WhileIdle, ordered
from tests.helpers.checks import describe
from tests.helpers.harness import BROKEN_AGENT
from tests.helpers.sandbox import Sandbox

ELAPSED = re.compile(r" *\b\d+\.\d+s\b")  # with its padding: "   9.5s" and "  10.2s" are alike


def normalised_stdout(text: str, run_dir: Path) -> str:
    """The output with what legitimately differs between two invocations (the run directory, timings) blanked."""
    return ELAPSED.sub(" <t>", text.replace(str(run_dir), "<run-dir>"))


def normalised_verdicts(run_dir: Path) -> list[dict]:
    scenarios = json.loads((run_dir / "verdicts.json").read_text())
    for s in scenarios:
        s.pop("elapsed", None)
    return scenarios


@pytest.mark.slow  # three CLI sweeps of 5 random schedules (and a shrink) each
def test_jobs_2_and_the_default_give_what_jobs_1_gives(pg_server: PostgresHandle, sandbox: Sandbox) -> None:
    """-j 2 and the default (the cores, and more while they idle: `run.pool.WhileIdle`) give what -j 1 gives."""
    seen = {}
    for j in ("1", "2", "default"):
        dsn = pg_server.create_database(f"test_jobs_{j}")  # a fresh database each: the same run ids are free
        try:
            out = sandbox.out / f"j{j}"
            proc = sandbox.run("explore", "--scenario", "crash-points", "--random", "5", "--seed", "3",
                               "--steps", BROKEN_AGENT, "--dsn", dsn, "--allow-any-dsn", "--out", str(out),
                               "--no-store", *(("-j", j) if j != "default" else ()))
        finally:
            pg_server.drop_database(f"test_jobs_{j}")
        assert proc.returncode == 1, describe(proc)
        (run_dir,) = list(out.iterdir())
        seen[j] = (normalised_stdout(proc.stdout, run_dir), proc.stderr.splitlines(), normalised_verdicts(run_dir))
    out1, progress1, verdicts1 = seen["1"]
    assert "replay:   killpoint replay --scenario crash-points" in out1 and "FAIL" in out1
    assert {t["outcome"] for s in verdicts1 for t in s["trials"]} == {"pass", "fail"}
    for out2, progress2, verdicts2 in (seen["2"], seen["default"]):
        assert out2 == out1
        assert [ln for ln in progress2 if "random [" in ln] == [ln for ln in progress1 if "random [" in ln]
        assert verdicts2 == verdicts1  # run ids, schedules, seeds, every checker's outcome and reason
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_a_bad_jobs_value_is_one_line_and_exit_2(sandbox: Sandbox) -> None:
    proc = sandbox.run("explore", "--scenario", "crash-points", "--exhaustive", "-j", "0")
    assert proc.returncode == 2, describe(proc)
    assert "jobs must be at least 1" in proc.stderr and "Traceback" not in proc.stderr
    assert not sandbox.out.exists() or not any(sandbox.out.iterdir())


def test_jobs_option_type() -> None:
    assert jobs("3") == 3
    for bad in ("0", "-1", "two", "65"):
        with pytest.raises(Exception, match="jobs must be"):
            jobs(bad)


def test_ordered_hands_results_back_in_order_whatever_ends_first() -> None:
    """Task 0 waits for task 2 to have run (a barrier of events, no sleep): it ends last, yet comes first."""
    import threading

    ran_last = threading.Event()
    said: list[int] = []

    def task(i: int) -> int:
        if i == 0:
            assert ran_last.wait(timeout=30)
        if i == 2:
            ran_last.set()
        return i * 10

    ordered([lambda i=i: task(i) for i in range(3)], 3, lambda i, r: said.append(r))
    assert said == [0, 10, 20]


def test_ordered_takes_a_window_of_tasks_not_the_whole_plan() -> None:
    """While task 0 runs, only the window (`AHEAD` x the width) is taken from the plan and started: task 0
    ends once index AHEAD*2-1 is taken, and when it is handed back nothing after that index has been taken.
    The rest are taken as results come back, and every result still comes in order."""
    import threading
    from collections.abc import Sequence

    from killpoint.run.pool import AHEAD

    taken: list[int] = []
    window_full = threading.Event()
    seen_at_first: list[int] = []

    class Plan(Sequence):
        def __len__(self) -> int:
            return 100

        def __getitem__(self, i: int):  # noqa: ANN204 - Sequence's signature
            if not 0 <= i < 100:
                raise IndexError(i)
            taken.append(i)
            if i == AHEAD * 2 - 1:
                window_full.set()
            return (lambda: window_full.wait(timeout=30) and 0) if i == 0 else (lambda: i)

    said: list[int] = []

    def first(i: int, r: int) -> None:
        if i == 0:
            seen_at_first.append(max(taken))
        said.append(r)

    ordered(Plan(), 2, first)
    assert said == list(range(100))
    assert seen_at_first == [AHEAD * 2 - 1]  # the window, and not one more while task 0 was not handed back
    assert sorted(taken) == list(range(100))


def looked_at_every_call(least: int, most: int, busy: list[float]) -> WhileIdle:
    """A `WhileIdle` whose cores read as `busy[0]` (the test changes it), looked at on every call."""
    width = WhileIdle(least, most, busy=lambda: busy[0])
    width.recheck = 0  # (the pool then waits for an end without a timeout)
    return width


def test_while_idle_lets_one_more_start_per_look_while_the_cores_idle_and_none_while_they_are_busy() -> None:
    busy = [0.0]
    width = looked_at_every_call(2, 8, busy)
    assert [width.now(n) for n in (0, 2, 3, 7, 8)] == [2, 3, 4, 8, 8]  # never under 2, never over 8
    busy[0] = 1.8  # 0.2 of 2 cores idle: less than half a core
    assert [width.now(n) for n in (0, 2, 5)] == [2, 2, 5]  # what runs keeps running; an end is not replaced
    busy[0] = 1.4
    assert width.now(5) == 6


def test_while_idle_tells_each_change_of_what_it_allows_and_only_changes() -> None:
    """`changed` hears every new width (what the session writes to the history as a `jobs` event), and
    nothing while the width stays."""
    busy, told = [0.0], []
    width = WhileIdle(2, 4, busy=lambda: busy[0], changed=told.append)
    width.recheck = 0
    widths = [width.now(n) for n in (2, 2, 3, 4, 4)]
    busy[0] = 2.0
    widths += [width.now(n) for n in (4, 3, 1)]
    assert widths == [3, 3, 4, 4, 4, 4, 3, 2]
    assert told == [3, 4, 3, 2]


def test_a_sessions_widening_is_written_to_its_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The session's gate (`Session.gate`: -j 2, up to 4 while the cores idle) writes each change of its
    width to history.jsonl as a `jobs` event, which `killpoint judge` and a reader of the history see."""
    from types import SimpleNamespace

    from killpoint.run import cores
    from killpoint.run.history import History
    from killpoint.run.options import RunOptions
    from killpoint.run.trial import Session

    monkeypatch.setattr(cores, "BusyCores", lambda: (lambda: 0.0))  # the cores read as idle
    history = History(tmp_path / "history.jsonl")
    session = Session(SimpleNamespace(), history, SimpleNamespace(), RunOptions(grace=1.0),  # type: ignore[arg-type]
                      jobs=2, jobs_most=4)
    session.gate.width.recheck = 0
    assert [session.gate.width.now(n) for n in (2, 3, 4)] == [3, 4, 4]
    history.close()
    lines = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    assert [(e["type"], e["allowed"], e["least"], e["most"]) for e in lines] == [("jobs", 3, 2, 4), ("jobs", 4, 2, 4)]
    assert [(e.allowed, e.least, e.most) for e in History.load(tmp_path / "history.jsonl")] == [(3, 2, 4), (4, 2, 4)]


@pytest.mark.parametrize(("busy", "widened"), [(0.0, True), (2.0, False)], ids=["idle", "busy"])
def test_ordered_under_while_idle_runs_more_than_the_cores_only_while_they_idle(busy: float, widened: bool) -> None:
    """Tasks that each wait until four of them run at once (a barrier, no sleep): with idle cores the pool
    widens from two to four and they all end; with busy cores it keeps to two, and the barrier's timeout
    breaks it (each task then ends at once)."""
    import threading

    barrier = threading.Barrier(4, timeout=30 if widened else 1)
    at_once: list[int] = []
    running = [0]
    lock = threading.Lock()

    def task(i: int) -> int:
        with lock:
            running[0] += 1
            at_once.append(running[0])
        try:
            barrier.wait()
            return i
        except threading.BrokenBarrierError:
            return -1
        finally:
            with lock:
                running[0] -= 1

    said: list[int] = []
    ordered([lambda i=i: task(i) for i in range(8)], looked_at_every_call(2, 4, [busy]), lambda _i, r: said.append(r))
    if widened:
        assert said == list(range(8)) and max(at_once) == 4
    else:
        assert max(at_once) == 2 and -1 in said


def test_ordered_stops_at_the_first_error_and_raises_it() -> None:
    started: list[int] = []

    def task(i: int) -> int:
        started.append(i)
        if i == 1:
            raise ValueError("boom")
        return i

    with pytest.raises(ValueError, match="boom"):
        ordered([lambda i=i: task(i) for i in range(4)], 1, lambda _i, _r: None)
    assert started == [0, 1]  # -j 1: nothing after the failing task starts


def test_the_server_a_session_starts_has_room_for_its_jobs(sandbox: Sandbox) -> None:
    """`-j 12` starts its Postgres with `capacity.needed(12)` = 124 connection slots, and says so where it says
    which Postgres it chose (Postgres's default 100 ran out at `-j 64` and refused workers mid-run)."""
    proc = sandbox.run("explore", "--scenario", "rollback-refusal", "--exhaustive", "-j", "12", "--no-store")
    assert proc.returncode == 0, describe(proc)
    assert re.search(r"(local|docker|embedded) Postgres at \S+, max_connections 124\)", proc.stderr), describe(proc)
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []
