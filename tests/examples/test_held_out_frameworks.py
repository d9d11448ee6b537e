"""Held-out framework agents (tests/examples/agents), run as their users run them, each beside a correct
lookalike, a few targeted trials each (a framework worker is a fresh interpreter importing its framework):

- a LangGraph graph invoked with `durability="exit"` checkpoints only after every node ran: no scenario has
  a fault point in a node, and each says so, and why, and is never PASS (nor a traceback); the same graph
  with `durability="sync"` is testable and passes;
- a LangGraph graph whose emails go out in parallel branches of one superstep (a fan-in, or `Send`
  packets) passes keyed at the schedules that failed it before, and fails exactly_once bare;
- a LangGraph loop (a node revisited once per customer) is faulted at every pass: keyed by the pass it
  passes, and a manager copied without a key from the second pass on fails, only at later occurrences;
- a DBOS workflow calling Stripe with the SDK's random keys creates a second PaymentIntent when recovered
  after Stripe applied the first: exactly_once names that PaymentIntent (the refund of it is a knock-on, not
  "extra"); with keys from the workflow id it passes. The history's `run.begin` names the worker command
  that ran, not the reference agent.
"""

from __future__ import annotations

import re
import shlex
import sys

import pytest

from tests.examples.frameworks import SCENARIO_LINE, cli
from tests.helpers import REPO
from tests.helpers.checks import describe, failing_checkers

AGENTS = REPO / "tests" / "examples" / "agents"


def worker(script: str, *args: str) -> str:
    return " ".join(shlex.quote(a) for a in (sys.executable, str(AGENTS / script))) + " {run_id} " + " ".join(args)


@pytest.fixture
def langgraph():
    pytest.importorskip("langgraph.checkpoint.postgres", reason="pip install 'killpoint[langgraph]'")


@pytest.fixture
def dbos():
    pytest.importorskip("dbos", reason="pip install 'killpoint[dbos]'")
    pytest.importorskip("stripe", reason="pip install 'killpoint[sdks]'")


def test_a_graph_that_checkpoints_only_at_exit_is_never_passed_and_says_why(sandbox, langgraph):
    graph = worker("lg_durability.py", "--durability", "exit", "--no-email")
    ran = cli(sandbox, "run", "--scenario", "crash-points", "--scenario", "db-crash", "--scenario", "deploy-drain",
              "--budget", "5", "--adapter", "langgraph", "--worker-cmd", graph)
    explored = cli(sandbox, "explore", "--exhaustive", "--scenario", "crash-points", "--adapter", "langgraph",
                   "--worker-cmd", graph)
    for proc, names in ((ran, {"crash-points", "db-crash", "deploy-drain"}), (explored, {"crash-points"})):
        # nothing was tested: never a pass, and exit 2 (error[nothing-tested]) naming the hint, as a session
        # whose every scenario was skipped
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, describe(proc)
        error = [x for x in proc.stderr.splitlines() if "error[nothing-tested]" in x]
        assert len(error) == 1 and "durability='sync'" in error[0], describe(proc)
        assert dict((n, o) for o, n in SCENARIO_LINE.findall(proc.stdout)) == dict.fromkeys(names, "UNKNOWN"), \
            describe(proc)
        for name in names:
            line = next(x for x in proc.stdout.splitlines() if re.match(rf"UNKNOWN\s+{name}\s+0 schedules", x))
            assert "nothing to test" in line and "durability='sync'" in line, line


def test_the_same_graph_checkpointing_each_node_is_tested_and_passes(sandbox, langgraph):
    proc = cli(sandbox, "replay", "--scenario", "crash-points", "--schedule", "email:checkpoint.committed:kill",
               "--adapter", "langgraph", "--worker-cmd", worker("lg_durability.py", "--durability", "sync"))
    assert proc.returncode == 0 and re.search(r"^PASS\s+crash-points\s+1 schedules", proc.stdout, re.MULTILINE), \
        describe(proc)


