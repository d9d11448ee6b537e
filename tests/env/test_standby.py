"""The fork server's standby (harness/env/forkserver.py): a child forked ahead with the next incarnation's
Postgres session open. A spawn whose connection settings match is handed to it: the incarnation's session
then reads as its own (the audit trail names it), the standby is never counted as an orphan, a standby of
other settings is dropped rather than used, one whose session a restart ended connects afresh, and nothing
of it is left after `close()`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

from killpoint.env.fork_launcher import ForkLauncher
from killpoint.env.launcher import Incarnation
from killpoint.env.postgres import PostgresHandle, conninfo
from killpoint.env.stepmodule import DEFAULT_STEPS
from killpoint.env.worker_env import pg_options
from killpoint.faults.schedule import Schedule
from killpoint.reference_agent.schema import ensure_schema
from killpoint.run.trial import Session
from tests.env.test_launcher import Held
from tests.helpers.agents import wait_for
from tests.helpers.harness import harness_session

STANDBY = "killpoint-standby"


@pytest.fixture(scope="module")
def session(pg_server: PostgresHandle, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Session]:
    """A harness session on a `--dsn` database: its DSN carries options (the session's search_path), the
    case where the incarnation's name is in the DSN itself."""
    with harness_session(pg_server, tmp_path_factory.mktemp("standby"), "test_standby") as s:
        yield s


def test_a_resumed_incarnation_runs_on_a_standby_and_the_audit_trail_names_it(session: Session) -> None:
    session.baseline()
    # Each server's standby is forked at its first spawn: after one trial, both servers have one.
    assert session.trial(Schedule.parse("charge:effect.applied:kill")).outcome == "pass"
    launcher = session.env.launcher
    assert isinstance(launcher, ForkLauncher)
    standbys: list[set[int | None]] = []
    spawn = launcher.spawn

    def spawn_and_note(*args: object, **kwargs: object) -> Incarnation:
        standbys.append({server.standby for server in launcher._servers})  # those waiting before this spawn
        return spawn(*args, **kwargs)  # type: ignore[arg-type]

    launcher.spawn = spawn_and_note  # type: ignore[method-assign]
    try:
        trial = session.trial(Schedule.parse("charge:effect.applied:kill"))
    finally:
        del launcher.spawn
    assert trial.outcome == "pass", trial.verdicts
    incs = [e for e in trial.evidence.events if e["type"] == "inc.start" and e.get("run_id") == trial.run_id]
    assert len(incs) == 2
    assert all(e["pid"] in before for e, before in zip(incs, standbys, strict=True)), (incs, standbys)
    with session.env.connect() as conn:
        apps = conn.execute("SELECT app, seq FROM killpoint_audit WHERE run_id = %s ORDER BY id",
                            (trial.run_id,)).fetchall()
    names = [app for app, _ in apps]
    assert names and set(names) == {e["inc"] for e in incs}, apps  # every write named by its own incarnation
    assert names == sorted(names), apps  # the first incarnation's writes, then the resumed one's
    # Each standby built the SDK's client from the previous spawn's environment (another run's URLs): the
    # incarnation's model requests still reach its own run's fake.
    asked = {e["inc"] for e in trial.evidence.events if e["type"] == "point" and e.get("source") == "model"
             and e.get("run_id") == trial.run_id}
    assert incs[0]["inc"] in asked and asked <= {e["inc"] for e in incs}, asked


@pytest.fixture
def dsn(pg_dsn: str) -> str:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        ensure_schema(conn)
    return pg_dsn


def db_env(dsn: str, inc: str, options: str | None = None) -> dict[str, str]:
    """The variables by which the harness names an incarnation's session (DATABASE_URL, PGAPPNAME, PGOPTIONS)."""
    return {"DATABASE_URL": conninfo.for_worker(dsn, inc), "PGAPPNAME": inc, "PGOPTIONS": pg_options(options, inc)}


def env_of(dsn: str, held: Held, inc: str, options: str | None = None) -> dict[str, str]:
    """An incarnation's environment as the harness names it (`db_env`, its kill-point socket and name)."""
    return {**os.environ, **db_env(dsn, inc, options), "KILLPOINT_SOCKET": str(held.server.path),
            "KILLPOINT_INCARNATION": inc}


def sessions(dsn: str) -> list[str]:
    with psycopg.connect(dsn, autocommit=True, application_name="test-standby") as conn:
        rows = conn.execute("SELECT application_name FROM pg_stat_activity WHERE datname = current_database()"
                            " AND application_name <> 'test-standby' ORDER BY 1").fetchall()
    return [r[0] for r in rows]


def held_at_first_point(launcher: ForkLauncher, held: Held, dsn: str, run: str, tmp_path: Path,
                        options: str | None = None) -> Incarnation:
    held.reached.clear()
    inc = launcher.spawn(f"{run}#1", run, "worker", [run], env_of(dsn, held, f"{run}#1", options),
                         str(tmp_path / f"{run}.log"))
    assert held.reached.wait(timeout=30), (tmp_path / f"{run}.log").read_text()
    return inc


def test_standbys_are_no_orphans_other_settings_drop_them_and_close_leaves_nothing(dsn: str, tmp_path: Path) -> None:
    held = Held(tmp_path / "kp.sock")
    launcher = ForkLauncher([DEFAULT_STEPS])
    server = launcher._servers[0]  # the first incarnation of every run comes from the first server
    try:
        first = held_at_first_point(launcher, held, dsn, "r-1", tmp_path)
        wait_for(lambda: server.standby is not None and STANDBY in sessions(dsn), 10, "the standby's session")
        waiting = server.standby
        assert waiting is not None and waiting != first.pid
        assert psutil.Process(waiting).ppid() == server.pid
        assert launcher.adopted() == []  # a standby is no orphan
        assert sessions(dsn) == sorted(["r-1#1", STANDBY])

        second = held_at_first_point(launcher, held, dsn, "r-2", tmp_path)  # same settings: the standby runs it
        assert second.pid == waiting
        # The next standby's pid is known at its fork, its session only once it has connected: wait for both.
        wait_for(lambda: server.standby not in (None, waiting) and STANDBY in sessions(dsn), 10,
                 "the next standby's session")
        assert sorted(sessions(dsn)) == sorted(["r-1#1", "r-2#1", STANDBY])

        dropped = server.standby
        assert dropped is not None
        third = held_at_first_point(launcher, held, dsn, "r-3", tmp_path, options="-c statement_timeout=5000")
        assert third.pid != dropped  # other connection settings: forked afresh, the standby dropped
        wait_for(lambda: not psutil.pid_exists(dropped), 10, "the dropped standby to be reaped")
        assert launcher.adopted() == []
        kept = [first.pid, second.pid, third.pid, server.standby]
    finally:
        held.release.set()
        launcher.close()
        held.server.close()
    assert not [pid for pid in kept if pid and psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    wait_for(lambda: sessions(dsn) == [], 10, "every session of the workers and standbys to end")


@contextlib.contextmanager
def first_server(tmp_path: Path) -> Iterator[tuple[Held, ForkLauncher, Any]]:
    """A fork launcher of the reference agent, its first server (where the first incarnation of every run
    comes from) and the kill-point socket holding workers at their first point; all closed after."""
    held = Held(tmp_path / "kp.sock")
    launcher = ForkLauncher([DEFAULT_STEPS])
    try:
        yield held, launcher, launcher._servers[0]
    finally:
        held.release.set()
        launcher.close()
        held.server.close()


def test_a_standby_connects_to_the_kill_point_socket_ahead_and_the_incarnation_keeps_that_connection(
        dsn: str, tmp_path: Path) -> None:
    """The barrier knows a connection by the pid at its other end: the standby's, connected before any spawn
    names it, is the incarnation's when it becomes one (no second connection: the same peer reads its
    reports)."""
    with first_server(tmp_path) as (held, launcher, server):
        held_at_first_point(launcher, held, dsn, "r-1", tmp_path)
        wait_for(lambda: server.standby is not None and server.standby in held.server._peers, 10,
                 "the standby's connection to the kill-point socket")
        waiting = server.standby
        peer = held.server._peers[waiting]
        assert peer.unhandled == 0 and not peer.busy  # it has said nothing yet
        second = held_at_first_point(launcher, held, dsn, "r-2", tmp_path)
        assert second.pid == waiting and held.server._peers[waiting] is peer and peer.busy


def test_a_standby_whose_session_ended_connects_afresh(dsn: str, tmp_path: Path) -> None:
    """A db-crash restart ends every session, the standby's too: the incarnation it becomes opens its own."""
    with first_server(tmp_path) as (held, launcher, server):
        held_at_first_point(launcher, held, dsn, "r-1", tmp_path)
        wait_for(lambda: STANDBY in sessions(dsn), 10, "the standby's session")
        waiting = server.standby
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
                         (STANDBY,))
        wait_for(lambda: STANDBY not in sessions(dsn), 10, "the standby's session to end")
        second = held_at_first_point(launcher, held, dsn, "r-2", tmp_path)
        assert second.pid == waiting and second.alive()
        assert "r-2#1" in sessions(dsn)


def test_a_table_dropped_after_the_standby_checked_is_made_again_by_the_incarnation(dsn: str, tmp_path: Path) -> None:
    """The incarnation a standby becomes checks the runtime's tables in the same round trip that renames its
    session (`worker.take_session`), not at the standby's fork: a table dropped in between is created again
    before the run needs it."""
    with first_server(tmp_path) as (held, launcher, server):
        held_at_first_point(launcher, held, dsn, "r-1", tmp_path)
        wait_for(lambda: STANDBY in sessions(dsn), 10, "the standby's session (its table check made)")
        waiting = server.standby
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP TABLE leases")
        second = held_at_first_point(launcher, held, dsn, "r-2", tmp_path)  # its lease is taken: the table is back
        assert second.pid == waiting
        with psycopg.connect(dsn, autocommit=True) as conn:
            assert conn.execute("SELECT owner FROM leases WHERE run_id = 'r-2'").fetchone() is not None


@pytest.mark.parametrize("options", [None, "-c search_path=public"])
def test_the_standby_prepares_the_statement_that_renames_its_session_for_the_incarnation(dsn: str,
                                                                                         options: str | None) -> None:
    """The standby runs `worker.take_session` with its own names (`conninfo.standby_env`) before the spawn;
    the incarnation's run of it, with the names of `db_env`, is the same prepared statement (no parse, no
    plan at the spawn): one statement prepared in the session, and the session named for the incarnation."""
    from killpoint.reference_agent import worker  # noqa: PLC0415

    env = db_env(dsn, "r-9#2", options)
    ahead = conninfo.standby_env(env, STANDBY)
    with psycopg.connect(ahead["DATABASE_URL"], autocommit=True) as conn:
        ensure_schema(conn)
        worker.take_session(conn, conninfo.identity(ahead))
        assert conn.execute("SELECT current_setting('application_name')").fetchone() == (STANDBY,)
        assert worker.take_session(conn, conninfo.identity(env))
        prepared = conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()
        assert len(prepared) == 1 and "set_config" in prepared[0][0], prepared
        assert conn.execute("SELECT current_setting('application_name'), current_setting('killpoint.inc', true)"
                            ).fetchone() == ("r-9#2", "r-9#2")


def test_a_spawn_longer_than_the_pipe_holds_is_forked_afresh(dsn: str, tmp_path: Path) -> None:
    """A standby still connecting reads nothing yet: a command the pipe cannot hold at once would block
    the server, so it goes to a new fork instead (and the standby is dropped)."""
    with first_server(tmp_path) as (held, launcher, server):
        held_at_first_point(launcher, held, dsn, "r-1", tmp_path)
        wait_for(lambda: server.standby is not None, 10, "the standby")
        waiting = server.standby
        held.reached.clear()
        big = {**env_of(dsn, held, "r-2#1"), "KP_TEST_BIG": "x" * 70_000}
        second = launcher.spawn("r-2#1", "r-2", "worker", ["r-2"], big, str(tmp_path / "r-2.log"))
        assert held.reached.wait(timeout=30), (tmp_path / "r-2.log").read_text()
        assert second.pid != waiting
        assert waiting is not None
        wait_for(lambda: not psutil.pid_exists(waiting), 10, "the dropped standby to be reaped")


def test_a_child_takes_exactly_the_incarnations_environment() -> None:
    """`_environ_to` (what a forked child and a standby do instead of `clear()` + `update()`): afterwards the
    environment is `env`, variables it lacks unset, changed ones changed, for Python and for C (`getenv` in a
    child process). Run in a subprocess, so the test process keeps its own."""
    code = """
import os, subprocess, sys
from killpoint.env.forkserver import _environ_to
os.environ.update(KP_GONE="1", KP_SAME="same", KP_CHANGED="old")
env = {k: v for k, v in os.environ.items() if k != "KP_GONE"}
env.update(KP_CHANGED="new", KP_ADDED="added")
_environ_to(env)
assert dict(os.environ) == env, set(os.environ.items()) ^ set(env.items())
seen = subprocess.run(["env"], capture_output=True, text=True, check=True).stdout.splitlines()
assert {"KP_SAME=same", "KP_CHANGED=new", "KP_ADDED=added"} <= set(seen) and "KP_GONE=1" not in seen, seen
print("ok")
"""
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "ok", out.stderr
