"""What reading a trial's evidence costs as a session grows: the whole journal filtered vs the run's own events.

    python bench/history.py [--events-per-trial 150] [--trials 100,1000,10000]

After each trial the harness reads that run's evidence back from the history (`evidence.record` ->
`from_history`). Read by filtering every event of the session, the read grows with the session: a long
exploration (thousands of random schedules) pays more per trial the longer it has run. Read from the
run's own list (`History.of_run`), it costs what it returns. For each session length this fills an
in-memory History with trials of the given size (the event kinds and fields of a real trial, a
`run.evidence` and its records last), then times one evidence read of the last trial both ways, in this
one process, and prints the medians and their ratio (the full scan as the baseline), and the memory the
session's events hold (the growth of this process's RSS while they were appended).
A benchmark, not a test: it asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time

import psutil

from killpoint.run.evidence import from_history
from killpoint.run.history import History


def fill(history: History, trials: int, per_trial: int) -> str:
    """Append `trials` trials of about `per_trial` events each; the last trial's run id."""
    run_id = ""
    for n in range(trials):
        run_id = f"crash-points-{n}"
        history.append("run.begin", run_id=run_id, schedule="charge:effect.applied:kill", steps="x")
        history.append("inc.start", run_id=run_id, inc=f"{run_id}#1", role="worker", pid=n)
        for k in range(max(0, per_trial - 8)):
            history.append("point", run_id=run_id, inc=f"{run_id}#1", step="charge", point="step.start", nth=k,
                           source="worker")
        history.append("inc.end", run_id=run_id, inc=f"{run_id}#1", exit_code=0, signal=None)
        history.append("run.end", run_id=run_id, limit=None, unfired=[])
        head = history.append("run.evidence", run_id=run_id, final="done", final_raw=None, own_effects=[],
                              limit=None, options={}, leftovers=[], crashes={}, incarnations=[])
        history.append("checkpoint.write", run_id=run_id, of=head.i, seq=1, cursor="charge", status="running",
                       app=f"{run_id}#1")
        history.append("attempt", run_id=run_id, of=head.i, record={"service": "ledger", "key": "k"})
        history.append("effect", run_id=run_id, of=head.i, record={"service": "ledger", "key": "k"})
    return run_id


def timed(read, repeat: int = 7) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        read()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--events-per-trial", type=int, default=150)
    p.add_argument("--trials", default="100,1000,10000", help="session lengths, in trials (comma-separated)")
    args = p.parse_args(argv)
    print(f"one trial's evidence read back, {args.events_per_trial} events per trial (median of 7)")
    print(f"{'trials':>8} {'events':>9}  {'whole journal':>14}  {'the run only':>13}  ratio  {'held':>8}")
    proc = psutil.Process()
    for trials in (int(t) for t in args.trials.split(",")):
        history = None  # the previous session's events go before this one's are counted
        gc.collect()
        before = proc.memory_info().rss
        history = History()
        last = fill(history, trials, args.events_per_trial)
        held = max(0, proc.memory_info().rss - before)
        full = timed(lambda: from_history(history.events(), last))  # noqa: B023 - used at once
        own = timed(lambda: from_history(history.of_run(last), last))  # noqa: B023
        print(f"{trials:>8} {len(history):>9}  {full * 1000:>11.2f} ms  {own * 1000:>10.3f} ms  {full / own:6.1f}x"
              f"  {held / 2**20:5.0f} MB")
        history.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