@pytest.mark.parametrize(("shape", "schedule"), [
    ("fan-in", "copy:checkpoint.writing:term"),   # before: read as done before `record` (same_final_state)
    ("fan-in", "email:effect.received:kill"),     # before: copy's keyed repeat charged to no fault (bounded_rework)
    ("send", "plan:checkpoint.writing:term"),     # before: read as done with the packets unsent (exactly_once)
])
def test_a_keyed_graph_sending_in_parallel_passes(sandbox, langgraph, shape, schedule):
    """Branches of one superstep (a fan-in joined by `add_edge([...], "record")`, or `Send` packets): the
    run is not done while a complete join or a packet waits (both are blobs, not checkpoint values), and a
    kill in one branch repeats what the others had sent too, one keyed repeat each."""
    proc = cli(sandbox, "replay", "--scenario", "crash-points", "--schedule", schedule, "--adapter", "langgraph",
               "--worker-cmd", worker("lg_parallel.py", "--shape", shape, "--keyed"))
    assert proc.returncode == 0 and re.search(r"^PASS\s+crash-points\s+1 schedules", proc.stdout, re.MULTILINE), \
        describe(proc)


@pytest.mark.parametrize("shape", ["fan-in", "send"])
def test_the_same_graph_sending_bare_fails_exactly_once(sandbox, langgraph, shape):
    """The look-alike without keys: a kill while the branches are in flight sends an email twice."""
    bare = cli(sandbox, "explore", "--scenario", "crash-points", "--exhaustive", "--actions", "kill",
               "--adapter", "langgraph", "--worker-cmd", worker("lg_parallel.py", "--shape", shape))
    assert bare.returncode == 1 and "exactly_once" in failing_checkers(bare.stdout), describe(bare)


@pytest.mark.parametrize("cc", [False, True], ids=["keyed", "cc-manager"])
def test_a_graph_loops_later_pass_is_faulted_at_every_occurrence(sandbox, langgraph, cc):
    """A node revisited by a conditional edge (`remind`, once per customer): the sweep faults each pass, not
    only the first (`@2`, `@3`...). Keyed by the pass kept in the state, it passes; copying the manager
    without a key from the second pass on sends a copy twice, which only a fault inside a later pass shows."""
    args = ["--cc-manager"] if cc else []
    proc = cli(sandbox, "explore", "--scenario", "crash-points", "--exhaustive", "--actions", "kill", "--adapter",
               "langgraph", "--worker-cmd", worker("lg_reminders.py", *args))
    schedules = [e["schedule"] for e in sandbox.events() if e["type"] == "verdict"]
    assert any("@3" in s for s in schedules), describe(proc)
    if not cc:
        assert proc.returncode == 0, describe(proc)
        return
    assert proc.returncode == 1 and set(failing_checkers(proc.stdout)) == {"exactly_once"}, describe(proc)
    failed = [e["schedule"] for e in sandbox.events() if e["type"] == "verdict" and e["outcome"] == "fail"]
    assert failed and all("@" in s for s in failed), failed


@pytest.mark.parametrize("keys", ["random", "workflow"])
def test_random_sdk_keys_make_a_second_payment_intent_and_it_is_named(sandbox, dbos, keys):
    cmd = worker("dbos_payments.py", "--keys", keys)
    proc = cli(sandbox, "replay", "--scenario", "crash-points", "--schedule", "charge:effect.applied:kill",
               "--adapter", "dbos", "--worker-cmd", cmd)
    begun = [e for e in sandbox.events() if e["type"] == "run.begin"]
    assert begun and all(e["worker_cmd"] == cmd and e["adapter"] == "dbos" and e.get("steps") is None for e in begun)
    if keys == "workflow":
        assert proc.returncode == 0, describe(proc)
        return
    assert proc.returncode == 1 and failing_checkers(proc.stdout) == ["exactly_once"], describe(proc)
    extras = re.findall(r"^\s+extra x\d+: (stripe POST \S+)", proc.stdout, re.MULTILINE)
    assert extras == ["stripe POST /v1/payment_intents"], describe(proc)
    assert "-- a duplicate: the same payload as key=" in proc.stdout, describe(proc)
    assert re.search(r"knock-on: payload differs: stripe POST /v1/refunds", proc.stdout), describe(proc)
