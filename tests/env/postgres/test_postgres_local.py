"""The ``local`` provider: start/stop leaves nothing behind, crash+restart keeps committed rows."""

from __future__ import annotations

import os

import psutil
import psycopg
import pytest

from killpoint.env.postgres import provide
from killpoint.env.postgres.binaries import find_local

pytestmark = pytest.mark.skipif(find_local() is None, reason="no Postgres server binaries on this machine")


def server_pids_under(path: str) -> list[int]:
    """Pids of processes whose cwd is inside ``path`` (a postmaster runs with cwd = its data dir)."""
    pids = []
    for proc in psutil.process_iter(["pid", "name"]):
        try:
            if proc.info["name"] in ("postgres", "postmaster") and proc.cwd().startswith(path):
                pids.append(proc.pid)
        except psutil.Error:
            continue
    return pids


def test_local_start_stop_leaves_no_process_or_folder() -> None:
    with provide("local") as pg:
        assert pg.kind == "local" and pg.owned
        folder = str(pg.dir)
        pm = psutil.Process(pg.proc.pid)
        children = pm.children()
        assert server_pids_under(folder)
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("select current_database()").fetchone() == ("killpoint",)
            listen = conn.execute("show listen_addresses").fetchone()[0]
            assert listen == "127.0.0.1"
        if os.geteuid() == 0:
            assert pm.username() != "root"
    assert not os.path.exists(folder)
    assert not server_pids_under(folder)
    assert not pm.is_running() or pm.status() == psutil.STATUS_ZOMBIE
    assert all(not c.is_running() or c.status() == psutil.STATUS_ZOMBIE for c in children)


@pytest.mark.parametrize("hard", [False, True], ids=["sigquit", "sigkill"])
def test_crash_restart_keeps_committed_rows(hard: bool) -> None:
    with provide("local") as pg:
        port = pg.port
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            conn.execute("create table t (x int)")
            conn.execute("insert into t values (1), (2)")
        uncommitted = psycopg.connect(pg.dsn)
        uncommitted.execute("insert into t values (99)")
        pg.crash(hard=hard)
        assert not pg.running
        with pytest.raises(psycopg.OperationalError):
            psycopg.connect(pg.dsn, connect_timeout=2)
        pg.restart()
        assert pg.port == port
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("select x from t order by x").fetchall() == [(1,), (2,)]
        uncommitted.close()


def test_create_database_is_fresh(pg_server, pg_dsn) -> None:
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("create table only_here (x int)")
    again = pg_server.create_database("t_test_create_database_is_fresh")
    assert again == pg_dsn
    with psycopg.connect(again) as conn:
        assert conn.execute("select to_regclass('only_here')").fetchone() == (None,)


def test_a_server_for_many_runs_at_once_has_room_for_them_and_keeps_it_after_a_crash() -> None:
    """A session of `-j 64` (or one that widens to 64) starts its server with `capacity.needed(64)` connection
    slots: one of Postgres's default 100 refused the 101st connection of a zombie-worker exploration at
    `-j 64` (177-194 at once, measured), and the workers it refused died as if the agent had failed. A
    db-crash's restart keeps the room; a default server still holds 100 and says what fits in it."""
    from killpoint.env.postgres.capacity import DEFAULT_SERVER, needed, server_connections

    with provide("local", connections=server_connections(64)) as pg:
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("show max_connections").fetchone() == (str(needed(64)),)
        assert pg.jobs_that_fit(64) == 64
        pg.crash(hard=True)
        pg.restart()
        with psycopg.connect(pg.dsn) as conn:
            assert conn.execute("show max_connections").fetchone() == (str(needed(64)),)
    with provide("local") as pg, psycopg.connect(pg.dsn) as conn:
        assert conn.execute("show max_connections").fetchone() == (str(DEFAULT_SERVER),)
        assert server_connections(2) == DEFAULT_SERVER and pg.jobs_that_fit(64) == 9  # (100 - 4) // 10
