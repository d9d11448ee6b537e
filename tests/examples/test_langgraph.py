"""examples/langgraph: an invoice graph on LangGraph (PostgresSaver), crash-tested as written, through the
CLI with `--adapter langgraph`: the bare email's duplicate is found by exactly_once with a replay line that
reproduces it, and the keyed email passes `killpoint run` (every applicable scenario) with no UNKNOWN, but
for a resume on a clock stepped back (`mixed-faults`' `clock-1h`), which LangGraph's time-ordered checkpoint
ids genuinely cannot survive: that FAIL is the framework's, and its block says so and how to avoid it.
LangGraph has no fencing: the example's advisory lock per thread is what makes a thawed zombie and its
successor never run one thread at once."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph and langgraph-checkpoint-postgres are not "
                    "installed: pip install 'killpoint[langgraph]'")
pytest.importorskip("resend", reason="the resend SDK is not installed: pip install 'killpoint[langgraph]'")

from killpoint.adapters.langgraph import CLOCK_NOTE  # noqa: E402
from tests.examples.forked import assert_fork_matches_exec  # noqa: E402
from tests.examples.frameworks import (  # noqa: E402
    KEYED_PASS,
    KEYED_SKIP,
    SCENARIO_LINE,
    assert_duplicate_found,
    assert_each_schedule_once,
    cli,
    run_dirs,
    worker_cmd,
)
from tests.helpers.checks import describe  # noqa: E402

EXAMPLE = "langgraph/invoice_graph.py"


def test_bare_email_duplicate_is_found_and_its_replay_reproduces_it(sandbox):
    assert_duplicate_found(sandbox, "langgraph", EXAMPLE)


def test_forked_incarnations_give_the_verdicts_of_exec_d_ones(sandbox):
    """The bare graph under a clock jump after Resend applied the email: the crash-free runs and the first
    incarnation are forked, the successor from the servers under libfaketime; the duplicate is found either way,
    with the same verdicts as when every incarnation is exec'd."""
    found = assert_fork_matches_exec(sandbox, "langgraph", EXAMPLE, "mixed-faults", "email:effect.applied:clock+366d")
    (trial,) = [t for r in found for t in r["trials"]]
    assert trial["outcome"] == "fail" and any(v["checker"] == "exactly_once" and v["outcome"] == "fail"
                                              for v in trial["verdicts"]), trial


def test_a_resume_on_a_clock_stepped_back_fails_forked_as_exec_d(sandbox):
    """The keyed graph resumed an hour behind after plan's checkpoint (PostgresSaver's hazard): forked from
    the servers under libfaketime, the trial FAILs with the adapter's note, as it does exec'd (libfaketime
    moves the clock LangGraph's uuid6 ids read either way)."""
    found = assert_fork_matches_exec(sandbox, "langgraph", EXAMPLE, "mixed-faults", "plan:checkpoint.writing:clock-1h",
                                     keyed=True)
    (trial,) = [t for r in found for t in r["trials"]]
    notes = trial.get("notes", [])
    assert trial["outcome"] == "fail" and len(notes) == 1 and notes[0].startswith(CLOCK_NOTE.split("{", 1)[0]), trial


@pytest.mark.slow
def test_keyed_email_passes_the_whole_suite_but_a_resume_on_a_clock_stepped_back(sandbox):
    """`killpoint run` on the keyed graph: every scenario PASS or SKIP but `mixed-faults`, which FAILs; its
    only non-passing trials are backward clock jumps (each step's `checkpoint.writing:clock-1h` among them),
    each with the adapter's note naming LangGraph's time-ordered checkpoint ids and the fix; no UNKNOWN."""
    proc = cli(sandbox, "run", "--seed", "1", "--budget", "2", "--adapter", "langgraph",
               "--worker-cmd", worker_cmd(EXAMPLE, keyed=True), timeout=3600)
    outcomes = {name: outcome for outcome, name in SCENARIO_LINE.findall(proc.stdout)}
    assert proc.returncode == 1, describe(proc)
    assert outcomes.pop("mixed-faults", None) == "FAIL", describe(proc)
    assert outcomes and set(outcomes.values()) <= {"PASS", "SKIP"}, (outcomes, describe(proc))
    assert "UNKNOWN" not in proc.stdout, describe(proc)
    assert all(outcomes.get(n) == "PASS" for n in KEYED_PASS) and all(outcomes.get(n) == "SKIP" for n in KEYED_SKIP), \
        (outcomes, describe(proc))
    assert outcomes["sampling-model"] == "SKIP", outcomes  # the graph asks no model: nothing to sample
    head = CLOCK_NOTE.split("{", 1)[0]
    assert f"runtime: {head}" in proc.stdout, describe(proc)
    (verdicts,) = [json.loads((d / "verdicts.json").read_text()) for d in run_dirs(sandbox)]
    bad = {(r["scenario"], t["schedule"]): t.get("notes", []) for r in verdicts for t in r["trials"]
           if t["outcome"] not in ("pass", "n/a")}
    assert {s for s, _ in bad} == {"mixed-faults"}, bad
    assert {f"{step}:checkpoint.writing:clock-1h" for step in ("plan", "email", "record")} <= {s for _, s in bad}, bad
    for (_, schedule), notes in bad.items():
        assert "clock-" in schedule and len(notes) == 1 and notes[0].startswith(head), (schedule, notes)
    assert_each_schedule_once(verdicts)
    assert not sandbox.survivors(), sandbox.survivors()


def test_a_zombie_is_never_run_beside_its_successor_because_of_the_thread_lock(sandbox):
    """Every freeze of `zombie-worker` passes, and each successor was held by the example's advisory lock
    on the thread (the nemesis thawed the zombie because the successor waited on its lock); without the
    lock, 6 of the 8 schedules fail fenced_zombie and no_rewind (LangGraph 1.2)."""
    proc = cli(sandbox, "explore", "--scenario", "zombie-worker", "--exhaustive", "--adapter", "langgraph",
               "--worker-cmd", worker_cmd("langgraph/invoice_graph.py", keyed=True))
    assert proc.returncode == 0, describe(proc)
    assert dict((n, o) for o, n in SCENARIO_LINE.findall(proc.stdout)) == {"zombie-worker": "PASS"}, describe(proc)
    thaws = [json.loads(line)["why"] for d in run_dirs(sandbox) for line in (d / "history.jsonl").read_text().splitlines()
             if json.loads(line)["type"] == "thaw"]
    assert len(thaws) == 8 and set(thaws) == {"successor waits on a lock the zombie holds"}, thaws
    assert not sandbox.survivors(), sandbox.survivors()
