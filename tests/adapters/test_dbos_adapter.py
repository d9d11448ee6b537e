"""Runs of DBOS workers stay apart across trials: a run left unfinished is retired once its evidence is read
(harness/adapters/dbos.py `retire`, called by harness/run/evidence.py `gather`), so a later run's worker
never executes it.

The leftover is the state DBOS's own recovery leaves when an incarnation dies between re-enqueueing its
workflow at launch and dequeueing it (dbos `SystemDatabase.reenqueue_for_recovery`: PENDING -> ENQUEUED on
the internal queue): every process of the application dequeues from that queue, whatever its executor id.
Runs that go at the same time (`-j`) are kept apart by a fence instead (`fence`): a process of one active run
that dequeues another's workflow has the claim skipped, and the run's own successor takes it.
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
    # then until nothing of the application is queued (or what is, this process was refused by killpoint's
    # fence) and nothing this process took is unfinished
    with psycopg.connect(os.environ["DATABASE_URL"], autocommit=True) as conn:
        refused = ("AND NOT EXISTS (SELECT 1 FROM killpoint_fenced f WHERE f.workflow = w.workflow_uuid "
                   "AND f.inc = current_setting('killpoint.inc', true))"
                   if conn.execute("SELECT to_regclass('killpoint_fenced')").fetchone()[0] else "")
        while conn.execute(f"SELECT count(*) FROM dbos.workflow_status w WHERE (status = 'ENQUEUED' {refused}) "
                           "OR (status = 'PENDING' AND executor_id = %s)", (RUN,)).fetchone()[0]:
            conn.execute("SELECT pg_sleep(0.05)")
finally:
    DBOS.destroy()
'''

REENQUEUE = ("UPDATE dbos.workflow_status SET status = 'ENQUEUED', queue_name = '_dbos_internal_queue' "
             "WHERE workflow_uuid = %s AND status = 'PENDING'")
"""What DBOS's recovery at launch does to a dead executor's workflow (dbos/_sys_db.py reenqueue_for_recovery)."""


def worker(script: Path, dsn: str, run_id: str, mode: str, inc: str | None = None) -> int:
    """Run the worker; with `inc`, its sessions are named as the harness names an incarnation's."""
    env = {**os.environ, "DATABASE_URL": dsn}
    if inc is not None:
        env["PGOPTIONS"] = f"-c killpoint.inc={inc}"
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


def active(conn: psycopg.Connection, *runs: str) -> None:
    """What the harness installs before the fence (harness/env/environment.py `_hold_table`: the audit trail's
    writer, the barrier table), and the runs as it marks them while they are attached (sqlbarrier.py)."""
    from killpoint.env import audit, sqlbarrier

    audit.install(conn, hold=get("dbos").hold)
    sqlbarrier.install(conn, hold=get("dbos").hold)
    for run in runs:
        conn.execute("INSERT INTO killpoint_barrier (run_id, key) VALUES (%s, %s)", (run, sqlbarrier.key_of(run)))


def test_a_fenced_runs_queued_workflow_is_left_to_its_own_runs_process(pg_dsn, left_queued):
    """run-a and run-b at the same time: run-b's process (incarnation run-b#1) is refused run-a's workflow,
    which stays queued until run-a's successor (run-a#2) takes it up and runs it."""
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        active(conn, "run-a", "run-b")
        get("dbos").fence(conn)
    assert worker(left_queued, pg_dsn, "run-b", "run", inc="run-b#1") == 0
    assert row(pg_dsn, "run-b") == ("SUCCESS", "run-b")
    assert row(pg_dsn, "run-a") == ("ENQUEUED", "run-a")  # nobody ran it
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        refused = conn.execute("SELECT DISTINCT workflow, run_id, inc FROM killpoint_fenced").fetchall()
    assert refused == [("run-a", "run-a", "run-b#1")]
    assert worker(left_queued, pg_dsn, "run-a", "run", inc="run-a#2") == 0
    assert row(pg_dsn, "run-a") == ("SUCCESS", "run-a")


def claims(dsn: str, inc: str | None, ids: list[str]) -> list[str]:
    """The rows a dequeue by `inc` flips (DBOS's claim: ENQUEUED -> PENDING, RETURNING), rolled back."""
    options = {"options": f"-c killpoint.inc={inc}"} if inc else {}
    with psycopg.connect(dsn, **options) as conn:  # type: ignore[arg-type]
        flipped = conn.execute("UPDATE dbos.workflow_status SET status = 'PENDING' WHERE workflow_uuid = ANY(%s) "
                               "AND status = 'ENQUEUED' RETURNING workflow_uuid", (ids,)).fetchall()
        conn.rollback()
    return sorted(r[0] for r in flipped)


def test_the_fence_finds_a_child_workflows_run_and_lets_every_other_claim_through(pg_dsn, left_queued):
    """A child workflow (its parent run-a) is run-a's; a claim within the run, by a session that is no
    incarnation, or of a workflow of no active run, is DBOS's own and goes through; `unfence` removes it."""
    copy = ("INSERT INTO dbos.workflow_status SELECT (jsonb_populate_record(NULL::dbos.workflow_status, "
            "to_jsonb(w) || jsonb_build_object('workflow_uuid', %s::text, 'parent_workflow_id', %s::text))).* "
            "FROM dbos.workflow_status w WHERE workflow_uuid = 'run-a'")
    adapter = get("dbos")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(copy, ("run-a-1", "run-a"))
        conn.execute(copy, ("run-a-1-1", "run-a-1"))
        conn.execute(copy, ("gone-1", None))  # a workflow of no active run
        active(conn, "run-a", "run-b")
        adapter.fence(conn)
        adapter.fence(conn)  # idempotent
    every = ["gone-1", "run-a", "run-a-1", "run-a-1-1"]
    assert claims(pg_dsn, "run-b#3", every) == ["gone-1"]
    assert claims(pg_dsn, "run-a#2", every) == every
    assert claims(pg_dsn, None, every) == every  # the harness's own sessions, a user's unnamed ones
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        adapter.unfence(conn)
        assert conn.execute("SELECT count(*) FROM pg_trigger WHERE tgname = 'killpoint_fence_trigger'").fetchone() == (0,)
    assert claims(pg_dsn, "run-b#3", every) == every
