"""examples/langgraph: an invoice graph on LangGraph (PostgresSaver), crash-tested as written, through the
CLI with `--adapter langgraph`: the bare email's duplicate is found by exactly_once with a replay line that
reproduces it, and the keyed email passes `killpoint run` (every applicable scenario) with no UNKNOWN.
LangGraph has no fencing: the example's advisory lock per thread is what makes a thawed zombie and its
successor never run one thread at once."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("langgraph.checkpoint.postgres", reason="langgraph and langgraph-checkpoint-postgres are not "
                    "installed: pip install 'killpoint[langgraph]'")
pytest.importorskip("resend", reason="the resend SDK is not installed: pip install 'killpoint[langgraph]'")

from tests.examples.frameworks import (  # noqa: E402
    SCENARIO_LINE,
    assert_duplicate_found,
    assert_keyed_passes,
    cli,
    run_dirs,
    worker_cmd,
)
from tests.helpers.checks import describe  # noqa: E402

EXAMPLE = "langgraph/invoice_graph.py"


def test_bare_email_duplicate_is_found_and_its_replay_reproduces_it(sandbox):
    assert_duplicate_found(sandbox, "langgraph", EXAMPLE)


@pytest.mark.slow
def test_keyed_email_passes_the_whole_suite(sandbox):
    assert_keyed_passes(sandbox, "langgraph", EXAMPLE)


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
