"""examples/dbos: an invoice workflow on DBOS, crash-tested as written, through the CLI with `--adapter dbos`:
the bare email's duplicate is found by exactly_once with a replay line that reproduces it; the keyed email
passes `killpoint run` (every applicable scenario) with no UNKNOWN; every run has an executor id of its own."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("dbos", reason="dbos is not installed: pip install 'killpoint[dbos]'")
pytest.importorskip("resend", reason="the resend SDK is not installed: pip install 'killpoint[dbos]'")

from tests.examples.frameworks import assert_duplicate_found, assert_keyed_passes, cli, run_dirs, worker_cmd  # noqa: E402
from tests.helpers.checks import describe  # noqa: E402

EXAMPLE = "dbos/invoice_workflow.py"


def test_bare_email_duplicate_is_found_and_its_replay_reproduces_it(sandbox):
    assert_duplicate_found(sandbox, "dbos", EXAMPLE)


def test_each_run_has_an_executor_id_of_its_own(sandbox):
    """Two runs of one session never share a DBOS executor: each workflow was run by the executor named
    after its own run id (so DBOS's recovery at launch never picks up another run's workflow)."""
    proc = cli(sandbox, "replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
               "--adapter", "dbos", "--worker-cmd", worker_cmd(EXAMPLE, keyed=True))
    assert proc.returncode == 0, describe(proc)
    (run_dir,) = run_dirs(sandbox)
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    finals = {e["run_id"]: e["final"] for e in events if e["type"] == "run.evidence"}
    assert len(finals) >= 3, finals  # two crash-free runs and the faulted one
    for run_id, final in finals.items():
        assert final["executor_id"] == run_id, (run_id, final)


@pytest.mark.slow
def test_keyed_email_passes_the_whole_suite(sandbox):
    assert_keyed_passes(sandbox, "dbos", EXAMPLE)
