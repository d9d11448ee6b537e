"""A zombie is thawed on what its own run shows, never on another run's locks (harness/run/nemesis.py).

Trials at `-j 2` on one database (`--dsn`) each have a SQL barrier session, all named `killpoint-barrier`.
The nemesis thaws a frozen zombie early when its successor is stuck behind the zombie's held commit
(`BLOCKED_BY_SQL`). Before the fix it read *any* barrier's waiters: trial 1's zombie frozen inside its
commit (`plan:checkpoint.writing:stop`, its successor waiting on its row) thawed trial 2's zombie while
trial 2's successor was still running. The two then ran side by side, the outbox relay of
tests/gallery/blackbox/outbox_marks_sent.py re-sent a row the other had in flight, and a correct agent
failed bounded_rework (CI, stop 40).

Here two runs' barriers and sessions are real Postgres sessions: run A shows the stuck pattern, and the
queries must see it for A and not for B.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack

import psycopg
import pytest

from killpoint.env import sqlbarrier
from killpoint.run.nemesis import BLOCKED_BY_SQL, ZOMBIE_TXN_SQL

WAITING_SQL = "SELECT count(*) FROM pg_stat_activity WHERE application_name = ANY(%s) AND wait_event_type = 'Lock'"


def session(stack: ExitStack, dsn: str, name: str) -> psycopg.Connection:
    return stack.enter_context(psycopg.connect(dsn, autocommit=True, application_name=name))


@pytest.fixture
def run_a_stuck(pg_dsn: str) -> Iterator[tuple[psycopg.Connection, int, int]]:
    """Run A's zombie (`A#1`) waits inside its checkpoint commit at A's barrier, holding its row lock, and
    A's successor (`A#2`) waits on that row; run B's barrier is idle. Yields (an observer's connection, A's
    key, B's key); A's barrier lets its zombie go at the end, and both waiting sessions finish."""
    key_a, key_b = sqlbarrier.key_of("A", pg_dsn), sqlbarrier.key_of("B", pg_dsn)
    with ExitStack() as stack:
        observer = session(stack, pg_dsn, "observer")
        observer.execute("CREATE TABLE checkpoints (run_id text PRIMARY KEY, seq int NOT NULL)")
        observer.execute("INSERT INTO checkpoints VALUES ('A', 0)")
        barrier_a = session(stack, pg_dsn, "killpoint-barrier")
        barrier_a.execute("SELECT pg_advisory_lock(%s)", (key_a,))
        session(stack, pg_dsn, "killpoint-barrier").execute("SELECT pg_advisory_lock(%s)", (key_b,))
        zombie, successor = session(stack, pg_dsn, "A#1"), session(stack, pg_dsn, "A#2")

        def commit_held() -> None:  # what the deferred trigger does at COMMIT: wait for the barrier
            with zombie.transaction():
                zombie.execute("UPDATE checkpoints SET seq = 1 WHERE run_id = 'A'")
                zombie.execute("SELECT pg_advisory_xact_lock_shared(%s)", (key_a,))

        threads = [threading.Thread(target=commit_held),
                   threading.Thread(target=successor.execute, args=("UPDATE checkpoints SET seq = seq + 1",))]
        threads[0].start()
        while observer.execute(WAITING_SQL, (["A#1"],)).fetchone()[0] < 1:  # type: ignore[index]
            pass  # server state: the zombie holds its row and waits at the barrier
        threads[1].start()
        while observer.execute(WAITING_SQL, (["A#1", "A#2"],)).fetchone()[0] < 2:  # type: ignore[index]
            pass  # the successor waits on the zombie's row
        try:
            yield observer, key_a, key_b
        finally:
            barrier_a.execute("SELECT pg_advisory_unlock(%s)", (key_a,))
            for t in threads:
                t.join(timeout=30)


def test_the_successor_stuck_behind_its_zombie_is_seen_for_its_own_run(
        run_a_stuck: tuple[psycopg.Connection, int, int]) -> None:
    observer, key_a, _ = run_a_stuck
    names = {"successor": "A#2", "zombie": "A#1", "key": key_a}
    assert observer.execute(BLOCKED_BY_SQL, names).fetchone() is not None
    assert observer.execute(ZOMBIE_TXN_SQL, names).fetchone() is not None


@pytest.mark.parametrize("key", ["b", None], ids=["another-barrier", "no-barrier"])
def test_another_runs_stuck_successor_does_not_thaw_this_runs_zombie(
        run_a_stuck: tuple[psycopg.Connection, int, int], key: str | None) -> None:
    """Run B (its own barrier idle, or none: a white-box run) sees nothing of A's stuck sessions."""
    observer, _, key_b = run_a_stuck
    names = {"successor": "B#2", "zombie": "B#1", "key": key_b if key else None}
    assert observer.execute(BLOCKED_BY_SQL, names).fetchone() is None
    assert observer.execute(ZOMBIE_TXN_SQL, names).fetchone() is None
