"""The history: an append-only JSONL journal, safe from many threads, readable after the writer is SIGKILLed;
and the trace, which keeps what happened and drops times, pids and run ids."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from killpoint.events import Event, decode
from killpoint.run.history import History, trace


def test_append_numbers_times_and_writes_each_event(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    h = History(path)
    a = h.append("run.begin", run_id="r-1", schedule="")
    b = h.append("point", run_id="r-1", inc="r-1#1", step="plan", point="step.start", pid=42)
    assert (a["i"], b["i"]) == (0, 1) and 0 <= a["t"] <= b["t"]
    assert History.load(path) == [a, b]  # on disk before close: every line is flushed
    assert h.events("point") == [b] and list(h) == [a, b]
    h.close()
    h.close()  # idempotent
    assert History.load(path) == [a, b]


def test_one_runs_events_and_the_events_since_an_index_are_what_a_full_read_filters_to() -> None:
    """`of_run` and `since` (read on every trial, and every 20 ms while a frozen worker's successor runs)
    answer what filtering the whole journal answers, from the run's own list and a slice."""
    h = History()
    for n in range(30):
        h.append("point", run_id=f"r-{n % 3}", inc=f"r-{n % 3}#1", point="step.start")
        if n % 5 == 0:
            h.append("note", note="no run")
            h.append("inc.start", run_id=f"r-{n % 3}", inc=f"r-{n % 3}#2", pid=n)
    everything = h.events()
    for run in ("r-0", "r-1", "r-2", "r-9"):
        assert h.of_run(run) == [e for e in everything if e.get("run_id") == run]
        assert h.of_run(run, "inc.start") == [e for e in everything if e.get("run_id") == run and e["type"] == "inc.start"]
    assert len(h) == len(everything)
    mark = len(h)
    later = [h.append("point", run_id="r-1", inc="r-1#3", point="step.start") for _ in range(3)]
    assert h.since(mark) == later and h.since(len(h)) == []


def test_a_forgotten_run_leaves_memory_not_the_file_nor_the_numbering(tmp_path: Path) -> None:
    """`forget(run)` (the CLI forgets each run once judged): the run's events leave memory (`of_run`,
    `events`, `since`, iteration) while the file keeps them; `len`, every `i` and what the other runs
    hold are unchanged; and over thousands of forgotten runs what is held stays bounded."""
    path = tmp_path / "history.jsonl"
    h = History(path)
    for n in range(2000):
        run = f"r-{n}"
        h.append("run.begin", run_id=run, schedule="")
        h.append("point", run_id=run, inc=f"{run}#1", point="step.start")
        if n != 5:
            h.forget(run)
        assert len(h._events) <= 2 * 2 + 4  # noqa: SLF001 -- forgotten events are dropped in batches
    assert len(h) == 4000 and len(History.load(path)) == 4000
    kept = h.of_run("r-5")
    assert [e.i for e in kept] == [10, 11] and h.events() == kept and list(h) == kept
    assert h.of_run("r-6") == [] and h.since(11) == [kept[1]] and h.since(12) == []
    assert h.seen("run.begin") and not h.seen("fault")
    late = h.append("point", run_id="r-5", inc="r-5#2", point="step.start")
    assert late.i == 4000 and h.since(4000) == [late]
    h.close()


def test_repeated_short_strings_are_held_once_and_long_ones_as_they_are(tmp_path: Path) -> None:
    """A session holds its events in memory: the keys and short values thousands of them repeat (run ids,
    incarnation ids, steps, points) are one shared copy each, in memory and when read back from the file."""
    path = tmp_path / "history.jsonl"
    h = History(path)
    long = "x" * 200
    a = h.append("point", run_id="r-7", inc="r-7#1", step="charge", point="effect.applied", payload={"body": long})
    b = h.append("point", run_id="r-7", inc="r-7#1", step="charge", point="effect.applied", payload={"body": long})
    for key in ("run_id", "inc", "step", "point"):
        assert a[key] is b[key], key
    assert next(k for k in a if k == "step") is next(k for k in b if k == "step")
    assert a["payload"]["body"] == b["payload"]["body"] == long
    c, d = History.load(path)
    assert (c, d) == (a, b) and c["run_id"] is d["run_id"] is a["run_id"]
    h.close()


def test_in_memory_history_needs_no_file() -> None:
    h = History()
    h.append("note", note="x")
    assert [e["type"] for e in h] == ["note"]
    h.close()


def test_appends_from_many_threads_are_serialised(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    h = History(path)
    threads, per_thread = 8, 200
    start = threading.Barrier(threads)

    def writer(n: int) -> None:
        start.wait()
        for k in range(per_thread):
            h.append("note", thread=n, k=k, payload="x" * 50)

    pool = [threading.Thread(target=writer, args=(n,)) for n in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    h.close()
    events = History.load(path)
    assert [e["i"] for e in events] == list(range(threads * per_thread))
    assert [e["t"] for e in events] == sorted(e["t"] for e in events)
    for n in range(threads):  # each thread's own events stay in its order
        assert [e["k"] for e in events if e["thread"] == n] == list(range(per_thread))


WRITER = """
import sys
from killpoint.run.history import History
h = History(sys.argv[1])
for k in range(int(sys.argv[2])):
    h.append("note", k=k, text="line " * 20)
print("written", flush=True)
sys.stdin.read()  # wait to be killed, the file still open
"""


def test_journal_of_a_sigkilled_writer_is_whole(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "500"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=10) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    raw = path.read_text()
    assert raw.endswith("\n")
    assert [e["k"] for e in map(json.loads, raw.splitlines())] == list(range(500))


def test_history_appends_to_an_existing_journal(tmp_path: Path) -> None:
    path = tmp_path / "history.jsonl"
    with open(path, "w") as fh:
        fh.write(json.dumps({"i": 0, "t": 0.0, "type": "note"}) + "\n")
    h = History(path)
    h.append("run.begin")
    h.close()
    assert [e["type"] for e in History.load(path)] == ["note", "run.begin"]


def _run(run_id: str, pid: int, t0: float) -> list[Event]:
    inc = f"{run_id}#1"
    return [_event(e) for e in [
        {"i": 0, "t": t0, "type": "run.begin", "run_id": run_id, "schedule": "email:effect.applied:kill"},
        {"i": 1, "t": t0 + 0.1, "type": "inc.start", "run_id": run_id, "inc": inc, "pid": pid, "role": "worker"},
        {"i": 2, "t": t0 + 0.2, "type": "point", "run_id": run_id, "inc": inc, "step": "email",
         "point": "effect.applied", "nth": 1, "source": "mailer"},
        {"i": 3, "t": t0 + 0.21, "type": "effect", "run_id": run_id, "key": f"{run_id}:email", "id": f"em_{pid}"},
        {"i": 4, "t": t0 + 0.3, "type": "fault", "run_id": run_id, "inc": inc, "step": "email",
         "point": "effect.applied", "action": "kill", "nth": 1},
        {"i": 5, "t": t0 + 0.4, "type": "inc.end", "run_id": run_id, "inc": inc, "exit_code": None, "signal": 9},
    ]]


def _event(obj: dict) -> Event:
    e = decode(obj)
    assert e is not None, obj
    return e


def test_trace_ignores_times_pids_and_run_ids() -> None:
    a = trace(_run("run-1", 100, 0.0), replace={"run-1": "<run>"})
    b = trace(_run("run-9", 200, 5.0), replace={"run-9": "<run>"})
    assert a == b
    assert ("point", "<run>#1", "email", "effect.applied") == a[2][:4]
    assert all(row[0] != "effect" for row in a)  # service-side evidence is the checkers' business
    assert len(a) == 5


def test_trace_sees_what_happened() -> None:
    events = _run("run-1", 100, 0.0)
    base = trace(events, replace={"run-1": "<run>"})
    for i, change in [(4, {"action": "term"}), (5, {"signal": None, "exit_code": 0}), (2, {"point": "effect.received"}),
                      (2, {"nth": 2}), (1, {"inc": "run-1#2"})]:
        other = [dict(e) for e in events]
        other[i].update(change)
        assert trace([_event(e) for e in other], replace={"run-1": "<run>"}) != base, change


def test_an_unknown_event_kind_is_refused(tmp_path: Path) -> None:
    h = History(tmp_path / "history.jsonl")
    with pytest.raises(ValueError, match="unknown history event kind"):
        h.append("no.such.kind")
    h.close()
    assert History.load(tmp_path / "history.jsonl") == []
