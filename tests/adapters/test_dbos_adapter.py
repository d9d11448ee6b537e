"""Runs of DBOS workers stay apart across trials: a run left unfinished is retired once its evidence is read
(harness/adapters/dbos.py `retire`, called by harness/run/evidence.py `gather`), so a later run's worker
never executes it.

The leftover is the state DBOS's own recovery leaves when an incarnation dies between re-enqueueing its
workflow at launch and dequeueing it (dbos `SystemDatabase.reenqueue_for_recovery`: PENDING -> ENQUEUED on
the internal queue): every process of the application dequeues from that queue, whatever its executor id.
Real DBOS processes, a real Postgres; the outcome read is which executor ran the first run's workflow."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import psycopg
import pytest

pytest.importorskip("dbos", reason="dbos is not installed: pip install 'killpoint[dbos]'")

from killpoint.adapters import get  # noqa: E402
from killpoint.run import evidence as evidence_mod  # noqa: E402

WORKER = '''
import os, sys
import psycopg
from dbos import DBOS, SetWorkflowID

RUN, MODE = sys.argv[1], sys.argv[2]

@DBOS.step()
def work() -> str:
    if MODE == "crash":
        os._exit(9)  # killed inside its step: the workflow stays PENDING
    return DBOS.workflow_id

@DBOS.workflow()
def flow() -> str:
    return work()

DBOS(config={"name": "isolation", "system_database_url": os.environ["DATABASE_URL"], "executor_id": RUN,
             "application_version": "1"})
DBOS.launch()
try:
    with SetWorkflowID(RUN):
        flow()
    # then until nothing of the application is queued and nothing this process took is unfinished
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        while conn.execute("SELECT count(*) FROM dbos.workflow_status WHERE status = 'ENQUEUED' "
                           "OR (status = 'PENDING' AND executor_id = %s)", (RUN,)).fetchone()[0]:
            conn.execute("SELECT pg_sleep(0.05)")
finally:
    DBOS.destroy()
'''

REENQUEUE = ("UPDATE dbos.workflow_status SET status = 'ENQUEUED', queue_name = '_dbos_internal_queue' "
             "WHERE workflow_uuid = %s AND status = 'PENDING'")
"""What DBOS's recovery at launch does to a dead executor's workflow (dbos/_sys_db.py reenqueue_for_recovery)."""


def worker(script: Path, dsn: str, run_id: str, mode: str) -> int:
    env = {**os.environ, "DATABASE_URL": dsn}
    return subprocess.run([sys.executable, str(script), run_id, mode], env=env, timeout=300,
                          capture_output=True).returncode


def row(dsn: str, run_id: str) -> tuple[str, str]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        found = conn.execute("SELECT status, executor_id FROM dbos.workflow_status WHERE workflow_uuid = %s",
                             (run_id,)).fetchone()
    assert found is not None, run_id
    return found[0], found[1]


@pytest.fixture
def left_queued(pg_dsn: str, tmp_path: Path) -> Iterator[Path]:
    """Run `run-a` killed in its step, then put back on DBOS's internal queue as recovery does."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    assert worker(script, pg_dsn, "run-a", "crash") == 9
    assert row(pg_dsn, "run-a") == ("PENDING", "run-a")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute(REENQUEUE, ("run-a",)).rowcount == 1
    yield script


def test_without_retiring_a_later_runs_worker_runs_the_queued_workflow(pg_dsn, left_queued):
    """The hazard itself (what the harness must prevent): run-b's process executes run-a's workflow."""
    assert worker(left_queued, pg_dsn, "run-b", "run") == 0
    assert row(pg_dsn, "run-a") == ("SUCCESS", "run-b")


def test_a_retired_run_is_not_run_by_a_later_runs_worker(pg_dsn, left_queued):
    adapter = get("dbos")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert adapter.retire(conn, "run-a") == 1
        assert adapter.status(conn, "run-a") == "failed"
    assert worker(left_queued, pg_dsn, "run-b", "run") == 0
    assert row(pg_dsn, "run-a") == ("CANCELLED", "run-a")  # nobody ran it
    assert row(pg_dsn, "run-b") == ("SUCCESS", "run-b")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert adapter.retire(conn, "run-b") == 0  # a finished run is left as it is


def test_gathering_a_runs_evidence_retires_it_after_reading_it(pg_dsn, left_queued):
    """The evidence holds the run as it was (running); only then is it retired, and the next run's worker
    leaves it alone."""
    services = SimpleNamespace(attempts=lambda _r: [], effects=lambda _r: [], model_requests=lambda _r: [])

    @contextlib.contextmanager
    def pooled() -> Iterator[psycopg.Connection]:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            yield conn

    env = SimpleNamespace(adapter=get("dbos"), services=services, pooled=pooled)
    gathered = evidence_mod.gather(env, "run-a", [], None, limit=None)  # type: ignore[arg-type]
    assert gathered.head.final is not None and gathered.head.final["status"] == "running"
    assert row(pg_dsn, "run-a")[0] == "CANCELLED"
    assert worker(left_queued, pg_dsn, "run-b", "run") == 0
    assert row(pg_dsn, "run-a") == ("CANCELLED", "run-a")


def test_retiring_before_dboss_tables_exist_retires_nothing(pg_dsn):
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert get("dbos").retire(conn, "run-x") == 0
