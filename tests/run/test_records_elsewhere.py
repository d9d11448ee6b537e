"""A black-box worker whose records are not where killpoint reads them: its crash-free run fails with no
faults, and the message says where they went and the fix, not "it never wrote a checkpoint" (before).

- Under an id of its own (a LangGraph thread id written in the code, a DBOS workflow started with another
  id, a run id fixed in `--worker-cmd`): the message names the ids its records hold instead, and
  `{run_id}` / `$KILLPOINT_RUN_ID`. A worker that takes its run id from `$KILLPOINT_RUN_ID` instead of its
  command line looks like one, and passes.
- In another store (LangGraph's in-memory checkpointer, DBOS's SQLite default when the config names no
  `system_database_url`): the framework's table was never created in the run's database, and the message
  says to keep the records in `DATABASE_URL`."""

from __future__ import annotations

import shlex
import sys

import pytest

from tests.helpers import REPO
from tests.helpers.checks import describe
from tests.helpers.sandbox import Sandbox

PY = shlex.quote(sys.executable)
GALLERY = REPO / "tests" / "gallery" / "blackbox"
EXAMPLES = REPO / "examples"


@pytest.mark.parametrize(("adapter", "needs", "command", "own"), [
    ("dbos", "dbos", f"{PY} {REPO}/examples/dbos/invoice_workflow.py fixed-id --keyed", "fixed-id"),
    ("langgraph", "langgraph.checkpoint.postgres", f"{PY} {REPO}/examples/langgraph/invoice_graph.py thread-1 --keyed",
     "thread-1"),
    (None, "psycopg", f"{PY} {GALLERY}/outbox_marks_sent.py invoice-7", "invoice-7"),
], ids=["dbos-workflow-id", "langgraph-thread-id", "seeds-table-run-id"])
def test_a_worker_that_records_under_an_id_of_its_own_is_told_which_and_how_to_fix_it(
        sandbox: Sandbox, dsn_args: list[str], adapter: str | None, needs: str, command: str, own: str) -> None:
    pytest.importorskip(needs)
    done = sandbox.run("run", "--scenario", "crash-points", "--worker-cmd", command,
                       *(["--adapter", adapter] if adapter else []), *dsn_args, "--out", str(sandbox.out),
                       timeout=240)
    assert done.returncode == 1, describe(done)
    first = next(line for line in done.stdout.splitlines() if line.startswith("FAIL:"))
    assert "fails with no faults: it recorded nothing under its run id 'baseline-1'" in first, describe(done)
    assert f"run ids killpoint did not give it ('{own}')" in first and "$KILLPOINT_RUN_ID" in first, first
    assert "Traceback" not in done.stderr, done.stderr
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []


def test_a_worker_that_reads_its_run_id_from_the_environment_passes(sandbox: Sandbox, dsn_args: list[str]) -> None:
    """No `{run_id}` in the command: the id comes from `$KILLPOINT_RUN_ID`, which every incarnation is given."""
    command = f"sh -c 'exec {PY} {GALLERY}/outbox_marks_sent.py \"$KILLPOINT_RUN_ID\"'"
    done = sandbox.run("replay", "--scenario", "crash-points", "--schedule", "email:effect.applied:kill",
                       "--worker-cmd", command, *dsn_args, "--out", str(sandbox.out),
                       timeout=240)
    assert done.returncode == 0, describe(done)
    assert "recorded nothing under its run id" not in done.stdout, describe(done)
    assert sandbox.survivors() == []


IN_MEMORY = {
    "langgraph": ("langgraph.checkpoint.postgres", EXAMPLES / "langgraph" / "invoice_graph.py",
                  '    with PostgresSaver.from_conn_string(os.environ["DATABASE_URL"]) as saver:\n        saver.setup()\n',
                  '    from langgraph.checkpoint.memory import InMemorySaver\n    if True:\n        saver = InMemorySaver()\n',
                  "the langgraph table checkpoints was never created"),
    "dbos": ("dbos", EXAMPLES / "dbos" / "invoice_workflow.py", '"system_database_url": os.environ["DATABASE_URL"],',
             "", "the dbos table dbos.operation_outputs was never created"),
}


@pytest.mark.parametrize("adapter", list(IN_MEMORY))
def test_a_worker_that_keeps_its_records_out_of_the_database_is_told_to_keep_them_there(
        sandbox: Sandbox, dsn_args: list[str], adapter: str) -> None:
    """The example as a user might first write it: LangGraph's InMemorySaver, DBOS with no
    `system_database_url` (DBOS then keeps its system database in a SQLite file)."""
    needs, example, old, new, says = IN_MEMORY[adapter]
    pytest.importorskip(needs)
    text = example.read_text()
    assert old in text
    (sandbox.cwd / "worker.py").write_text(text.replace(old, new))
    done = sandbox.run("run", "--scenario", "crash-points", "--adapter", adapter, "--worker-cmd",
                       f"{PY} worker.py {{run_id}} --keyed", *dsn_args, "--out", str(sandbox.out), timeout=240)
    assert done.returncode == 1, describe(done)
    first = next(line for line in done.stdout.splitlines() if line.startswith("FAIL:"))
    assert f"fails with no faults: it recorded nothing: {says}" in first, describe(done)
    assert "DATABASE_URL" in first and "Traceback" not in done.stderr, describe(done)
    assert sandbox.survivors() == [] and sandbox.leftover_dirs() == []
