"""The sweeper (stalled runs get one resume job), the queue worker, and retention."""

from __future__ import annotations

import json
import subprocess
import sys
import threading

import psycopg

from killpoint.reference_agent.queue import claim, enqueue_resume
from killpoint.reference_agent.retention import sweep_retention
from killpoint.reference_agent.sweeper import sweep_stalled
from tests.helpers import REPO
from tests.helpers.agents import AgentEnv, agent_fixture  # noqa: F401 (the `agent` fixture)


def put(conn: psycopg.Connection, run_id: str, status: str, age_seconds: float = 0,
        lease_seconds: float | None = None) -> None:
    """A checkpoint row last written ``age_seconds`` ago, with a lease expiring in ``lease_seconds``
    (negative: expired; None: no lease)."""
    data = {"run_id": run_id, "seq": 1, "status": status}
    conn.execute("INSERT INTO checkpoints (run_id, seq, status, data, updated_at) "
                 "VALUES (%s, 1, %s, %s, now() - %s * interval '1 second')",
                 (run_id, status, json.dumps(data), age_seconds))
    if lease_seconds is not None:
        conn.execute("INSERT INTO leases VALUES (%s, 'w', now() + %s * interval '1 second')",
                     (run_id, lease_seconds))


def jobs(conn: psycopg.Connection) -> list[tuple[str, str, str, str]]:
    return conn.execute("SELECT id, run_id, kind, state FROM jobs ORDER BY id").fetchall()


def test_sweeper_queues_exactly_the_stalled_runs(agent: AgentEnv) -> None:
    conn = agent.conn
    put(conn, "stale", "running", age_seconds=600)
    put(conn, "stale-live-lease", "running", age_seconds=600, lease_seconds=30)
    put(conn, "lease-expired", "running", lease_seconds=-1)
    put(conn, "paused", "paused", age_seconds=1)
    put(conn, "moving", "running", lease_seconds=30)
    put(conn, "moving-no-lease", "running")
    put(conn, "paused-but-taken", "paused", lease_seconds=30)
    put(conn, "done", "done", age_seconds=600, lease_seconds=-1)
    put(conn, "failed", "failed", age_seconds=600)
    queued = sweep_stalled(conn, stale_seconds=300)
    expected = ["lease-expired", "paused", "stale", "stale-live-lease"]
    assert sorted(queued) == expected
    assert jobs(conn) == [(f"resume-{r}", r, "resume", "queued") for r in expected]
    assert sweep_stalled(conn, stale_seconds=300) == []  # already queued: not again
    assert len(jobs(conn)) == 4


def test_two_sweepers_at_once_queue_each_run_once(agent: AgentEnv) -> None:
    runs = [f"r-{i:03}" for i in range(150)]
    for run_id in runs:
        put(agent.conn, run_id, "running", lease_seconds=-1)
    start = threading.Barrier(2)
    found: list[list[str]] = []

    def sweeper() -> None:
        with psycopg.connect(agent.dsn, autocommit=True) as conn:
            start.wait()
            found.append(sweep_stalled(conn, limit=1000))

    threads = [threading.Thread(target=sweeper) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(found) == 2
    assert sorted(found[0] + found[1]) == runs  # each run queued by exactly one of them
    assert [j[0] for j in jobs(agent.conn)] == [f"resume-{r}" for r in runs]


def test_sweeper_command_and_queue_worker_resume_a_crashed_run(agent: AgentEnv) -> None:
    """Crash at the replay trap; the sweeper (run twice) queues one job; a queue worker finishes the run."""
    agent.crash_at("r-q", "email", "effect.responded")
    env = agent.env("r-q")
    outs = [subprocess.run([sys.executable, "-m", "killpoint.reference_agent.sweeper", "--stale-seconds", "300"],
                           env=env, cwd=REPO, capture_output=True, text=True, timeout=60) for _ in range(2)]
    assert [o.returncode for o in outs] == [0, 0]
    assert [o.stdout for o in outs] == ["r-q\n", ""]
    worker = agent.run("r-q", "--queue")
    assert worker.proc.returncode == 0, worker.output
    assert agent.row("r-q")["data"]["cursor"] == "done"
    assert jobs(agent.conn) == []
    assert len(agent.effects("r-q", "mailer")) == 1


def test_claim_takes_each_job_once(agent: AgentEnv) -> None:
    for run_id in ("a", "b"):
        assert enqueue_resume(agent.conn, run_id)
    assert not enqueue_resume(agent.conn, "a")
    with psycopg.connect(agent.dsn) as other:  # holds its claim's row lock until commit
        first = claim(other)
        second = claim(agent.conn)  # skips the locked row instead of waiting for it
        assert first is not None and second is not None
        assert {first.run_id, second.run_id} == {"a", "b"}
        assert claim(agent.conn) is None
        other.commit()
    assert jobs(agent.conn) == []


def test_retention_deletes_only_old_terminal_runs(agent: AgentEnv) -> None:
    conn = agent.conn
    put(conn, "old-done", "done", age_seconds=7200, lease_seconds=-1)
    put(conn, "old-failed", "failed", age_seconds=7200)
    put(conn, "new-done", "done", age_seconds=10)
    put(conn, "old-running", "running", age_seconds=7200)
    put(conn, "old-paused", "paused", age_seconds=7200)
    assert sweep_retention(conn, older_than_seconds=3600) == ["old-done", "old-failed"]
    left = [r[0] for r in conn.execute("SELECT run_id FROM checkpoints ORDER BY run_id")]
    assert left == ["new-done", "old-paused", "old-running"]
    assert conn.execute("SELECT count(*) FROM leases").fetchone() == (0,)
    assert sweep_retention(conn, older_than_seconds=3600) == []
